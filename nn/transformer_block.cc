#include "dtensor/nn/transformer_block.h"

#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<TransformerBlock>> TransformerBlock::Create(
    const LlamaConfig& config) {
  DT_RETURN_IF_ERROR(config.Validate());
  const Initializer init = Initializer::Normal(0.0, config.init_std);
  std::unique_ptr<TransformerBlock> block(new TransformerBlock());
  DT_ASSIGN_OR_RETURN(
      auto attention,
      Attention::Create(config.dim, config.n_heads, config.kv_heads(),
                        config.rope_theta, init));
  DT_ASSIGN_OR_RETURN(
      auto feed_forward,
      FeedForward::Create(config.dim, config.hidden_dim(), init));
  DT_ASSIGN_OR_RETURN(auto attention_norm,
                      RMSNorm::Create(config.dim, config.norm_eps));
  DT_ASSIGN_OR_RETURN(auto ffn_norm,
                      RMSNorm::Create(config.dim, config.norm_eps));
  DT_ASSIGN_OR_RETURN(block->attention_,
                      block->AddModule("attention", std::move(attention)));
  DT_ASSIGN_OR_RETURN(
      block->feed_forward_,
      block->AddModule("feed_forward", std::move(feed_forward)));
  DT_ASSIGN_OR_RETURN(
      block->attention_norm_,
      block->AddModule("attention_norm", std::move(attention_norm)));
  DT_ASSIGN_OR_RETURN(block->ffn_norm_,
                      block->AddModule("ffn_norm", std::move(ffn_norm)));
  return block;
}

absl::StatusOr<DTensor> TransformerBlock::Forward(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(DTensor normed, (*attention_norm_)(x));
  DT_ASSIGN_OR_RETURN(DTensor attended, (*attention_)(normed));
  // h = x + attended and ffn_norm(h), fused where ffn_norm's hooks allow.
  DT_ASSIGN_OR_RETURN(const ops::AddNormOutputs h,
                      ffn_norm_->ForwardWithResidual(x, attended));
  DT_ASSIGN_OR_RETURN(DTensor fed, (*feed_forward_)(h.normed));
  return ops::Add(h.sum, fed);
}

}  // namespace nn
}  // namespace dtensor
