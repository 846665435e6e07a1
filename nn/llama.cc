#include "dtensor/nn/llama.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/transformer_block.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(
    const LlamaConfig& config) {
  DT_RETURN_IF_ERROR(config.Validate());
  const Initializer init = Initializer::Normal(0.0, config.init_std);
  std::unique_ptr<Transformer> model(new Transformer(config));
  DT_ASSIGN_OR_RETURN(auto tok_embeddings,
                      Embedding::Create(config.vocab_size, config.dim, init));
  auto layers = std::make_unique<ModuleList>();
  for (int64_t i = 0; i < config.n_layers; ++i) {
    DT_ASSIGN_OR_RETURN(auto block, TransformerBlock::Create(config));
    DT_RETURN_IF_ERROR(layers->Append(std::move(block)).status());
  }
  DT_ASSIGN_OR_RETURN(auto norm, RMSNorm::Create(config.dim, config.norm_eps));
  LinearOptions output_options;
  output_options.bias = false;
  output_options.weight_init = init;
  DT_ASSIGN_OR_RETURN(auto output, Linear::Create(config.dim, config.vocab_size,
                                                  output_options));
  DT_ASSIGN_OR_RETURN(
      model->tok_embeddings_,
      model->AddModule("tok_embeddings", std::move(tok_embeddings)));
  DT_ASSIGN_OR_RETURN(model->layers_,
                      model->AddModule("layers", std::move(layers)));
  DT_ASSIGN_OR_RETURN(model->norm_, model->AddModule("norm", std::move(norm)));
  DT_ASSIGN_OR_RETURN(model->output_,
                      model->AddModule("output", std::move(output)));
  return model;
}

absl::StatusOr<DTensor> Transformer::Forward(const DTensor& tokens) {
  if (!tokens.defined() || tokens.shape().size() != 2 ||
      IsFloatingPoint(tokens.dtype()) || tokens.dtype() == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Transformer: tokens must be integer [batch, seq], got ",
        tokens.defined() ? tokens.spec().ToString() : "an undefined DTensor"));
  }
  if (tokens.shape()[1] > config_.max_seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("Transformer: sequence length ", tokens.shape()[1],
                     " exceeds max_seq_len ", config_.max_seq_len));
  }
  DT_ASSIGN_OR_RETURN(DTensor h, (*tok_embeddings_)(tokens));
  DT_ASSIGN_OR_RETURN(h, (*layers_)(h));
  DT_ASSIGN_OR_RETURN(h, (*norm_)(h));
  return (*output_)(h);
}

absl::StatusOr<std::unique_ptr<Transformer>> BuildLlama(
    const LlamaConfig& config, std::shared_ptr<Runtime> runtime,
    const DeviceMesh& mesh, const InitOptions& options) {
  DT_ASSIGN_OR_RETURN(std::unique_ptr<Transformer> model,
                      Transformer::Create(config));
  DT_RETURN_IF_ERROR(Initialize(*model, std::move(runtime), mesh, options));
  return model;
}

}  // namespace nn
}  // namespace dtensor
