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

// The dtype kernels compute a floating `dtype` in: f64 for f64, f32 for f32
// and for the 16-bit storage formats (rounded once at the end).
DType ComputeDTypeOf(DType dtype);

std::ostream& operator<<(std::ostream& os, DType dtype);

// Every DType with the C++ type stored for it, as X(enumerator, type): the
// one table that DTypeToCpp, CppToDType and DispatchDType (dispatch.h) are
// written from.
#define DTENSOR_FOR_EACH_DTYPE(X) \
  X(kF32, float)                  \
  X(kF64, double)                 \
  X(kBF16, BFloat16)              \
  X(kF16, Half)                   \
  X(kI32, int32_t)                \
  X(kI64, int64_t)                \
  X(kBool, bool)

// The C++ type stored for a DType (DTypeToCpp<D>::type), and back.
template <DType D>
struct DTypeToCpp;
template <typename T>
constexpr DType CppToDType();

#define DTENSOR_DTYPE_AND_CPP(enumerator, cpp_type) \
  template <>                                       \
  struct DTypeToCpp<DType::enumerator> {            \
    using type = cpp_type;                          \
  };                                                \
  template <>                                       \
  constexpr DType CppToDType<cpp_type>() {          \
    return DType::enumerator;                       \
  }
DTENSOR_FOR_EACH_DTYPE(DTENSOR_DTYPE_AND_CPP)
#undef DTENSOR_DTYPE_AND_CPP

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_DTYPE_H_
