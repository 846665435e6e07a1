#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/reduction_kernels.h"

namespace dtensor::cuda {
namespace {

template <typename A>
struct ReduceCombineFn {
  ReduceOp op;
  __device__ A operator()(A a, A b) const { return ReduceCombine(op, a, b); }
};

template <typename A, typename Out, typename T>
__global__ void ReduceRowsKernel(ReduceOp op, const T* x, Out* out, int64_t n,
                                 double divisor) {
  const Row<T> row{x + blockIdx.x * n, n, 1};
  const A total = BlockReduce(ReducePartial<A>(op, row, threadIdx.x, kThreads),
                              ReduceCombineFn<A>{op});
  if (threadIdx.x != 0) return;
  if (divisor == 1.0) {
    out[blockIdx.x] = Store<Out>(total);
  } else {
    out[blockIdx.x] = Store<Out>(static_cast<double>(total) / divisor);
  }
}

}  // namespace

cudaError_t LaunchReduceRows(ReduceOp op, ScalarType in_type,
                             ScalarType out_type, const void* x, void* out,
                             int64_t rows, int64_t n, double divisor,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    // Floating sums and sums of squares accumulate in double, integer sums in
    // int64, max and min in the compute type.
    using SumAcc =
        std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
    if (op == ReduceOp::kSumSquares && !std::is_floating_point_v<C>) {
      return cudaErrorInvalidValue;
    }
    return Dispatch(out_type, [&](auto out_tag) {
      using Out = decltype(out_tag);
      if (IsSum(op)) {
        ReduceRowsKernel<SumAcc><<<rows, kThreads, 0, stream>>>(
            op, static_cast<const T*>(x), static_cast<Out*>(out), n, divisor);
      } else {
        ReduceRowsKernel<C><<<rows, kThreads, 0, stream>>>(
            op, static_cast<const T*>(x), static_cast<Out*>(out), n, divisor);
      }
      return cudaGetLastError();
    });
  });
}

}  // namespace dtensor::cuda
