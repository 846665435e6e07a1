#include "dtensor/tensor/dtype.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dtensor/base/enum_names.h"

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

constexpr EnumNames<DType, DType::kBool> kDTypeNames("f32", "f64", "bf16",
                                                     "f16", "i32", "i64",
                                                     "bool");

std::string_view DTypeName(DType dtype) { return kDTypeNames.Name(dtype); }

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (std::optional<DType> dtype = kDTypeNames.Parse(name)) return *dtype;
  return absl::InvalidArgumentError("unknown dtype \"" + std::string(name) +
                                    "\" (expected one of " +
                                    kDTypeNames.List() + ")");
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 ||
         dtype == DType::kBF16 || dtype == DType::kF16;
}

DType ComputeDTypeOf(DType dtype) {
  return dtype == DType::kF64 ? DType::kF64 : DType::kF32;
}

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << DTypeName(dtype);
}

}  // namespace dtensor
