#include "dtensor/tensor/cuda/attention_kernels.h"
#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

struct BlockSync {
  __device__ void operator()() const { __syncthreads(); }
};

__device__ Lanes<BlockSync> BlockLanes() {
  return {static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
          BlockSync()};
}

// Every instantiation reads the one dynamic shared buffer as its compute
// type.
template <typename C>
__device__ C* SharedBuffer() {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  return reinterpret_cast<C*>(shared_bytes);
}

template <typename T, typename C>
__global__ void __launch_bounds__(kAttentionThreads)
    AttentionForwardKernel(AttentionForwardArgs<T, C> args) {
  AttentionForwardBlock(args, blockIdx.x, SharedBuffer<C>(), BlockLanes());
}

template <typename T, typename C>
__global__ void __launch_bounds__(kAttentionThreads)
    AttentionBackwardKernel(AttentionBackwardArgs<T, C> args) {
  AttentionBackwardBlock(args, blockIdx.x, SharedBuffer<C>(), BlockLanes(),
                         AtomicAddFn());
}

// delta[r] = RowDelta of row r of dout and out [rows, ev], a warp a row: its
// lanes sum their shares (RowDeltaShare), reading the row coalesced, not a
// thread a row with every thread in a row of its own.
template <typename T, typename C>
__global__ void RowDeltaKernel(const T* dout, const T* out, C* delta,
                               int64_t rows, int64_t ev) {
  constexpr int kWarp = 32;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warps_per_block = blockDim.x / kWarp;
  const int64_t step = warps_per_block * gridDim.x;
  // r is the same for a warp's lanes: the loop and WarpSum stay uniform.
  for (int64_t r = blockIdx.x * warps_per_block + threadIdx.x / kWarp; r < rows;
       r += step) {
    const C sum =
        WarpSum(RowDeltaShare(dout + r * ev, out + r * ev, ev, lane, kWarp));
    if (lane == 0) delta[r] = sum;
  }
}

template <typename C>
AttentionProblem<C> ProblemOf(const AttentionLaunch& a) {
  return {a.lq, a.lk, a.e, a.ev, a.causal, static_cast<C>(a.scale)};
}

// Launches `kernel` on `blocks` blocks of kAttentionThreads threads with
// `bytes` of dynamic shared memory (AllowSharedBytes).
template <typename Args>
cudaError_t LaunchBlocks(void (*kernel)(Args), const Args& args, int64_t blocks,
                         int64_t bytes, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  if (blocks > 2147483647) return cudaErrorInvalidConfiguration;
  const cudaError_t error = AllowSharedBytes(kernel, bytes);
  if (error != cudaSuccess) return error;
  kernel<<<static_cast<unsigned>(blocks), kAttentionThreads,
           static_cast<size_t>(bytes), stream>>>(args);
  return cudaGetLastError();
}

template <typename T, typename C>
cudaError_t ForwardOf(const AttentionLaunch& a, const T* q, const T* k,
                      const T* v, T* out, C* lse, cudaStream_t stream) {
  const AttentionForwardArgs<T, C> args{
      ProblemOf<C>(a), a.batch, q, k, v, out, lse};
  constexpr int64_t kQueries = AttentionTiles<C>::kQueries;
  const int64_t tiles = (a.lq + kQueries - 1) / kQueries;
  return LaunchBlocks(AttentionForwardKernel<T, C>, args, a.entries * tiles,
                      AttentionSharedLayout<C>(a.e, a.ev, false).bytes(),
                      stream);
}

template <typename C>
__global__ void MaskedSoftmaxKernel(C* scores, int64_t lq, int64_t lk,
                                    bool causal, C scale) {
  C* row = scores + blockIdx.x * lk;
  const int64_t visible = VisibleKeys(blockIdx.x % lq, lq, lk, causal);
  const C max =
      BlockReduce(ScaledMaxPartial(row, visible, scale, threadIdx.x, kThreads),
                  MaxCombine());
  const double sum =
      BlockReduce(ExpInPlacePartial(row, visible, max, threadIdx.x, kThreads),
                  AddCombine());
  NormalizeMasked(row, visible, lk, sum, threadIdx.x, kThreads);
}

}  // namespace

