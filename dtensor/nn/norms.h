#ifndef DTENSOR_NN_NORMS_H_
#define DTENSOR_NN_NORMS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// Normalization over the last dim, of size `dim`.

// x / sqrt(mean(x^2) + eps) * weight; "weight" [dim] starts at ones.
class RMSNorm : public Module {
 public:
  // Errors: dim < 1, eps not positive and finite.
  static absl::StatusOr<std::unique_ptr<RMSNorm>> Create(int64_t dim,
                                                         double eps = 1e-6);

  absl::string_view type_name() const override { return "RMSNorm"; }
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  const DTensor& weight() const { return value(weight_); }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  RMSNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {}

  int64_t dim_;
  double eps_;
  int weight_ = -1;
};

// (x - mean) / sqrt(var + eps) * weight + bias (population variance). With
// `elementwise_affine`, "weight" [dim] starts at ones and, with `bias`,
// "bias" [dim] at zeros; without, there are no parameters.
class LayerNorm : public Module {
 public:
  // Errors: dim < 1, eps not positive and finite.
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(
      int64_t dim, double eps = 1e-5, bool elementwise_affine = true,
      bool bias = true);

  absl::string_view type_name() const override { return "LayerNorm"; }
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  LayerNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {}

  int64_t dim_;
  double eps_;
  int weight_ = -1;
  int bias_ = -1;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_NORMS_H_
