#ifndef DTENSOR_NN_LINEAR_H_
#define DTENSOR_NN_LINEAR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/initializer.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// Defaults as PyTorch's nn.Linear: with a bias (the Llama's layers turn it
// off).
struct LinearOptions {
  bool bias = true;
  Initializer weight_init = Initializer::Normal(0.0, 0.02);
  Initializer bias_init = Initializer::Zeros();
};

// y = x @ weight^T + bias, x [..., in_features]. Parameters "weight"
// [out_features, in_features] and, with options.bias, "bias" [out_features].
class Linear : public Module {
 public:
  // Errors: a size < 1, an invalid initializer.
  static absl::StatusOr<std::unique_ptr<Linear>> Create(
      int64_t in_features, int64_t out_features,
      const LinearOptions& options = {});

  absl::string_view type_name() const override { return "Linear"; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool has_bias() const { return bias_ >= 0; }
  const DTensor& weight() const { return value(weight_); }
  // Undefined without a bias.
  DTensor bias() const { return has_bias() ? value(bias_) : DTensor(); }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  Linear(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}

  int64_t in_features_;
  int64_t out_features_;
  int weight_ = -1;
  int bias_ = -1;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_LINEAR_H_
