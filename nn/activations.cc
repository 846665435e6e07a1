#include "dtensor/nn/activations.h"

#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<DTensor> ReLU::Forward(const DTensor& x) { return ops::Relu(x); }

absl::StatusOr<DTensor> GELU::Forward(const DTensor& x) {
  return ops::Gelu(x, approximation_);
}

std::string GELU::ExtraRepr() const {
  return approximation_ == GeluApproximation::kTanh ? "approximate='tanh'"
                                                    : "";
}

absl::StatusOr<DTensor> SiLU::Forward(const DTensor& x) { return ops::Silu(x); }

absl::StatusOr<DTensor> Tanh::Forward(const DTensor& x) { return ops::Tanh(x); }

absl::StatusOr<DTensor> Sigmoid::Forward(const DTensor& x) {
  return ops::Sigmoid(x);
}

}  // namespace nn
}  // namespace dtensor
