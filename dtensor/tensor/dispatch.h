#ifndef DTENSOR_TENSOR_DISPATCH_H_
#define DTENSOR_TENSOR_DISPATCH_H_

#include <type_traits>

#include "absl/status/status.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

// Calls `fn(T{})` with T the C++ type stored for `dtype`; the value passed is
// only a type tag. Returns whatever `fn` returns.
//
//   DispatchDType(t.dtype(), [&](auto tag) {
//     using T = decltype(tag);
//     ...
//   });
template <typename Fn>
decltype(auto) DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF64:
      return fn(double{});
    case DType::kBF16:
      return fn(BFloat16{});
    case DType::kF16:
      return fn(Half{});
    case DType::kI32:
      return fn(int32_t{});
    case DType::kI64:
      return fn(int64_t{});
    case DType::kBool:
      return fn(bool{});
  }
  return fn(float{});  // Unreachable: every enumerator is handled above.
}

// The type kernels compute in for storage type T: float for the 16-bit
// floats, T itself otherwise.
template <typename T>
using ComputeType =
    std::conditional_t<std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>,
                       float, T>;

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_DISPATCH_H_
