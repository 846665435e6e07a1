#include "dtensor/tensor/dtype.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dtensor/base/enum_names.h"

namespace dtensor {

// Storage sizes are the C++ types' sizes: the 16-bit formats and bool must be
// as small as the dtypes they store (tensors are read as raw bytes, by other
// backends and from checkpoints).
static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2 && sizeof(bool) == 1);

size_t ElementSize(DType dtype) {
  switch (dtype) {
#define DTENSOR_DTYPE_SIZE(enumerator, cpp_type) \
  case DType::enumerator:                        \
    return sizeof(cpp_type);
    DTENSOR_FOR_EACH_DTYPE(DTENSOR_DTYPE_SIZE)
#undef DTENSOR_DTYPE_SIZE
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
