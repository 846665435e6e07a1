#ifndef DTENSOR_NN_ATTENTION_H_
#define DTENSOR_NN_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/initializer.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/sequence_blocks.h"

namespace dtensor {
namespace nn {

// Causal multi-head self-attention with grouped-query heads and rotary
// position embeddings, as in Llama. Children (Linear, no bias): "wq" [n_heads
// * head_dim, dim], "wk" and "wv" [n_kv_heads * head_dim, dim], "wo" [dim,
// n_heads * head_dim], with head_dim = dim / n_heads.
//
// Forward on x [batch, seq, dim]: q, k and v are the projections viewed as
// [batch, seq, heads, head_dim]; q and k are rotated (ops::RotaryEmbedding:
// rotate-half pairs (i, i + head_dim/2), positions 0..seq-1, `rope_theta`);
// query head h attends with key/value head h / (n_heads / n_kv_heads) under a
// causal mask with scale 1/sqrt(head_dim); the heads' outputs, concatenated in
// head order, go through wo. Grouping is a broadcast (q as [batch, kv_heads,
// group, seq, head_dim] against k and v as [batch, kv_heads, 1, seq,
// head_dim]): keys and values are never repeated.
class Attention : public Module {
 public:
  // Context parallelism: the sequence of x is Shard(1) over mesh dim
  // `mesh_dim` in `order` (dtensor/ops/sequence_blocks.h), and attention runs
  // as ring attention over that dim (nn/ring_attention.h): no rank gathers
  // the keys. Rotary positions follow the order. Real ranks only (ring
  // attention does not run in metadata-only mode).
  struct ContextParallel {
    int64_t mesh_dim = 0;
    ops::SequenceOrder order = ops::SequenceOrder::kBalanced;
  };

  // Errors: a size < 1, dim not divisible by n_heads, n_heads not divisible
  // by n_kv_heads, an odd head dim, rope_theta not positive.
  static absl::StatusOr<std::unique_ptr<Attention>> Create(
      int64_t dim, int64_t n_heads, int64_t n_kv_heads, double rope_theta,
      Initializer weight_init = Initializer::Normal(0.0, 0.02));

  absl::string_view type_name() const override { return "Attention"; }
  int64_t dim() const { return dim_; }
  int64_t n_heads() const { return n_heads_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return dim_ / n_heads_; }
  Linear& wq() const { return *wq_; }
  Linear& wk() const { return *wk_; }
  Linear& wv() const { return *wv_; }
  Linear& wo() const { return *wo_; }
  // Unset (the default): attention on whatever sharding propagation gives.
  void set_context_parallel(std::optional<ContextParallel> context_parallel) {
    context_parallel_ = context_parallel;
  }
  const std::optional<ContextParallel>& context_parallel() const {
    return context_parallel_;
  }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  Attention(int64_t dim, int64_t n_heads, int64_t n_kv_heads, double rope_theta)
      : dim_(dim),
        n_heads_(n_heads),
        n_kv_heads_(n_kv_heads),
        rope_theta_(rope_theta) {}

  int64_t dim_;
  int64_t n_heads_;
  int64_t n_kv_heads_;
  double rope_theta_;
  Linear* wq_ = nullptr;
  Linear* wk_ = nullptr;
  Linear* wv_ = nullptr;
  Linear* wo_ = nullptr;
  std::optional<ContextParallel> context_parallel_;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_ATTENTION_H_
