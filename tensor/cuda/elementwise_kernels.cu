#include <type_traits>

#include "dtensor/tensor/cuda/elementwise_dispatch.cuh"
#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/map_launch.cuh"

namespace dtensor::cuda {
namespace {

// The functors of the maps (map_launch.cuh): the bodies of
// elementwise_body.h, operands out first.
template <UnaryOp kOp>
struct UnaryFn {
  template <typename T>
  __device__ void operator()(T* out, const T* x) const {
    UnaryElement(kOp, x, out);
  }
};

template <BinaryOp kOp>
struct BinaryFn {
  template <typename Out, typename T>
  __device__ void operator()(Out* out, const T* a, const T* b) const {
    BinaryElement(kOp, a, b, out);
  }
};

struct WhereFn {
  template <typename T>
  __device__ void operator()(T* out, const bool* cond, const T* a,
                             const T* b) const {
    *out = *cond ? *a : *b;
  }
};

struct SwiGluFn {
  template <typename T>
  __device__ void operator()(T* out, const T* a, const T* b) const {
    SwiGluElement(a, b, out);
  }
};

struct SwiGluBackwardFn {
  template <typename T>
  __device__ void operator()(T* da, T* db, const T* g, const T* a,
                             const T* b) const {
    SwiGluBackwardElement(g, a, b, da, db);
  }
};

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, ScalarType type, const void* x, void* out,
                        const StridedShape<2>& shape, int64_t numel,
                        cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return DispatchUnaryOp(op, [&](auto op_tag) -> cudaError_t {
      constexpr UnaryOp kOp = decltype(op_tag)::value;
      if constexpr (UnaryTakes(kOp, kFloating<T>, kBool<T>)) {
        return LaunchMap(MakeMap<1, T, T>(UnaryFn<kOp>{}, out, x), shape, numel,
                         stream);
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

cudaError_t LaunchBinary(BinaryOp op, ScalarType type, const void* a,
                         const void* b, void* out, const StridedShape<3>& shape,
                         int64_t numel, cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return DispatchBinaryOp(op, [&](auto op_tag) -> cudaError_t {
      constexpr BinaryOp kOp = decltype(op_tag)::value;
      using Out = std::conditional_t<IsComparison(kOp), bool, T>;
      if constexpr (BinaryTakes(kOp, kFloating<T>, kBool<T>)) {
        return LaunchMap(MakeMap<1, Out, T, T>(BinaryFn<kOp>{}, out, a, b),
                         shape, numel, stream);
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchMap(MakeMap<1, T, bool, T, T>(WhereFn{}, out, cond, a, b),
                     shape, numel, stream);
  });
}

cudaError_t LaunchSwiGlu(ScalarType type, const void* a, const void* b,
                         void* out, const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchMap(MakeMap<1, T, T, T>(SwiGluFn{}, out, a, b), shape, numel,
                     stream);
  });
}

cudaError_t LaunchSwiGluBackward(ScalarType type, const void* grad,
                                 const void* a, const void* b, void* da,
                                 void* db, const StridedShape<5>& shape,
                                 int64_t numel, cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchMap(
        MakeMap<2, T, T, T, T, T>(SwiGluBackwardFn{}, da, db, grad, a, b),
        shape, numel, stream);
  });
}

}  // namespace dtensor::cuda
