#ifndef DTENSOR_TENSOR_CUDA_INDEX_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_INDEX_KERNELS_H_

// Launches of the index kernels on a stream (index_body.h's math): the
// embedding lookup and its backward's segmented sum, IndexSelect, Gather and
// ScatterAdd. Each returns the launch error (cudaSuccess when the launch was
// accepted); pointers are device pointers, indices i64 in range.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/index_body.h"

namespace dtensor::cuda {

// out[i, :] = table[indices[i], :] for i < count; an index outside
// [0, num_rows) reads row 0 instead (never memory past the table: its check
// is deferred, LaunchCheckIndices). Requires: num_rows > 0.
cudaError_t LaunchEmbedding(ScalarType type, const int64_t* indices,
                            const void* table, void* out, int64_t count,
                            int64_t dim, int64_t num_rows, cudaStream_t stream);

// The deferred range check of dtensor/tensor/index_checks.h: report[0]
// becomes non-zero when some of the `count` indices lies outside [0, bound),
// and report[1] the first such index in element order (what the CPU's check
// names, whatever order the threads ran in); both 0 when none is. The check
// accumulates in `scratch` (one word, 0 on entry) and leaves it 0 again, so
// the words serve the next check with no fill; report's two words are
// written whole.
cudaError_t LaunchCheckIndices(const int64_t* indices, int64_t count,
                               int64_t bound, unsigned long long* scratch,
                               unsigned long long* report, cudaStream_t stream);

// IndexSelect of contiguous x [outer, size, inner] along its middle dim:
// out [outer, count, inner] (contiguous) takes rows[k] (in range).
cudaError_t LaunchIndexSelect(ScalarType type, const void* x,
                              const int64_t* rows, void* out, int64_t outer,
                              int64_t count, int64_t size, int64_t inner,
                              cudaStream_t stream);

// Gather into contiguous `out` of `count` elements (index_body.h's
// GatherElement).
cudaError_t LaunchGather(ScalarType type, const void* x, const int64_t* picks,
                         void* out, const StridedShape<1>& shape,
                         int64_t pick_stride, int64_t count,
                         cudaStream_t stream);

// ScatterAdd of the `count` elements of `src` into `acc` by atomicAdd
// (index_body.h's ScatterAddElement): `acc` is float for bf16/f16 `src`, of
// src's type otherwise (bool is an invalid value).
cudaError_t LaunchScatterAdd(ScalarType src_type, const void* src,
                             const int64_t* targets, void* acc,
                             const StridedShape<2>& shape,
                             int64_t target_stride, int64_t count,
                             cudaStream_t stream);

// EmbeddingBackward as a sorted, segmented sum (index_body.h): sorts the
// (EmbeddingRowKey, position) pairs of the `count` indices on the device
// (cub's stable radix sort over EmbeddingKeyBits(num_rows) key bits), finds
// each row's segment, then writes every element of contiguous `out`
// [num_rows, width] once, of grad's floating `grad_type`: the sum in float
// (double for f64) of the rows of contiguous grad [count, width] whose index
// is first_row + row, in position order (0 where none). Indices outside
// [first_row, first_row + num_rows) are skipped. No host sync, no
// allocation: `scratch` holds EmbeddingBackwardScratchBytes(count, num_rows)
// bytes (8-byte aligned), free for reuse once the launches have run.
// Requires: count, width, num_rows > 0; first_row >= 0; the current device
// is out's (the scratch size can depend on it).
cudaError_t EmbeddingBackwardScratchBytes(int64_t count, int64_t num_rows,
                                          size_t* bytes);
cudaError_t LaunchEmbeddingBackward(ScalarType grad_type, const void* grad,
                                    const int64_t* indices, void* out,
                                    int64_t count, int64_t width,
                                    int64_t first_row, int64_t num_rows,
                                    void* scratch, size_t scratch_bytes,
                                    cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_INDEX_KERNELS_H_
