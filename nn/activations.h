#ifndef DTENSOR_NN_ACTIVATIONS_H_
#define DTENSOR_NN_ACTIVATIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/module.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace nn {

// Elementwise activations as modules, as PyTorch's nn.ReLU, nn.GELU, nn.SiLU,
// nn.Tanh and nn.Sigmoid: no parameters, the output laid out like the input
// (the ops of dtensor/ops/elementwise_ops.h, recorded by an active autograd
// tape), so they sit between a colwise and a rowwise Linear without a
// collective. Default-constructible: std::make_unique<nn::ReLU>().

class ReLU : public Module {
 public:
  absl::string_view type_name() const override { return "ReLU"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
};

// approximation kNone is the erf form, kTanh PyTorch's approximate="tanh".
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximation = GeluApproximation::kNone)
      : approximation_(approximation) {}
  absl::string_view type_name() const override { return "GELU"; }
  GeluApproximation approximation() const { return approximation_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  GeluApproximation approximation_;
};

// x * sigmoid(x), also called swish.
class SiLU : public Module {
 public:
  absl::string_view type_name() const override { return "SiLU"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
};

class Tanh : public Module {
 public:
  absl::string_view type_name() const override { return "Tanh"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
};

class Sigmoid : public Module {
 public:
  absl::string_view type_name() const override { return "Sigmoid"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_ACTIVATIONS_H_
