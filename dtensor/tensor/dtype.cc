#include "dtensor/tensor/dtype.h"

#include <string>

#include "absl/status/status.h"

namespace dtensor {

size_t ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;  // Unreachable: every enumerator is handled above.
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
  }
  return "unknown";  // Unreachable: every enumerator is handled above.
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                      DType::kI32, DType::kI64, DType::kBool}) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return absl::InvalidArgumentError(
      "unknown dtype \"" + std::string(name) +
      "\" (expected one of f32, f64, bf16, f16, i32, i64, bool)");
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 ||
         dtype == DType::kBF16 || dtype == DType::kF16;
}

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << DTypeName(dtype);
}

}  // namespace dtensor
