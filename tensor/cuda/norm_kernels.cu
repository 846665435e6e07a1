#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/norm_kernels.h"

namespace dtensor::cuda {
namespace {

template <typename T>
__global__ void RmsNormKernel(const T* x, const T* weight, T* out,
                              int64_t width, double eps) {
  const int64_t base = blockIdx.x * width;
  const Row<T> row{x + base, width, 1};
  const double sum =
      BlockReduce(SumSquaresPartial(row, threadIdx.x, kThreads), AddCombine());
  RmsNormWrite(row, weight, out + base, sum, eps, threadIdx.x, kThreads);
}

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* weight, const T* bias,
                                T* out, int64_t width, double eps) {
  const int64_t base = blockIdx.x * width;
  const Row<T> row{x + base, width, 1};
  const double sum = BlockReduce(
      ReducePartial<double>(ReduceOp::kSum, row, threadIdx.x, kThreads),
      AddCombine());
  const double mean = sum / width;
  const double centered_squares = BlockReduce(
      CenteredSquaresPartial(row, mean, threadIdx.x, kThreads), AddCombine());
  LayerNormWrite(row, weight, bias, out + base, mean, centered_squares, eps,
                 threadIdx.x, kThreads);
}

// One block per row of `packs` packs of V: the sums and their squares, then
// the normalized row from the sums this thread wrote.
template <typename T, int V>
__global__ void AddRmsNormKernel(const T* residual, const T* delta,
                                 const T* weight, T* sum, T* out, int64_t width,
                                 double eps) {
  using P = Pack<T, V>;
  const int64_t base = blockIdx.x * width;
  const int64_t packs = width / V;
  P* sum_row = reinterpret_cast<P*>(sum + base);
  const double squares =
      BlockReduce(AddSquaresPartial(reinterpret_cast<const P*>(residual + base),
                                    reinterpret_cast<const P*>(delta + base),
                                    sum_row, packs, threadIdx.x, kThreads),
                  AddCombine());
  AddRmsNormWrite(static_cast<const P*>(sum_row),
                  reinterpret_cast<const P*>(weight),
                  reinterpret_cast<P*>(out + base), packs, squares, eps,
                  threadIdx.x, kThreads);
}

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// One block per row: the row's statistics (the forward's passes: the mean for
// LayerNorm, then the squares around it), the sums of gh xhat and gh, then
// dx; thread 0 keeps the statistics for the parameter gradients.
template <typename T>
__global__ void NormBackwardRowsKernel(const T* x, const T* grad,
                                       const T* weight, const T* addend, T* dx,
                                       NormStats* stats, int64_t width,
                                       double eps, bool layer_norm) {
  const int64_t base = blockIdx.x * width;
  const Row<T> x_row{x + base, width, 1};
  const Row<T> g_row{grad + base, width, 1};
  const int lane = threadIdx.x;
  double mean = 0;
  if (layer_norm) {
    mean = BlockReduce(
               ReducePartial<double>(ReduceOp::kSum, x_row, lane, kThreads),
               AddCombine()) /
           width;
  }
  const double squares = BlockReduce(
      CenteredSquaresPartial(x_row, mean, lane, kThreads), AddCombine());
  const NormStats s = NormStatsOf(mean, squares, width, eps);
  const NormDots partial =
      NormDotsPartial(x_row, g_row, weight, s, lane, kThreads);
  NormDots dots;
  dots.gh_xhat = BlockReduce(partial.gh_xhat, AddCombine());
  if (layer_norm) dots.gh = BlockReduce(partial.gh, AddCombine());
  NormBackwardWrite(x_row, g_row, weight, s, dots, layer_norm, dx + base, lane,
                    kThreads, addend == nullptr ? nullptr : addend + base);
  if (lane == 0) stats[blockIdx.x] = s;
}

// Grid (columns / kThreads, chunks): column j's partial sums over chunk
// blockIdx.y's rows.
template <typename T>
__global__ void NormParamPartialsKernel(const T* x, const T* grad,
                                        const NormStats* stats,
                                        double* partials, int64_t rows,
                                        int64_t width, int64_t chunk_rows,
                                        bool want_dweight, bool want_dbias) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= width) return;
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  const NormParamSums sums =
      NormParamColumnPartial(x, grad, stats, width, begin, end, j);
  const int64_t chunks = gridDim.y;
  if (want_dweight) partials[chunk * width + j] = sums.dweight;
  if (want_dbias) partials[(chunks + chunk) * width + j] = sums.dbias;
}

