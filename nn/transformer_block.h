#ifndef DTENSOR_NN_TRANSFORMER_BLOCK_H_
#define DTENSOR_NN_TRANSFORMER_BLOCK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/attention.h"
#include "dtensor/nn/feed_forward.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/nn/module.h"
#include "dtensor/nn/norms.h"

namespace dtensor {
namespace nn {

// A pre-norm Llama block on x [batch, seq, dim]:
//   h = x + attention(attention_norm(x))
//   out = h + feed_forward(ffn_norm(h))
// Children, in this order (Meta's): "attention" (Attention),
// "feed_forward" (FeedForward with config.hidden_dim()), "attention_norm"
// and "ffn_norm" (RMSNorm with config.norm_eps).
class TransformerBlock : public Module {
 public:
  // Errors: an invalid config (LlamaConfig::Validate).
  static absl::StatusOr<std::unique_ptr<TransformerBlock>> Create(
      const LlamaConfig& config);

  absl::string_view type_name() const override { return "TransformerBlock"; }
  Attention& attention() const { return *attention_; }
  FeedForward& feed_forward() const { return *feed_forward_; }
  RMSNorm& attention_norm() const { return *attention_norm_; }
  RMSNorm& ffn_norm() const { return *ffn_norm_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;

 private:
  TransformerBlock() = default;

  Attention* attention_ = nullptr;
  FeedForward* feed_forward_ = nullptr;
  RMSNorm* attention_norm_ = nullptr;
  RMSNorm* ffn_norm_ = nullptr;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_TRANSFORMER_BLOCK_H_
