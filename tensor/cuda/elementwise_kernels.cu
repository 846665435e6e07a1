#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

// out = op(x) at operand offsets (0: out, 1: x).
template <typename Out, typename T>
struct UnaryAt {
  UnaryOp op;
  const T* x;
  Out* out;
  __device__ void operator()(const int64_t* at) const {
    UnaryElement(op, x + at[1], out + at[0]);
  }
};

// out = op(a, b) at operand offsets (0: out, 1: a, 2: b).
template <typename Out, typename T>
struct BinaryAt {
  BinaryOp op;
  const T* a;
  const T* b;
  Out* out;
  __device__ void operator()(const int64_t* at) const {
    BinaryElement(op, a + at[1], b + at[2], out + at[0]);
  }
};

// out = cond ? a : b at operand offsets (0: out, 1: cond, 2: a, 3: b).
template <typename T>
struct WhereAt {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(const int64_t* at) const {
    out[at[0]] = cond[at[1]] ? a[at[2]] : b[at[3]];
  }
};

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, ScalarType in_type, ScalarType out_type,
                        const void* x, void* out, const StridedShape<2>& shape,
                        int64_t numel, cudaStream_t stream) {
  return DispatchPair(in_type, out_type, [&](auto tag, auto out_tag) {
    using T = decltype(tag);
    using Out = decltype(out_tag);
    return LaunchStrided(
        shape, numel,
        UnaryAt<Out, T>{op, static_cast<const T*>(x), static_cast<Out*>(out)},
        stream);
  });
}

cudaError_t LaunchBinary(BinaryOp op, ScalarType in_type, ScalarType out_type,
                         const void* a, const void* b, void* out,
                         const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream) {
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    if (out_type == ScalarType::kBool) {
      return LaunchStrided(shape, numel,
                           BinaryAt<bool, T>{op, x, y, static_cast<bool*>(out)},
                           stream);
    }
    return LaunchStrided(
        shape, numel, BinaryAt<T, T>{op, x, y, static_cast<T*>(out)}, stream);
  });
}

cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchStrided(
        shape, numel,
        WhereAt<T>{cond, static_cast<const T*>(a), static_cast<const T*>(b),
                   static_cast<T*>(out)},
        stream);
  });
}

}  // namespace dtensor::cuda