cudaError_t LaunchMaskedSoftmax(ScalarType type, void* scores, int64_t rows,
                                int64_t lq, int64_t lk, bool causal,
                                double scale, cudaStream_t stream) {
  if (rows == 0 || lk == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  if (type == ScalarType::kF64) {
    MaskedSoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<double*>(scores), lq, lk, causal, scale);
  } else if (type == ScalarType::kF32) {
    MaskedSoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<float*>(scores), lq, lk, causal, static_cast<float>(scale));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

int64_t AttentionSharedBytes(ScalarType type, int64_t e, int64_t ev,
                             bool backward) {
  return type == ScalarType::kF64
             ? AttentionSharedLayout<double>(e, ev, backward).bytes()
             : AttentionSharedLayout<float>(e, ev, backward).bytes();
}

cudaError_t LaunchAttentionForward(ScalarType type, const AttentionLaunch& a,
                                   const void* q, const void* k, const void* v,
                                   void* out, void* lse, cudaStream_t stream) {
  if (AttentionMmaSupports(type, a, q, k, v, out)) {
    return LaunchAttentionMmaForward(type, a, q, k, v, out,
                                     static_cast<float*>(lse), stream);
  }
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    return ForwardOf<T, C>(a, static_cast<const T*>(q),
                           static_cast<const T*>(k), static_cast<const T*>(v),
                           static_cast<T*>(out), static_cast<C*>(lse), stream);
  });
}

cudaError_t LaunchAttentionBackward(ScalarType type, const AttentionLaunch& a,
                                    const void* q, const void* k, const void* v,
                                    const void* out, const void* dout,
                                    void* lse, bool compute_lse, void* delta,
                                    void* dq, void* dk, void* dv,
                                    cudaStream_t stream) {
  // The tensor cores where they take the problem (dout staged like out).
  const bool mma = AttentionMmaSupports(type, a, q, k, v, dout);
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* q_data = static_cast<const T*>(q);
    const T* k_data = static_cast<const T*>(k);
    const T* v_data = static_cast<const T*>(v);
    // The log-sum-exps unless given: the forward without its output.
    cudaError_t error = cudaSuccess;
    if (compute_lse) {
      error = mma ? LaunchAttentionMmaForward(type, a, q, k, v, nullptr,
                                              static_cast<float*>(lse), stream)
                  : ForwardOf<T, C>(a, q_data, k_data, v_data, nullptr,
                                    static_cast<C*>(lse), stream);
    }
    if (error != cudaSuccess) return error;
    const int64_t rows = a.entries * a.lq;
    if (rows > 0) {
      // 256 threads: 8 rows a block.
      const int64_t grid = (rows + 7) / 8;
      RowDeltaKernel<<<static_cast<unsigned>(grid < 65535 ? grid : 65535), 256,
                       0, stream>>>(static_cast<const T*>(dout),
                                    static_cast<const T*>(out),
                                    static_cast<C*>(delta), rows, a.ev);
      error = cudaGetLastError();
      if (error != cudaSuccess) return error;
    }
    if (mma) {
      return LaunchAttentionMmaBackward(
          type, a, q, k, v, dout, static_cast<const float*>(lse),
          static_cast<const float*>(delta), static_cast<float*>(dq),
          static_cast<float*>(dk), static_cast<float*>(dv), stream);
    }
    const AttentionBackwardArgs<T, C> args{ProblemOf<C>(a),
                                           a.batch,
                                           q_data,
                                           k_data,
                                           v_data,
                                           static_cast<const T*>(dout),
                                           static_cast<const C*>(lse),
                                           static_cast<const C*>(delta),
                                           static_cast<C*>(dq),
                                           static_cast<C*>(dk),
                                           static_cast<C*>(dv)};
    constexpr int64_t kKeys = AttentionTiles<C>::kKeys;
    const int64_t tiles = (a.lk + kKeys - 1) / kKeys;
    return LaunchBlocks(AttentionBackwardKernel<T, C>, args, a.entries * tiles,
                        AttentionSharedLayout<C>(a.e, a.ev, true).bytes(),
                        stream);
  });
}

}  // namespace dtensor::cuda
