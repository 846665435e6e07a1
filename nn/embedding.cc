#include "dtensor/nn/embedding.h"

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/ops/embedding_ops.h"

namespace dtensor {
namespace nn {

absl::StatusOr<std::unique_ptr<Embedding>> Embedding::Create(
    int64_t num_embeddings, int64_t embedding_dim, Initializer init) {
  DT_RETURN_IF_ERROR(
      CheckPositive("Embedding", "num_embeddings", num_embeddings));
  DT_RETURN_IF_ERROR(
      CheckPositive("Embedding", "embedding_dim", embedding_dim));
  std::unique_ptr<Embedding> embedding(
      new Embedding(num_embeddings, embedding_dim));
  DT_ASSIGN_OR_RETURN(
      embedding->weight_,
      embedding->AddParameter("weight", {num_embeddings, embedding_dim}, init));
  return embedding;
}

absl::StatusOr<DTensor> Embedding::Forward(const DTensor& indices) {
  return ops::Embedding(indices, weight());
}

std::string Embedding::ExtraRepr() const {
  return absl::StrCat(num_embeddings_, ", ", embedding_dim_);
}

}  // namespace nn
}  // namespace dtensor
