#ifndef DTENSOR_NN_OPTIM_SGD_H_
#define DTENSOR_NN_OPTIM_SGD_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/optim.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

struct SgdOptions {
  double learning_rate = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// Stochastic gradient descent with momentum and (L2) weight decay, as
// torch.optim.SGD: with d = grad + weight_decay * p and, when momentum is
// set, the buffer b = d on the first step and then
// b = momentum * b + (1 - dampening) * d, the step is d = b (or
// d + momentum * b with nesterov), and p -= learning_rate * d.
class Sgd : public Optimizer {
 public:
  // Errors: a negative learning rate, momentum, dampening or weight decay;
  // nesterov without momentum or with dampening.
  static absl::StatusOr<std::unique_ptr<Sgd>> Create(
      std::vector<DTensor> params, const SgdOptions& options);

  // The momentum buffers, in the parameters' shardings (undefined until the
  // first step that updates the parameter with momentum set).
  const std::vector<DTensor>& momentum_buffers() const { return buffers_; }

 private:
  Sgd(std::vector<DTensor> params, const SgdOptions& options);

  absl::Status Update(size_t i, const Tensor& grad) override;

  SgdOptions options_;
  std::vector<DTensor> buffers_;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_OPTIM_SGD_H_
