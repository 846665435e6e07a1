#ifndef DTENSOR_NN_NORMS_H_
#define DTENSOR_NN_NORMS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/add_norm_ops.h"

namespace dtensor {
namespace nn {

// Normalization over the last dim, of size `dim`. What RMSNorm and
// LayerNorm share: dim, eps, and their optional parameters "weight" [dim]
// (starting at ones) and "bias" [dim] (at zeros).
class Norm : public Module {
 public:
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  // Undefined DTensors when the norm has none.
  DTensor weight() const { return weight_ >= 0 ? value(weight_) : DTensor(); }
  DTensor bias() const { return bias_ >= 0 ? value(bias_) : DTensor(); }

 protected:
  Norm(int64_t dim, double eps) : dim_(dim), eps_(eps) {}

  // Registers the weight and, with `with_bias`, the bias.
  absl::Status AddAffine(bool with_bias);
  // "<dim>, eps=<eps>".
  std::string ExtraRepr() const override;

 private:
  int64_t dim_;
  double eps_;
  int weight_ = -1;
  int bias_ = -1;
};

// x / sqrt(mean(x^2) + eps) * weight.
class RMSNorm : public Norm {
 public:
  // Errors: dim < 1, eps not positive and finite.
  static absl::StatusOr<std::unique_ptr<RMSNorm>> Create(int64_t dim,
                                                         double eps = 1e-6);

  absl::string_view type_name() const override { return "RMSNorm"; }

  // sum = residual + delta and this norm of it, as ops::Add then operator()
  // compute them (the sum is the next residual stream, before this module's
  // hooks), in one fused op (ops::AddRmsNorm) where that changes nothing but
  // rounding: the module has no hooks (Module::has_hooks: a parallel plan's
  // redistribution, a tool's notes, checkpointing all run as they would), and
  // residual and delta are laid out alike with no Partial and no sharded last
  // dim, so that neither the add nor the norm's input communicates; the fused
  // op's collectives (the weight gradient's reduction) are this module's
  // (CommOwner), as operator() makes them. Otherwise ops::Add, then
  // operator().
  // Errors: those of ops::Add and of this norm.
  absl::StatusOr<ops::AddNormOutputs> ForwardWithResidual(
      const DTensor& residual, const DTensor& delta);

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;

 private:
  using Norm::Norm;
  // Whether ForwardWithResidual may fuse for these operands.
  bool CanFuse(const DTensor& residual, const DTensor& delta) const;
};

// (x - mean) / sqrt(var + eps) * weight + bias (population variance). With
// `elementwise_affine` it has the weight and, with `bias`, the bias; without,
// there are no parameters.
class LayerNorm : public Norm {
 public:
  // Errors: dim < 1, eps not positive and finite.
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(
      int64_t dim, double eps = 1e-5, bool elementwise_affine = true,
      bool bias = true);

  absl::string_view type_name() const override { return "LayerNorm"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  // Norm's, then the affine flags.
  std::string ExtraRepr() const override;

 private:
  using Norm::Norm;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_NORMS_H_
