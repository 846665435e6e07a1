#include "dtensor/ops/op_profile.h"

#include <memory>
#include <string>
#include <utility>

namespace dtensor {
namespace {

// An op's device time: two timed events on its device's stream.
class CudaSpan : public DeviceSpan {
 public:
  CudaSpan(cuda::Event start, cuda::Event end)
      : start_(std::move(start)), end_(std::move(end)) {}
  absl::StatusOr<double> ElapsedUs() const override {
    return end_.ElapsedUsSince(start_);
  }

 private:
  cuda::Event start_;
  cuda::Event end_;
};

}  // namespace

OpProfile OpProfile::Start(absl::string_view name,
                           absl::Span<const Tensor> inputs) {
  OpProfile profile(name);
  for (const Tensor& input : inputs) {
    if (!input.defined()) continue;
    if (input.device().is_cuda()) {
      absl::StatusOr<cuda::Event> event =
          cuda::Event::RecordTimed(input.device().index);
      if (event.ok()) {
        profile.device_ = input.device().index;
        profile.start_event_ = *std::move(event);
      }
    }
    break;
  }
  profile.start_us_ = Profiler::ClockUs();
  return profile;
}

void OpProfile::Finish(double flops, double bytes) {
  Profiler::Record record;
  record.kind = Profiler::Kind::kOp;
  record.name = std::string(name_);
  if (start_event_.has_value()) {
    absl::StatusOr<cuda::Event> end = cuda::Event::RecordTimed(device_);
    if (end.ok()) {
      record.device = std::make_shared<CudaSpan>(*std::move(start_event_),
                                                 *std::move(end));
    }
  }
  record.start_us = start_us_;
  record.wall_us = Profiler::ClockUs() - start_us_;
  record.flops = flops;
  record.bytes = bytes;
  Profiler::RecordOnThread(record);
}

void OpProfile::FinishOp(const OpDef& op, absl::Span<const Tensor> inputs,
                         absl::Span<const Tensor> outputs,
                         const OpArgs& args) {
  if (op.flops) {
    Finish(op.flops(inputs, outputs, args), 0);
  } else {
    Finish(0, TensorBytes(inputs) + TensorBytes(outputs));
  }
}

double TensorBytes(absl::Span<const Tensor> tensors) {
  double bytes = 0;
  for (const Tensor& tensor : tensors) {
    if (tensor.defined()) bytes += static_cast<double>(tensor.nbytes());
  }
  return bytes;
}

}  // namespace dtensor
