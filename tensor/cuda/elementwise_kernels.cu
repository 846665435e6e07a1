#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

// out = op(x) (operands 0: out, 1: x).
template <typename Out, typename T>
struct UnaryAt {
  UnaryOp op;
  const T* x;
  Out* out;
  StridedShape<2> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      UnaryElement(op, x + i, out + i);
      return;
    }
    int64_t offsets[2];
    OperandOffsetsAt(shape, i, offsets);
    UnaryElement(op, x + offsets[1], out + offsets[0]);
  }
};

// out = op(a, b) (operands 0: out, 1: a, 2: b).
template <typename Out, typename T>
struct BinaryAt {
  BinaryOp op;
  const T* a;
  const T* b;
  Out* out;
  StridedShape<3> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      BinaryElement(op, a + i, b + i, out + i);
      return;
    }
    int64_t offsets[3];
    OperandOffsetsAt(shape, i, offsets);
    BinaryElement(op, a + offsets[1], b + offsets[2], out + offsets[0]);
  }
};

// out = cond ? a : b (operands 0: out, 1: cond, 2: a, 3: b).
template <typename T>
struct WhereAt {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  StridedShape<4> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      out[i] = cond[i] ? a[i] : b[i];
      return;
    }
    int64_t offsets[4];
    OperandOffsetsAt(shape, i, offsets);
    out[offsets[0]] = cond[offsets[1]] ? a[offsets[2]] : b[offsets[3]];
  }
};

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, ScalarType in_type, ScalarType out_type,
                        const void* x, void* out, const StridedShape<2>& shape,
                        int64_t numel, cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    return Dispatch(out_type, [&](auto out_tag) {
      using Out = decltype(out_tag);
      return LaunchForEachIndex(
          numel,
          UnaryAt<Out, T>{op, static_cast<const T*>(x), static_cast<Out*>(out),
                          shape, contiguous},
          stream);
    });
  });
}

cudaError_t LaunchBinary(BinaryOp op, ScalarType in_type, ScalarType out_type,
                         const void* a, const void* b, void* out,
                         const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    if (out_type == ScalarType::kBool) {
      return LaunchForEachIndex(
          numel,
          BinaryAt<bool, T>{op, x, y, static_cast<bool*>(out), shape,
                            contiguous},
          stream);
    }
    return LaunchForEachIndex(
        numel,
        BinaryAt<T, T>{op, x, y, static_cast<T*>(out), shape, contiguous},
        stream);
  });
}

cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream) {
  const bool contiguous = IsContiguous(shape);
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        numel,
        WhereAt<T>{cond, static_cast<const T*>(a), static_cast<const T*>(b),
                   static_cast<T*>(out), shape, contiguous},
        stream);
  });
}

}  // namespace dtensor::cuda
