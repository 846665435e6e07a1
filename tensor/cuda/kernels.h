#ifndef DTENSOR_TENSOR_CUDA_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_KERNELS_H_

// Launches of the device kernels on a stream. Each returns the launch error
// (cudaSuccess when the launch was accepted); pointers are device pointers.
// The per-element and per-row math lives in elementwise_body.h and
// row_body.h, shared with the host forms that the CPU tests check.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include <cstddef>

#include "dtensor/tensor/cuda/adamw_body.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/index_body.h"
#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// Sets the `count` elements of `element_bytes` (1, 2, 4 or 8) at device
// pointer `dst` to the low `element_bytes` bytes of `bits` on `stream`.
cudaError_t LaunchFill(void* dst, size_t count, uint64_t bits,
                       int element_bytes, cudaStream_t stream);

// out = op(x) over `numel` elements laid out by `shape` (operand 0: out,
// 1: x); `out_type` is `in_type`, or kBool for comparisons.
cudaError_t LaunchUnary(UnaryOp op, ScalarType in_type, ScalarType out_type,
                        const void* x, void* out, const StridedShape<2>& shape,
                        int64_t numel, cudaStream_t stream);
// out = op(a, b) (operands 0: out, 1: a, 2: b).
cudaError_t LaunchBinary(BinaryOp op, ScalarType in_type, ScalarType out_type,
                         const void* a, const void* b, void* out,
                         const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream);
// out = cond ? a : b elementwise (operands 0: out, 1: cond, 2: a, 3: b), a
// and b of `type`.
cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream);
// out = x converted from `from` to `to` (operands 0: out, 1: x): casts and
// strided copies.
cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* out,
                       const StridedShape<2>& shape, int64_t numel,
                       cudaStream_t stream);

// Softmax (or log-softmax) of contiguous x seen as [outer, n, inner] along n.
cudaError_t LaunchSoftmax(ScalarType type, const void* x, void* out,
                          int64_t outer, int64_t n, int64_t inner, bool log,
                          cudaStream_t stream);
// RMSNorm of the `rows` contiguous rows of `width`; `weight` may be null.
cudaError_t LaunchRmsNorm(ScalarType type, const void* x, const void* weight,
                          void* out, int64_t rows, int64_t width, double eps,
                          cudaStream_t stream);
// LayerNorm of the `rows` contiguous rows of `width`; `weight` and `bias` may
// be null.
cudaError_t LaunchLayerNorm(ScalarType type, const void* x, const void* weight,
                            const void* bias, void* out, int64_t rows,
                            int64_t width, double eps, cudaStream_t stream);
// losses[r] = logsumexp(row r) - row r[targets[r]], 0 where targets[r] ==
// ignore_index; targets are checked to lie in range before launch. Unless
// null, log_sum_exp[r] = logsumexp(row r) for every row.
cudaError_t LaunchCrossEntropyRows(ScalarType type, const void* logits,
                                   const int64_t* targets, double* losses,
                                   double* log_sum_exp, int64_t rows,
                                   int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream);
// out[r] = reduce(row r of contiguous x [rows, n]) / divisor (divisor 1 for
// sum, max, min and sum of squares; n for mean), stored as `out_type`. A sum
// of squares of a non-floating x is an invalid value.
cudaError_t LaunchReduceRows(ReduceOp op, ScalarType in_type,
                             ScalarType out_type, const void* x, void* out,
                             int64_t rows, int64_t n, double divisor,
                             cudaStream_t stream);
// out[i, :] = table[indices[i], :] for i < count (indices in range).
cudaError_t LaunchEmbedding(ScalarType type, const int64_t* indices,
                            const void* table, void* out, int64_t count,
                            int64_t dim, cudaStream_t stream);
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
// EmbeddingBackward's row index-add by atomicAdd (index_body.h's
// RowIndexAddElement) over contiguous grad [count, width] of a floating
// `grad_type` into contiguous `acc` [num_rows, width], zero-filled by the
// caller: float for bf16/f16 grad (rounded once by the caller), of grad's
// type otherwise. Indices outside [first_row, first_row + num_rows) are
// skipped.
cudaError_t LaunchRowIndexAdd(ScalarType grad_type, const void* grad,
                              const int64_t* indices, void* acc, int64_t count,
                              int64_t width, int64_t first_row,
                              int64_t num_rows, cudaStream_t stream);
// Dropout of contiguous x into contiguous out, `numel` elements
// (random_body.h's DropoutElement); scale = 1 / (1 - p).
cudaError_t LaunchDropout(ScalarType type, const void* x, void* out,
                          const StridedShape<1>& positions, uint64_t base,
                          uint64_t seed, double p, double scale, int64_t numel,
                          cudaStream_t stream);
// One fused AdamW step in place over `numel` elements of p, m, v (and g)
// laid out by `shape` (operands 0..3), in the compute type of `type`.
cudaError_t LaunchAdamW(ScalarType type, void* p, void* m, void* v,
                        const void* g, const StridedShape<4>& shape,
                        int64_t numel, const AdamWCoefficients<double>& k,
                        cudaStream_t stream);
// The attention softmax, in place on f32 or f64 scores [rows, lk], row r being
// query r % lq.
cudaError_t LaunchMaskedSoftmax(ScalarType type, void* scores, int64_t rows,
                                int64_t lq, int64_t lk, bool causal,
                                double scale, cudaStream_t stream);
// Rotary embedding of contiguous x [outer, seq, heads, 2 * half] with
// contiguous f64 tables cos/sin [seq, half].
cudaError_t LaunchRotary(ScalarType type, const void* x, void* out,
                         const double* cos_table, const double* sin_table,
                         int64_t outer, int64_t seq, int64_t heads,
                         int64_t half, cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_KERNELS_H_
