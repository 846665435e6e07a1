// Cross entropy on CUDA tensors (loss_cuda.h): launches of
// dtensor/tensor/cuda/loss_kernels.h over contiguous rows of logits.
#include "dtensor/tensor/loss_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <cmath>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/loss_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

// An operand of cross_entropy's kernels, checked to be on `device` (errors
// name `arg`), as a contiguous tensor there.
absl::StatusOr<Tensor> LossOperand(const Tensor& t, Device device,
                                   absl::string_view arg) {
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, "cross_entropy", arg));
  return ContiguousOnDevice(t);
}

// The logits of cross_entropy's row kernels, checked to be floating, as a
// contiguous tensor on their device.
absl::StatusOr<Tensor> LossLogits(const Tensor& logits) {
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "cross_entropy", "logits"));
  return ContiguousOnDevice(logits);
}

}  // namespace
#endif

absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "CrossEntropy", "logits"));
  DT_RETURN_IF_ERROR(internal::CheckCrossEntropyShapes(logits, target));
  DT_ASSIGN_OR_RETURN(const Tensor host_target, target.To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(const Tensor i64, host_target.To(DType::kI64));
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> targets,
                      i64.ToVector<int64_t>());
  const int64_t classes = logits.size(-1);
  DT_RETURN_IF_ERROR(
      internal::CheckCrossEntropyTargets(targets, classes, ignore_index));
  DT_ASSIGN_OR_RETURN(const Tensor device_targets, i64.To(logits.device()));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(logits));
  const int64_t rows = static_cast<int64_t>(targets.size());
  DT_ASSIGN_OR_RETURN(Tensor losses,
                      Tensor::Empty({rows}, DType::kF64, logits.device()));
  DT_RETURN_IF_ERROR(LaunchOn(logits, "CrossEntropy", [&](cudaStream_t stream) {
    return LaunchCrossEntropyRows(
        ToScalarType(logits.dtype()), input.raw_data(),
        device_targets.data<int64_t>(), losses.data<double>(),
        /*log_sum_exp=*/nullptr, rows, classes, ignore_index, stream);
  }));
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(Tensor shaped, losses.View(target.shape()));
    return shaped.To(logits.dtype());
  }
  // The per-sample losses sum on the host in row order, as on the CPU.
  DT_ASSIGN_OR_RETURN(const std::vector<double> values,
                      losses.ToVector<double>());
  double total = 0;
  int64_t counted = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (targets[i] == ignore_index) continue;
    total += values[i];
    ++counted;
  }
  const double result = reduction == Reduction::kSum
                            ? total
                            : (counted == 0 ? std::nan("") : total / counted);
  return Tensor::Scalar(result, logits.dtype()).To(logits.device());
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> CrossEntropyRowsOnDevice(const Tensor& logits,
                                                const Tensor& targets,
                                                int64_t ignore_index) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor input, LossLogits(logits));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, logits.device(), "targets"));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(Tensor results,
                      Tensor::Empty({2, rows}, DType::kF64, logits.device()));
  double* const loss_rows = results.data<double>();
  return LaunchInto(results, "cross_entropy", [&](cudaStream_t stream) {
    return LaunchCrossEntropyRows(ToScalarType(logits.dtype()),
                                  input.raw_data(), picks.data<int64_t>(),
                                  loss_rows, loss_rows + rows, rows,
                                  logits.size(1), ignore_index, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> LossShardMaxOnDevice(const Tensor& logits) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor input, LossLogits(logits));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(
      Tensor row_max,
      Tensor::Empty({rows}, ComputeDTypeOf(logits.dtype()), logits.device()));
  return LaunchInto(row_max, "cross_entropy", [&](cudaStream_t stream) {
    return LaunchLossShardMax(ToScalarType(logits.dtype()), input.raw_data(),
                              row_max.raw_data(), rows, logits.size(1), stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> LossShardSumsOnDevice(const Tensor& logits,
                                             const Tensor& targets,
                                             const Tensor& row_max,
                                             int64_t class_offset) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor input, LossLogits(logits));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, logits.device(), "targets"));
  DT_ASSIGN_OR_RETURN(const Tensor max,
                      LossOperand(row_max, logits.device(), "row_max"));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(Tensor sums,
                      Tensor::Empty({2, rows}, ComputeDTypeOf(logits.dtype()),
                                    logits.device()));
  return LaunchInto(sums, "cross_entropy", [&](cudaStream_t stream) {
    return LaunchLossShardSums(ToScalarType(logits.dtype()), input.raw_data(),
                               picks.data<int64_t>(), max.raw_data(),
                               sums.raw_data(), rows, logits.size(1),
                               class_offset, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> LossShardFinishOnDevice(const Tensor& row_max,
                                               const Tensor& sums,
                                               const Tensor& targets,
                                               int64_t ignore_index) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor both,
                      LossOperand(sums, row_max.device(), "sums"));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, row_max.device(), "targets"));
  DT_ASSIGN_OR_RETURN(const Tensor max, ContiguousOnDevice(row_max));
  const int64_t rows = row_max.size(0);
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty({2, rows}, DType::kF64, row_max.device()));
  return LaunchInto(out, "cross_entropy", [&](cudaStream_t stream) {
    return LaunchLossShardFinish(
        ToScalarType(row_max.dtype()), max.raw_data(), both.raw_data(),
        picks.data<int64_t>(), out.data<double>(), rows, ignore_index, stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> CrossEntropyBackwardOnDevice(
    const CrossEntropyGradInputs& in, Reduction reduction, int64_t ignore_index,
    int64_t class_offset) {
#ifdef DTENSOR_CUDA
  DT_ASSIGN_OR_RETURN(const Tensor logits, ContiguousOnDevice(in.logits));
  DT_ASSIGN_OR_RETURN(const Tensor target, ContiguousOnDevice(in.target));
  DT_ASSIGN_OR_RETURN(const Tensor lse, ContiguousOnDevice(in.log_sum_exp));
  DT_ASSIGN_OR_RETURN(const Tensor grad, ContiguousOnDevice(in.grad));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(logits.shape(), logits.dtype(),
                                                logits.device()));
  const int64_t* count =
      reduction == Reduction::kMean ? in.count.data<int64_t>() : nullptr;
  return LaunchInto(out, "CrossEntropyBackward", [&](cudaStream_t stream) {
    return LaunchCrossEntropyBackward(
        {logits.raw_data(), target.data<int64_t>(), lse.raw_data(),
         grad.raw_data(), count},
        ToScalarType(logits.dtype()), out.raw_data(), logits.size(0),
        logits.size(1), reduction == Reduction::kNone, ignore_index,
        class_offset, stream);
  });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
