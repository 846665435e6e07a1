#include "dtensor/tensor/cuda/launch_common.cuh"
#include "dtensor/tensor/cuda/loss_body.h"
#include "dtensor/tensor/cuda/loss_kernels.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {
namespace {

template <typename T>
__global__ void CrossEntropyKernel(const T* logits, const int64_t* targets,
                                   double* losses, double* log_sum_exp,
                                   int64_t classes, int64_t ignore_index) {
  const int64_t r = blockIdx.x;
  const int64_t target = targets[r];
  // Uniform across the block.
  const bool ignored = target == ignore_index;
  if (ignored && log_sum_exp == nullptr) {
    if (threadIdx.x == 0) losses[r] = 0;
    return;
  }
  const Row<T> row{logits + r * classes, classes, 1};
  const double max = BlockReduce(
      LogSumExpMaxPartial(row, threadIdx.x, kThreads), MaxCombine());
  const double sum = BlockReduce(
      LogSumExpSumPartial(row, max, threadIdx.x, kThreads), AddCombine());
  if (threadIdx.x != 0) return;
  losses[r] = ignored ? 0 : CrossEntropyLoss(row, max, sum, target);
  if (log_sum_exp != nullptr) log_sum_exp[r] = max + Log(sum);
}

// One block per row.
template <typename T>
__global__ void LossShardMaxKernel(const T* logits, Compute<T>* row_max,
                                   int64_t classes) {
  const Row<T> row{logits + blockIdx.x * classes, classes, 1};
  const double max = BlockReduce(
      LogSumExpMaxPartial(row, threadIdx.x, kThreads), MaxCombine());
  if (threadIdx.x == 0) row_max[blockIdx.x] = static_cast<Compute<T>>(max);
}

// One block per row.
template <typename T>
__global__ void LossShardSumsKernel(const T* logits, const int64_t* targets,
                                    const Compute<T>* row_max, Compute<T>* sums,
                                    int64_t rows, int64_t classes,
                                    int64_t class_offset) {
  const int64_t r = blockIdx.x;
  const Row<T> row{logits + r * classes, classes, 1};
  const double sum =
      BlockReduce(LogSumExpSumPartial(row, row_max[r], threadIdx.x, kThreads),
                  AddCombine());
  if (threadIdx.x != 0) return;
  sums[r] = static_cast<Compute<T>>(sum);
  sums[rows + r] = TargetLogitInBlock(row, targets[r], class_offset);
}

// A grid-stride loop over the rows.
template <typename C>
__global__ void LossShardFinishKernel(const C* row_max, const C* sums,
                                      const int64_t* targets, double* out,
                                      int64_t rows, int64_t ignore_index) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       r < rows; r += step) {
    const RowLoss loss = RowLossOf(row_max[r], sums[r], sums[rows + r],
                                   targets[r] == ignore_index);
    out[r] = loss.loss;
    out[rows + r] = loss.log_sum_exp;
  }
}

}  // namespace

cudaError_t LaunchCrossEntropyRows(ScalarType type, const void* logits,
                                   const int64_t* targets, double* losses,
                                   double* log_sum_exp, int64_t rows,
                                   int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream) {
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    CrossEntropyKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(logits), targets, losses, log_sum_exp, classes,
        ignore_index);
  });
}

cudaError_t LaunchLossShardMax(ScalarType type, const void* logits,
                               void* row_max, int64_t rows, int64_t classes,
                               cudaStream_t stream) {
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    LossShardMaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(logits), static_cast<Compute<T>*>(row_max),
        classes);
  });
}

cudaError_t LaunchLossShardSums(ScalarType type, const void* logits,
                                const int64_t* targets, const void* row_max,
                                void* sums, int64_t rows, int64_t classes,
                                int64_t class_offset, cudaStream_t stream) {
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    LossShardSumsKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(logits), targets,
        static_cast<const Compute<T>*>(row_max), static_cast<Compute<T>*>(sums),
        rows, classes, class_offset);
  });
}

cudaError_t LaunchLossShardFinish(ScalarType type, const void* row_max,
                                  const void* sums, const int64_t* targets,
                                  double* out, int64_t rows,
                                  int64_t ignore_index, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return DispatchFloating(type, [&](auto tag) {
    using C = Compute<decltype(tag)>;
    LossShardFinishKernel<<<GridFor(rows), kThreads, 0, stream>>>(
        static_cast<const C*>(row_max), static_cast<const C*>(sums), targets,
        out, rows, ignore_index);
    return cudaGetLastError();
  });
}

}  // namespace dtensor::cuda
