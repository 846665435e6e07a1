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
#define DTENSOR_DISPATCH_CASE(enumerator, cpp_type) \
  case DType::enumerator:                           \
    return fn(cpp_type{});
    DTENSOR_FOR_EACH_DTYPE(DTENSOR_DISPATCH_CASE)
#undef DTENSOR_DISPATCH_CASE
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
