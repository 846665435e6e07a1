#ifndef DTENSOR_NN_FEED_FORWARD_H_
#define DTENSOR_NN_FEED_FORWARD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/initializer.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// The SwiGLU feed-forward of Llama: w2(silu(w1(x)) * w3(x)), the gate
// silu(.) * . one fused op (ops::SwiGlu: one kernel forward, one backward).
// Children (Linear, no bias): "w1" and "w3" [hidden_dim, dim], "w2"
// [dim, hidden_dim].
class FeedForward : public Module {
 public:
  // Errors: a size < 1.
  static absl::StatusOr<std::unique_ptr<FeedForward>> Create(
      int64_t dim, int64_t hidden_dim,
      Initializer weight_init = Initializer::Normal(0.0, 0.02));

  absl::string_view type_name() const override { return "FeedForward"; }
  int64_t dim() const { return dim_; }
  int64_t hidden_dim() const { return hidden_dim_; }
  Linear& w1() const { return *w1_; }
  Linear& w2() const { return *w2_; }
  Linear& w3() const { return *w3_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  FeedForward(int64_t dim, int64_t hidden_dim)
      : dim_(dim), hidden_dim_(hidden_dim) {}

  int64_t dim_;
  int64_t hidden_dim_;
  Linear* w1_ = nullptr;
  Linear* w2_ = nullptr;
  Linear* w3_ = nullptr;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_FEED_FORWARD_H_
