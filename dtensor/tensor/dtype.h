#ifndef DTENSOR_TENSOR_DTYPE_H_
#define DTENSOR_TENSOR_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "absl/status/statusor.h"
#include "dtensor/tensor/half.h"

namespace dtensor {

// The element types a Tensor can hold. bf16 and f16 are storage formats:
// kernels compute them in f32.
enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kBool };

// Bytes per element.
size_t ElementSize(DType dtype);

// "f32", "f64", "bf16", "f16", "i32", "i64", "bool".
std::string_view DTypeName(DType dtype);

// Inverse of DTypeName.
// Errors: an unknown name (naming it).
absl::StatusOr<DType> ParseDType(std::string_view name);

bool IsFloatingPoint(DType dtype);

std::ostream& operator<<(std::ostream& os, DType dtype);

// The C++ type stored for a DType, and back.
template <DType D>
struct DTypeToCpp;
template <>
struct DTypeToCpp<DType::kF32> {
  using type = float;
};
template <>
struct DTypeToCpp<DType::kF64> {
  using type = double;
};
template <>
struct DTypeToCpp<DType::kBF16> {
  using type = BFloat16;
};
template <>
struct DTypeToCpp<DType::kF16> {
  using type = Half;
};
template <>
struct DTypeToCpp<DType::kI32> {
  using type = int32_t;
};
template <>
struct DTypeToCpp<DType::kI64> {
  using type = int64_t;
};
template <>
struct DTypeToCpp<DType::kBool> {
  using type = bool;
};

template <typename T>
constexpr DType CppToDType();
template <>
constexpr DType CppToDType<float>() {
  return DType::kF32;
}
template <>
constexpr DType CppToDType<double>() {
  return DType::kF64;
}
template <>
constexpr DType CppToDType<BFloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType CppToDType<Half>() {
  return DType::kF16;
}
template <>
constexpr DType CppToDType<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType CppToDType<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType CppToDType<bool>() {
  return DType::kBool;
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_DTYPE_H_
