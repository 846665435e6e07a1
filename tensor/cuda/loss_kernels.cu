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

// V elements of T, loaded and stored as one access of V * sizeof(T) bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// One block per row; the row's elements in packs of V (V divides classes,
// the rows start aligned to a pack).
template <typename T, int V>
__global__ void CrossEntropyBackwardKernel(CrossEntropyGradOperands in, T* out,
                                           int64_t classes, bool per_row_grad,
                                           int64_t ignore_index,
                                           int64_t class_offset) {
  using C = Compute<T>;
  const int64_t r = blockIdx.x;
  const T* grad = static_cast<const T*>(in.grad);
  const CrossEntropyGradRow<C> row = CrossEntropyGradRowOf(
      in.targets[r], static_cast<const C*>(in.log_sum_exp)[r],
      Load(grad[per_row_grad ? r : 0]), in.count, ignore_index, class_offset,
      classes);
  const auto* x = reinterpret_cast<const Pack<T, V>*>(
      static_cast<const T*>(in.logits) + r * classes);
  auto* y = reinterpret_cast<Pack<T, V>*>(out + r * classes);
  const int64_t packs = classes / V;
  for (int64_t k = threadIdx.x; k < packs; k += blockDim.x) {
    Pack<T, V> grads;
    if (row.ignored) {
      // Uniform across the block: the logits are not read.
#pragma unroll
      for (int i = 0; i < V; ++i) grads.v[i] = Store<T>(C(0));
    } else {
      const Pack<T, V> logits = x[k];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        grads.v[i] =
            Store<T>(CrossEntropyGradOf(row, Load(logits.v[i]), k * V + i));
      }
    }
    y[k] = grads;
  }
}

bool AlignedTo(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
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

cudaError_t LaunchCrossEntropyBackward(const CrossEntropyGradOperands& in,
                                       ScalarType type, void* grad_logits,
                                       int64_t rows, int64_t classes,
                                       bool per_row_grad, int64_t ignore_index,
                                       int64_t class_offset,
                                       cudaStream_t stream) {
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    // 16-byte accesses where every row starts on a 16-byte boundary.
    constexpr int kPack = 16 / sizeof(T);
    T* out = static_cast<T*>(grad_logits);
    if (classes % kPack == 0 && AlignedTo(in.logits, 16) &&
        AlignedTo(grad_logits, 16)) {
      CrossEntropyBackwardKernel<T, kPack><<<rows, kThreads, 0, stream>>>(
          in, out, classes, per_row_grad, ignore_index, class_offset);
    } else {
      CrossEntropyBackwardKernel<T, 1><<<rows, kThreads, 0, stream>>>(
          in, out, classes, per_row_grad, ignore_index, class_offset);
    }
  });
}

}  // namespace dtensor::cuda
