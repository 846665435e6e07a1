#ifndef DTENSOR_NN_OPTIM_ADAMW_H_
#define DTENSOR_NN_OPTIM_ADAMW_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/optim.h"
#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

using AdamWOptions = ::dtensor::AdamWOptions;

// Adam with decoupled weight decay, as torch.optim.AdamW: at step t of a
// parameter, p *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g;
// v = beta2 v + (1 - beta2) g^2; p -= lr / (1 - beta1^t) * m /
// (sqrt(v) / sqrt(1 - beta2^t) + eps). A step updates every parameter that
// has a gradient in one multi-tensor kernel call (PyTorch's fused AdamW).
class AdamW : public Optimizer {
 public:
  // Errors: a negative learning rate, eps or weight decay; a beta outside
  // [0, 1).
  static absl::StatusOr<std::unique_ptr<AdamW>> Create(
      std::vector<DTensor> params, const AdamWOptions& options);

  // The moments m and v, in the parameters' shardings (undefined until the
  // parameter's first step or MaterializeState), and the steps taken per
  // parameter.
  const std::vector<DTensor>& exp_avg() const { return exp_avg_; }
  const std::vector<DTensor>& exp_avg_sq() const { return exp_avg_sq_; }
  std::vector<int64_t> steps() const;

  // Gives every parameter's moments a value (zeros, as its first step would),
  // so that the whole state exists before a checkpoint is loaded into it.
  // Errors as for the creation of a DTensor of zeros.
  absl::Status MaterializeState();

  // The optimizer state as DTensors keyed by name, parameter i called
  // `param_names[i]`: "<name>.exp_avg" and "<name>.exp_avg_sq" in the
  // parameter's sharding, and "<name>.step", the i64 step count as a 0-d
  // DTensor replicated over the parameter's mesh. The state is materialized
  // first. The DTensors share storage with the optimizer, so writing their
  // local shards (a checkpoint load) sets its state. Errors: a name count
  // other than the parameter count, a repeated name.
  absl::StatusOr<absl::btree_map<std::string, DTensor>> State(
      absl::Span<const std::string> param_names);

 private:
  AdamW(std::vector<DTensor> params, const AdamWOptions& options);

  // UpdateMany of parameter i alone.
  absl::Status Update(size_t i, const Tensor& grad) override;
  // One multi-tensor step (AdamWStepMany, dtensor/tensor/adamw_kernel.h) of
  // the parameters' local shards, on the CPU or CUDA devices: one launch per
  // device, dtype and step count on CUDA. Profiled as one
  // "optimizer_update". The step counts advance only when the step succeeds.
  absl::Status UpdateMany(absl::Span<const size_t> indices,
                          absl::Span<const Tensor> grads) override;

  AdamWOptions options_;
  std::vector<DTensor> exp_avg_;
  std::vector<DTensor> exp_avg_sq_;
  // One 0-d i64 CPU tensor per parameter: the storage State shares.
  std::vector<Tensor> steps_;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_OPTIM_ADAMW_H_