// out[j] = the sum of column j of partials [chunks, width], rounded to T.
template <typename T>
__global__ void ColumnSumKernel(const double* partials, int64_t chunks,
                                int64_t width, T* out) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j < width) out[j] = Store<T>(ColumnSum(partials, chunks, width, j));
}

template <typename T>
cudaError_t LaunchParamGrads(const NormBackwardArgs& a, cudaStream_t stream) {
  const int64_t chunks = NormParamChunks(a.rows);
  const int64_t chunk_rows = (a.rows + chunks - 1) / chunks;
  const int64_t column_blocks = (a.width + kThreads - 1) / kThreads;
  if (column_blocks > 2147483647) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(column_blocks),
                  static_cast<unsigned>(chunks));
  NormParamPartialsKernel<<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.grad), a.stats,
      a.partials, a.rows, a.width, chunk_rows, a.dweight != nullptr,
      a.dbias != nullptr);
  if (a.dweight != nullptr) {
    ColumnSumKernel<<<column_blocks, kThreads, 0, stream>>>(
        a.partials, chunks, a.width, static_cast<T*>(a.dweight));
  }
  if (a.dbias != nullptr) {
    ColumnSumKernel<<<column_blocks, kThreads, 0, stream>>>(
        a.partials + chunks * a.width, chunks, a.width,
        static_cast<T*>(a.dbias));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchRmsNorm(ScalarType type, const void* x, const void* weight,
                          void* out, int64_t rows, int64_t width, double eps,
                          cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    RmsNormKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<T*>(out), width, eps);
  });
}

cudaError_t LaunchLayerNorm(ScalarType type, const void* x, const void* weight,
                            const void* bias, void* out, int64_t rows,
                            int64_t width, double eps, cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    LayerNormKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<const T*>(bias), static_cast<T*>(out), width, eps);
  });
}

cudaError_t LaunchAddRmsNorm(ScalarType type, const void* residual,
                             const void* delta, const void* weight, void* sum,
                             void* out, int64_t rows, int64_t width, double eps,
                             cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kPack = 16 / sizeof(T);
    const bool packed = width % kPack == 0 && Aligned16(residual) &&
                        Aligned16(delta) && Aligned16(sum) && Aligned16(out) &&
                        (weight == nullptr || Aligned16(weight));
    const auto launch = [&](auto kernel) {
      kernel<<<rows, kThreads, 0, stream>>>(
          static_cast<const T*>(residual), static_cast<const T*>(delta),
          static_cast<const T*>(weight), static_cast<T*>(sum),
          static_cast<T*>(out), width, eps);
    };
    if (packed) {
      launch(AddRmsNormKernel<T, kPack>);
    } else {
      launch(AddRmsNormKernel<T, 1>);
    }
  });
}

cudaError_t LaunchNormBackward(ScalarType type, const NormBackwardArgs& args,
                               cudaStream_t stream) {
  if (args.rows <= 0 || args.width <= 0) return cudaErrorInvalidValue;
  if (!RowsFit(args.rows)) return cudaErrorInvalidConfiguration;
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    NormBackwardRowsKernel<<<args.rows, kThreads, 0, stream>>>(
        static_cast<const T*>(args.x), static_cast<const T*>(args.grad),
        static_cast<const T*>(args.weight), static_cast<const T*>(args.addend),
        static_cast<T*>(args.dx), args.stats, args.width, args.eps,
        args.layer_norm);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    if (args.dweight == nullptr && args.dbias == nullptr) return cudaSuccess;
    return LaunchParamGrads<T>(args, stream);
  });
}

}  // namespace dtensor::cuda
