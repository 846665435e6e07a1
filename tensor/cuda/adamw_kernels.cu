#include "dtensor/tensor/cuda/adamw_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/multi_tensor_body.h"

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

// Threads per block of the multi-tensor step: a chunk is 128 elements a
// thread (PyTorch's block size for its fused optimizers).
constexpr int kMultiTensorThreads = 512;

// Block b steps chunk args.block_chunk[b] of tensor args.block_tensor[b]
// (multi_tensor_body.h), its threads striding over the chunk so that
// neighbouring threads touch neighbouring elements.
template <typename T>
__global__ void __launch_bounds__(kMultiTensorThreads)
    AdamWManyKernel(MultiTensorArgs<4> args, AdamWCoefficients<Compute<T>> k) {
  const int tensor = args.block_tensor[blockIdx.x];
  const ElementRange range =
      ChunkRange(args.numel[tensor], args.block_chunk[blockIdx.x]);
  T* const p = static_cast<T*>(args.addresses[0][tensor]);
  T* const m = static_cast<T*>(args.addresses[1][tensor]);
  T* const v = static_cast<T*>(args.addresses[2][tensor]);
  const T* const g = static_cast<const T*>(args.addresses[3][tensor]);
  for (int64_t i = range.begin + threadIdx.x; i < range.end;
       i += kMultiTensorThreads) {
    AdamWElement(p + i, m + i, v + i, g + i, k);
  }
}

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

cudaError_t LaunchAdamWMany(ScalarType type,
                            const MultiTensorOperand<4>* tensors, int64_t count,
                            const AdamWCoefficients<double>& k,
                            cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    const AdamWCoefficients<Compute<T>> coefficients =
        CoefficientsIn<Compute<T>>(k);
    return PlanMultiTensorLaunches(
        tensors, count,
        [&](const MultiTensorArgs<4>& args, int blocks) -> cudaError_t {
          AdamWManyKernel<T>
              <<<blocks, kMultiTensorThreads, 0, stream>>>(args, coefficients);
          return cudaGetLastError();
        });
  });
}

}  // namespace dtensor::cuda
