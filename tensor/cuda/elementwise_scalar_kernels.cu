// The elementwise maps with a scalar operand passed by value: what a binary
// op or Where with a one-element host operand launches, so that the scalar
// never crosses to the device as a copy (which waits for the stream).

#include <cstring>
#include <type_traits>

#include "dtensor/tensor/cuda/elementwise_dispatch.cuh"
#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/map_launch.cuh"

namespace dtensor::cuda {
namespace {

// The value of type T at host address `p` (a host tensor's element).
template <typename T>
T HostValue(const void* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// The functors of the maps (map_launch.cuh), operands out first; the scalar
// travels in the functor, a kernel argument.
template <BinaryOp kOp, typename T>
struct BinaryScalarFn {
  T scalar;
  bool scalar_first;
  template <typename Out>
  __device__ void operator()(Out* out, const T* x) const {
    BinaryScalarElement(kOp, x, scalar, scalar_first, out);
  }
};

template <typename T>
struct WhereScalarFn {
  T scalar;
  bool scalar_is_a;
  __device__ void operator()(T* out, const bool* cond, const T* x) const {
    WhereScalarElement(cond, x, scalar, scalar_is_a, out);
  }
};

}  // namespace

cudaError_t LaunchBinaryScalar(BinaryOp op, ScalarType type, const void* x,
                               const void* scalar, bool scalar_first, void* out,
                               const StridedShape<2>& shape, int64_t numel,
                               cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return DispatchBinaryOp(op, [&](auto op_tag) -> cudaError_t {
      constexpr BinaryOp kOp = decltype(op_tag)::value;
      using Out = std::conditional_t<IsComparison(kOp), bool, T>;
      if constexpr (BinaryTakes(kOp, kFloating<T>, kBool<T>)) {
        const BinaryScalarFn<kOp, T> fn{HostValue<T>(scalar), scalar_first};
        return LaunchMap(MakeMap<1, Out, T>(fn, out, x), shape, numel, stream);
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

cudaError_t LaunchWhereScalar(ScalarType type, const bool* cond, const void* x,
                              const void* scalar, bool scalar_is_a, void* out,
                              const StridedShape<3>& shape, int64_t numel,
                              cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    const WhereScalarFn<T> fn{HostValue<T>(scalar), scalar_is_a};
    return LaunchMap(MakeMap<1, T, bool, T>(fn, out, cond, x), shape, numel,
                     stream);
  });
}

}  // namespace dtensor::cuda
