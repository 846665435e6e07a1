#ifndef DTENSOR_NN_LOSSES_H_
#define DTENSOR_NN_LOSSES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace nn {

// A loss function as an object, as PyTorch's nn.MSELoss, nn.L1Loss and
// nn.CrossEntropyLoss: `loss(prediction, target)` on DTensors of any
// sharding, built from ops (so an active autograd tape records it and its
// gradient flows into `prediction`). With Reduction::kMean or kSum the result
// is a 0-d DTensor (read it with DTensor::Item()); kNone keeps the
// elementwise (or per-row) losses.
class Loss {
 public:
  virtual ~Loss() = default;
  // "MSELoss", "L1Loss", "CrossEntropyLoss".
  virtual absl::string_view name() const = 0;
  // Errors: shapes that do not fit the loss (naming both), and what the
  // ops report.
  virtual absl::StatusOr<DTensor> operator()(const DTensor& prediction,
                                             const DTensor& target) const = 0;
};

// (prediction - target)^2, reduced. Requires: equal shapes (a target that
// would broadcast is an error rather than PyTorch's warning).
class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean)
      : reduction_(reduction) {}
  absl::string_view name() const override { return "MSELoss"; }
  absl::StatusOr<DTensor> operator()(const DTensor& prediction,
                                     const DTensor& target) const override;

 private:
  Reduction reduction_;
};

// |prediction - target|, reduced. Requires: equal shapes.
class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::kMean)
      : reduction_(reduction) {}
  absl::string_view name() const override { return "L1Loss"; }
  absl::StatusOr<DTensor> operator()(const DTensor& prediction,
                                     const DTensor& target) const override;

 private:
  Reduction reduction_;
};

// Cross entropy of logits [d0, ..., dk, C] (the class dim last: [N, C], [C],
// [batch, seq, vocab]) against integer class targets [d0, ..., dk]:
// ops::CrossEntropy, which keeps any sharding of the leading dims, and a
// class-sharded logits tensor sharded under a LossParallelScope.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::kMean,
                            int64_t ignore_index = -100)
      : reduction_(reduction), ignore_index_(ignore_index) {}
  absl::string_view name() const override { return "CrossEntropyLoss"; }
  absl::StatusOr<DTensor> operator()(const DTensor& logits,
                                     const DTensor& target) const override;

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_LOSSES_H_
