#ifndef DTENSOR_TENSOR_CUDA_REDUCTION_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_REDUCTION_KERNELS_H_

// Launch of the row reductions on a stream (row_body.h's math): one block
// per row. Returns the launch error (cudaSuccess when the launch was
// accepted); pointers are device pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// out[r] = reduce(row r of contiguous x [rows, n]) / divisor (divisor 1 for
// sum, max, min and sum of squares; n for mean), stored as `out_type`. A sum
// of squares of a non-floating x is an invalid value.
cudaError_t LaunchReduceRows(ReduceOp op, ScalarType in_type,
                             ScalarType out_type, const void* x, void* out,
                             int64_t rows, int64_t n, double divisor,
                             cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_REDUCTION_KERNELS_H_
