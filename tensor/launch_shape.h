#ifndef DTENSOR_TENSOR_LAUNCH_SHAPE_H_
#define DTENSOR_TENSOR_LAUNCH_SHAPE_H_

// The iteration shape the CUDA entry points hand their kernels, computed on
// the host; no CUDA header, so that CPU tests check the kernels' index math
// on the shapes the launches really see.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::cuda {

// The iteration shape of `shape` for operands with `strides` (element
// offsets from each operand's data pointer), with size-1 dims dropped and
// dims merged where every operand is contiguous across them.
// Errors: more than kMaxDims dims left (naming `op` and the shape).
template <int N>
absl::StatusOr<StridedShape<N>> Coalesce(
    const Shape& shape, const std::array<const Strides*, N>& strides,
    absl::string_view op) {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool mergeable = !sizes.empty();
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = merged[k].back() == (*strides[k])[d] * shape[d];
    }
    if (mergeable) {
      sizes.back() *= shape[d];
      for (int k = 0; k < N; ++k) merged[k].back() = (*strides[k])[d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < N; ++k) merged[k].push_back((*strides[k])[d]);
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": shape ", ShapeToString(shape), " has more than ",
                     kMaxDims, " dims that cannot be merged"));
  }
  StridedShape<N> result;
  result.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    result.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) result.strides[k][d] = merged[k][d];
  }
  return result;
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_LAUNCH_SHAPE_H_
