#ifndef DTENSOR_COLLECTIVES_NCCL_DEVICE_COPY_H_
#define DTENSOR_COLLECTIVES_NCCL_DEVICE_COPY_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "tensor/tensor.h"

namespace dtensor {

// Copies the elements of view `src` into view `dst` (same shape and dtype,
// both on one CUDA device) on `stream`. The tensor layer has no CUDA
// kernels, so strided views are copied as 2-d copies (cudaMemcpy2DAsync):
// one per index of the dims outside the innermost two after merging the
// dims that are contiguous in both views (one copy for contiguous views).
absl::Status CopyViewOnDevice(const Tensor& dst, const Tensor& src,
                              cudaStream_t stream);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_NCCL_DEVICE_COPY_H_
