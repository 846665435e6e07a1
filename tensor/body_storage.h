#ifndef DTENSOR_TENSOR_BODY_STORAGE_H_
#define DTENSOR_TENSOR_BODY_STORAGE_H_

#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/half.h"
#include "dtensor/tensor/kernel_checks.h"

namespace dtensor {

// The storage type that the kernel bodies of dtensor/tensor/cuda/*_body.h take
// for the tensor layer's element type T: dtensor/tensor/cuda/host_device.h's
// Bf16 and F16 share the layout of BFloat16 and Half, so a CPU kernel running
// a body on a tensor's data reinterprets its pointer as BodyStorage<T>::type.
template <typename T>
struct BodyStorage {
  using type = T;
};
template <>
struct BodyStorage<BFloat16> {
  using type = cuda::Bf16;
};
template <>
struct BodyStorage<Half> {
  using type = cuda::F16;
};

// internal::DispatchFloatingDType in the bodies' storage types: fn(S{}) with
// S = BodyStorage<T>::type for the element type T of `dtype`.
// Requires: IsFloatingPoint(dtype) (debug-checked).
template <typename Fn>
decltype(auto) DispatchFloatingBodyStorage(DType dtype, Fn&& fn) {
  return internal::DispatchFloatingDType(
      dtype, [&fn](auto tag) -> decltype(auto) {
        return fn(typename BodyStorage<decltype(tag)>::type{});
      });
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_BODY_STORAGE_H_
