#include "dtensor/tensor/cuda/adamw_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

template <typename T>
struct AdamWAt {
  T* p;
  T* m;
  T* v;
  const T* g;
  AdamWCoefficients<Compute<T>> k;
  __device__ void operator()(const int64_t* at) const {
    AdamWElement(p + at[0], m + at[1], v + at[2], g + at[3], k);
  }
};

}  // namespace

cudaError_t LaunchAdamW(ScalarType type, void* p, void* m, void* v,
                        const void* g, const StridedShape<4>& shape,
                        int64_t numel, const AdamWCoefficients<double>& k,
                        cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchStrided(
        shape, numel,
        AdamWAt<T>{static_cast<T*>(p), static_cast<T*>(m), static_cast<T*>(v),
                   static_cast<const T*>(g), CoefficientsIn<Compute<T>>(k)},
        stream);
  });
}

}  // namespace dtensor::cuda
