#include "dtensor/tensor/cuda/copy_kernels.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

// dst[i] = bits.
template <typename Word>
struct FillAt {
  Word* dst;
  Word bits;
  __device__ void operator()(int64_t i) const { dst[i] = bits; }
};

// out = x converted (operands 0: out, 1: x).
template <typename To, typename From>
struct CastAt {
  const From* x;
  To* out;
  StridedShape<2> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      CastElement(x + i, out + i);
      return;
    }
    int64_t offsets[2];
    OperandOffsetsAt(shape, i, offsets);
    CastElement(x + offsets[1], out + offsets[0]);
  }
};

}  // namespace

cudaError_t LaunchFill(void* dst, size_t count, uint64_t bits,
                       int element_bytes, cudaStream_t stream) {
  const auto fill = [&](auto word) {
    using Word = decltype(word);
    return LaunchForEachIndex(
        static_cast<int64_t>(count),
        FillAt<Word>{static_cast<Word*>(dst), static_cast<Word>(bits)}, stream);
  };
  switch (element_bytes) {
    case 1:
      return fill(uint8_t{});
    case 2:
      return fill(uint16_t{});
    case 4:
      return fill(uint32_t{});
    case 8:
      return fill(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* out,
                       const StridedShape<2>& shape, int64_t numel,
                       cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(from, [&](auto tag) {
    using From = decltype(tag);
    return Dispatch(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      return LaunchForEachIndex(
          numel,
          CastAt<To, From>{static_cast<const From*>(x), static_cast<To*>(out),
                           shape, contiguous},
          stream);
    });
  });
}

}  // namespace dtensor::cuda
