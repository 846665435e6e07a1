#ifndef DTENSOR_TESTS_TENSOR_REFERENCE_TENSOR_H_
#define DTENSOR_TESTS_TENSOR_REFERENCE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor::testing {

// The plain model the core tensor tests check against: a shape and its
// elements in row-major order, built by explicit index loops that share no
// code with the strided tensor.
struct RefTensor {
  Shape shape;
  std::vector<double> values;

  int64_t numel() const { return static_cast<int64_t>(values.size()); }
};

// The multi-index of row-major position `flat` in `shape`.
inline std::vector<int64_t> UnravelIndex(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// The row-major position of `index` in `shape`.
inline int64_t RavelIndex(const std::vector<int64_t>& index,
                          const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

// A RefTensor of `shape` whose element at each multi-index is `element(index)`.
inline RefTensor Generate(
    const Shape& shape,
    const std::function<double(const std::vector<int64_t>&)>& element) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  RefTensor result{shape, std::vector<double>(numel)};
  for (int64_t flat = 0; flat < numel; ++flat) {
    result.values[flat] = element(UnravelIndex(flat, shape));
  }
  return result;
}

// The element of `ref` at `index`.
inline double RefAt(const RefTensor& ref, const std::vector<int64_t>& index) {
  return ref.values[RavelIndex(index, ref.shape)];
}

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_REFERENCE_TENSOR_H_
