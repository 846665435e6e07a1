#ifndef DTENSOR_TENSOR_CUDA_ADAMW_KERNELS_H_
#define DTENSOR_TENSOR_CUDA_ADAMW_KERNELS_H_

// Launch of the fused AdamW step on a stream (adamw_body.h's math). Returns
// the launch error (cudaSuccess when the launch was accepted); pointers are
// device pointers.

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/adamw_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/multi_tensor_body.h"

namespace dtensor::cuda {

// One fused AdamW step in place over `numel` elements of p, m, v (and g)
// laid out by `shape` (operands 0..3), in the compute type of `type`.
cudaError_t LaunchAdamW(ScalarType type, void* p, void* m, void* v,
                        const void* g, const StridedShape<4>& shape,
                        int64_t numel, const AdamWCoefficients<double>& k,
                        cudaStream_t stream);

// One fused AdamW step in place over every element of `tensors[0, count)`
// (contiguous operands p, m, v, g in that order, all of `type`), all with the
// constants `k`: one launch per kMultiTensorMaxTensors tensors or
// kMultiTensorMaxBlocks chunks (multi_tensor_body.h), the addresses passed as
// kernel arguments (no host-to-device copy).
cudaError_t LaunchAdamWMany(ScalarType type,
                            const MultiTensorOperand<4>* tensors, int64_t count,
                            const AdamWCoefficients<double>& k,
                            cudaStream_t stream);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ADAMW_KERNELS_H_
