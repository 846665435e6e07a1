#ifndef DTENSOR_OPS_OP_PROFILE_H_
#define DTENSOR_OPS_OP_PROFILE_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/profiler.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Times one op kernel for the profilers active on this thread
// (dtensor/base/profiler.h): the host wall time around the kernel and, when
// its inputs live on a CUDA device, a pair of timed CUDA events recorded on
// the device's stream before and after it, read only when the profile is
// resolved (no synchronization per op). Dispatch uses it as
//
//   std::optional<OpProfile> profile;
//   if (Profiler::Active()) profile = OpProfile::Start(op.name, locals);
//   ... run the kernel ...
//   if (profile) profile->FinishOp(op, locals, results, args);
//
// so that nothing but the check runs while nothing profiles.
class OpProfile {
 public:
  // Starts timing the op `name` (it must outlive the profile: an OpDef's
  // name), whose kernel gets `inputs`. An event that cannot be recorded (no
  // device) leaves the op with its wall time only.
  static OpProfile Start(absl::string_view name,
                         absl::Span<const Tensor> inputs);

  // Records the op in the active profilers with its wall time, its device
  // span, and the work given (0: unknown).
  void Finish(double flops, double bytes);
  // Finish with `op`'s flops (OpDef::flops) or, for an op without them, the
  // bytes of its inputs and outputs.
  void FinishOp(const OpDef& op, absl::Span<const Tensor> inputs,
                absl::Span<const Tensor> outputs, const OpArgs& args);

 private:
  explicit OpProfile(absl::string_view name) : name_(name) {}

  absl::string_view name_;
  double start_us_ = 0;
  // The device of the first defined input (-1: the CPU or none).
  int device_ = -1;
  // Recorded on that device's stream before the kernel.
  std::optional<cuda::Event> start_event_;
};

// Bytes of the defined tensors of `tensors`.
double TensorBytes(absl::Span<const Tensor> tensors);

}  // namespace dtensor

#endif  // DTENSOR_OPS_OP_PROFILE_H_
