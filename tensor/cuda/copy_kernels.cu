#include "dtensor/tensor/cuda/copy_kernels.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/map_launch.cuh"

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
struct CastFn {
  template <typename To, typename From>
  __device__ void operator()(To* out, const From* x) const {
    CastElement(x, out);
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
  return DispatchPair(from, to, [&](auto tag, auto to_tag) {
    using From = decltype(tag);
    using To = decltype(to_tag);
    return LaunchMap(MakeMap<1, To, From>(CastFn{}, out, x), shape, numel,
                     stream);
  });
}

}  // namespace dtensor::cuda
