#ifndef DTENSOR_TESTS_TENSOR_KERNEL_BODY_TEST_UTIL_H_
#define DTENSOR_TESTS_TENSOR_KERNEL_BODY_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/half.h"
#include "dtensor/tensor/tensor.h"

// Helpers shared by the tests that run the host forms of the CUDA kernel
// bodies (dtensor/tensor/cuda/*_body.h) against the CPU kernels: the storage
// types of a dtype, the strided shape a launch indexes, and the raw bytes that
// bit-exact comparisons compare.
namespace dtensor::cuda::body_testing {

// Calls fn(Device{}, Host{}) with the kernels' storage type and
// dtensor/tensor/'s for `dtype`.
template <typename Fn>
void ForStorage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{}, float{});
    case DType::kF64:
      return fn(double{}, double{});
    case DType::kBF16:
      return fn(Bf16{}, BFloat16{});
    case DType::kF16:
      return fn(F16{}, Half{});
    case DType::kI32:
      return fn(int32_t{}, int32_t{});
    case DType::kI64:
      return fn(int64_t{}, int64_t{});
    case DType::kBool:
      return fn(bool{}, bool{});
  }
}

// ForStorage for a floating `dtype` only (fn is not instantiated for the
// integer types).
template <typename Fn>
void ForFloatingStorage(DType dtype, Fn&& fn) {
  ForStorage(dtype, [&](auto tag, auto host_tag) {
    if constexpr (std::is_floating_point_v<Compute<decltype(tag)>>) {
      fn(tag, host_tag);
    }
  });
}

// The raw bytes of a contiguous tensor.
std::vector<uint8_t> Bytes(const Tensor& t);

// The StridedShape of `shape` for operands with `strides`, dims as they are
// (the CUDA launches merge dims first, which visits the same elements in the
// same order).
template <int N>
StridedShape<N> StridedShapeOf(const Shape& shape,
                               const std::array<Strides, N>& strides) {
  StridedShape<N> strided;
  strided.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    strided.sizes[d] = shape[d];
    for (int k = 0; k < N; ++k) strided.strides[k][d] = strides[k][d];
  }
  return strided;
}

}  // namespace dtensor::cuda::body_testing

#endif  // DTENSOR_TESTS_TENSOR_KERNEL_BODY_TEST_UTIL_H_
