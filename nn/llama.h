#ifndef DTENSOR_NN_LLAMA_H_
#define DTENSOR_NN_LLAMA_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/embedding.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/nn/module.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/nn/norms.h"
#include "dtensor/runtime.h"

namespace dtensor {
namespace nn {

// A Llama-style decoder-only Transformer. Forward maps integer tokens
// [batch, seq] (seq <= config.max_seq_len) to logits [batch, seq,
// vocab_size]:
//   h = tok_embeddings(tokens); h = layers(h); logits = output(norm(h))
// Children, in this order (Meta's names): "tok_embeddings" (Embedding
// [vocab_size, dim]), "layers" (ModuleList of n_layers TransformerBlocks,
// "layers.0", ...), "norm" (RMSNorm), "output" (Linear dim -> vocab_size, no
// bias, not tied to the embedding). Linear and Embedding weights start
// normal(0, config.init_std), norm weights at ones.
class Transformer : public Module {
 public:
  // The tree without values (initialize it with dtensor/nn/init.h or load a
  // state dict). Errors: an invalid config.
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(
      const LlamaConfig& config);

  absl::string_view type_name() const override { return "Transformer"; }
  const LlamaConfig& config() const { return config_; }
  Embedding& tok_embeddings() const { return *tok_embeddings_; }
  ModuleList& layers() const { return *layers_; }
  RMSNorm& norm() const { return *norm_; }
  Linear& output() const { return *output_; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& tokens) override;

 private:
  explicit Transformer(const LlamaConfig& config) : config_(config) {}

  LlamaConfig config_;
  Embedding* tok_embeddings_ = nullptr;
  ModuleList* layers_ = nullptr;
  RMSNorm* norm_ = nullptr;
  Linear* output_ = nullptr;
};

// Transformer::Create, then Initialize (dtensor/nn/init.h) on `mesh`: by
// default every parameter Replicate; under a metadata-only runtime, parameters
// without data.
absl::StatusOr<std::unique_ptr<Transformer>> BuildLlama(
    const LlamaConfig& config, std::shared_ptr<Runtime> runtime,
    const DeviceMesh& mesh, const InitOptions& options = {});

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_LLAMA_H_
