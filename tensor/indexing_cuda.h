#ifndef DTENSOR_TENSOR_INDEXING_CUDA_H_
#define DTENSOR_TENSOR_INDEXING_CUDA_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda_entry.h"
#include "dtensor/tensor/tensor.h"

// The index ops of indexing.h on a CUDA `x` (cuda_entry.h), given the
// normalized `dim` and the index values, read and checked to lie in range on
// the host by the caller (so errors name them as on the CPU); they are copied
// to the device as i64.
namespace dtensor::cuda {

absl::StatusOr<Tensor> IndexSelectOnDevice(const Tensor& x, int64_t dim,
                                           const std::vector<int64_t>& rows);
absl::StatusOr<Tensor> GatherOnDevice(const Tensor& x, int64_t dim,
                                      const Shape& index_shape,
                                      const std::vector<int64_t>& picks);
// Duplicate targets add up by atomicAdd, in an order that varies from run to
// run (so the last bits of floating sums do); bf16/f16 accumulate in a float
// buffer rounded once at the end. `src` must be on x's device.
absl::StatusOr<Tensor> ScatterAddOnDevice(const Tensor& x, int64_t dim,
                                          const Shape& index_shape,
                                          const std::vector<int64_t>& targets,
                                          const Tensor& src);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_INDEXING_CUDA_H_
