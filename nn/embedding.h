#ifndef DTENSOR_NN_EMBEDDING_H_
#define DTENSOR_NN_EMBEDDING_H_

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

// Rows of "weight" [num_embeddings, embedding_dim] selected by integer
// indices of any shape: the output is [indices..., embedding_dim].
class Embedding : public Module {
 public:
  // Errors: a size < 1, an invalid initializer.
  static absl::StatusOr<std::unique_ptr<Embedding>> Create(
      int64_t num_embeddings, int64_t embedding_dim,
      Initializer init = Initializer::Normal(0.0, 0.02));

  absl::string_view type_name() const override { return "Embedding"; }
  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  const DTensor& weight() const { return value(weight_); }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& indices) override;
  std::string ExtraRepr() const override;

 private:
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}

  int64_t num_embeddings_;
  int64_t embedding_dim_;
  int weight_ = -1;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_EMBEDDING_H_
