#ifndef DTENSOR_NN_OPTIM_H_
#define DTENSOR_NN_OPTIM_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

// An optimizer of a list of parameters. Parameters are updated in place:
// their local shards are overwritten, so every copy of a parameter DTensor
// (a module's slot) sees the new values, and each rank updates only its own
// shard (elementwise; a Replicate parameter identically on every replica).
// State (momentum, moments) is kept as DTensors in each parameter's sharding.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from `grads`, one per parameter in order (undefined: that
  // parameter is left alone this step). A gradient in another sharding than
  // its parameter is redistributed to it first: a Partial gradient of a
  // Replicate parameter is all-reduced, of a Shard parameter
  // reduce-scattered. Every rank calls it (SPMD). Under a metadata-only
  // runtime only those redistributions are recorded. Errors: a count
  // mismatch; a gradient of another shape or dtype, or on another mesh; a
  // Partial parameter (naming the index).
  absl::Status Step(absl::Span<const DTensor> grads);

  double learning_rate() const { return learning_rate_; }
  // For schedules: the rate of the next steps.
  void set_learning_rate(double rate) { learning_rate_ = rate; }
  const std::vector<DTensor>& params() const { return params_; }

 protected:
  Optimizer(std::vector<DTensor> params, double learning_rate);

  // Updates the local shard of parameter `i` from `grad`, the local shard of
  // its gradient in the parameter's sharding.
  virtual absl::Status Update(size_t i, const Tensor& grad) = 0;

  // Updates parameters `indices` (ascending) from `grads`, the local shards
  // of their gradients (as Update's), for an optimizer whose kernel steps
  // many parameters at once (AdamW). This default calls Update on each in
  // turn, profiling each as an "optimizer_update".
  virtual absl::Status UpdateMany(absl::Span<const size_t> indices,
                                  absl::Span<const Tensor> grads);

  // A DTensor of zeros in parameter i's sharding: optimizer state.
  absl::StatusOr<DTensor> ZerosLikeParam(size_t i) const;

 private:
  // The gradient in parameter i's sharding; errors as for Step.
  absl::StatusOr<DTensor> GradientInSharding(size_t i,
                                             const DTensor& grad) const;

  std::vector<DTensor> params_;
  double learning_rate_;
};

// OK when every named option value is >= 0.
// Errors: the first that is negative or NaN (InvalidArgument naming
// `optimizer`, the option and its value).
absl::Status CheckNonNegative(
    absl::string_view optimizer,
    absl::Span<const std::pair<const char*, double>> options);

// Overwrites the elements of `target` (a local shard) with `values`.
absl::Status Assign(const Tensor& target, const Tensor& values);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_OPTIM_H_
