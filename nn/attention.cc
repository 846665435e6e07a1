#include "dtensor/nn/attention.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/layer_checks.h"
#include "dtensor/nn/ring_attention.h"
#include "dtensor/ops/attention_ops.h"
#include "dtensor/ops/nn_ops.h"
#include "dtensor/ops/view_ops.h"

namespace dtensor {
namespace nn {
namespace {

constexpr absl::string_view kName = "Attention";

absl::Status CheckHeads(int64_t dim, int64_t n_heads, int64_t n_kv_heads,
                        double rope_theta) {
  DT_RETURN_IF_ERROR(CheckPositive(kName, "dim", dim));
  DT_RETURN_IF_ERROR(CheckPositive(kName, "n_heads", n_heads));
  DT_RETURN_IF_ERROR(CheckPositive(kName, "n_kv_heads", n_kv_heads));
  if (dim % n_heads != 0 || n_heads % n_kv_heads != 0 ||
      (dim / n_heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": dim ", dim, ", n_heads ", n_heads, ", n_kv_heads ",
        n_kv_heads, " must give n_heads | dim, n_kv_heads | n_heads and an ",
        "even head dim"));
  }
  if (!(rope_theta > 0 && std::isfinite(rope_theta))) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": rope_theta ", rope_theta, " must be positive and finite"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Linear>> Projection(int64_t in, int64_t out,
                                                   Initializer init) {
  LinearOptions options;
  options.bias = false;
  options.weight_init = init;
  return Linear::Create(in, out, options);
}

// The rotary positions of x's rows under context parallelism: undefined
// (the global rows 0..seq-1, which the rotary op finds from the shard
// offsets) in contiguous order; in balanced order, each rank's positions,
// sharded over the cp dim like x's sequence.
absl::StatusOr<DTensor> PositionsOf(const DTensor& x,
                                    const Attention::ContextParallel& cp) {
  if (cp.order == ops::SequenceOrder::kContiguous) return DTensor();
  const DeviceMesh& mesh = x.mesh();
  if (cp.mesh_dim < 0 || cp.mesh_dim >= mesh.ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": context-parallel mesh dim ", cp.mesh_dim,
                     " is not a dim of a ", mesh.ndim(), "-D mesh"));
  }
  const int64_t seq = x.shape()[1];
  const int64_t ranks = mesh.shape()[cp.mesh_dim];
  DT_RETURN_IF_ERROR(ops::SequencePositions(seq, ranks, cp.order).status());
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> coord,
                      mesh.CoordinateOf(x.runtime()->rank()));
  std::vector<int64_t> positions;
  for (const ops::SequenceSegment& s :
       ops::SegmentsOf(seq, ranks, coord[cp.mesh_dim], cp.order)) {
    for (int64_t i = 0; i < s.length; ++i) positions.push_back(s.start + i);
  }
  std::vector<Placement> placements(mesh.ndim(), Placement::Replicate());
  placements[cp.mesh_dim] = Placement::Shard(0);
  if (x.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(
        const DTensorSpec spec,
        DTensorSpec::Create(mesh, placements, {seq}, DType::kI64));
    return DTensor::FromSpec(x.runtime(), spec);
  }
  DT_ASSIGN_OR_RETURN(const Tensor local,
                      Tensor::FromVector<int64_t>(
                          positions, {static_cast<int64_t>(positions.size())}));
  FromLocalOptions layout;
  layout.global_shape = Shape{seq};
  return DTensor::FromLocal(x.runtime(), local, mesh, placements, layout);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Attention>> Attention::Create(
    int64_t dim, int64_t n_heads, int64_t n_kv_heads, double rope_theta,
    Initializer weight_init) {
  DT_RETURN_IF_ERROR(CheckHeads(dim, n_heads, n_kv_heads, rope_theta));
  std::unique_ptr<Attention> attention(
      new Attention(dim, n_heads, n_kv_heads, rope_theta));
  const int64_t head_dim = dim / n_heads;
  const int64_t q_dim = n_heads * head_dim;
  const int64_t kv_dim = n_kv_heads * head_dim;
  DT_ASSIGN_OR_RETURN(auto wq, Projection(dim, q_dim, weight_init));
  DT_ASSIGN_OR_RETURN(auto wk, Projection(dim, kv_dim, weight_init));
  DT_ASSIGN_OR_RETURN(auto wv, Projection(dim, kv_dim, weight_init));
  DT_ASSIGN_OR_RETURN(auto wo, Projection(q_dim, dim, weight_init));
  DT_ASSIGN_OR_RETURN(attention->wq_,
                      attention->AddModule("wq", std::move(wq)));
  DT_ASSIGN_OR_RETURN(attention->wk_,
                      attention->AddModule("wk", std::move(wk)));
  DT_ASSIGN_OR_RETURN(attention->wv_,
                      attention->AddModule("wv", std::move(wv)));
  DT_ASSIGN_OR_RETURN(attention->wo_,
                      attention->AddModule("wo", std::move(wo)));
  return attention;
}

absl::StatusOr<DTensor> Attention::Forward(const DTensor& x) {
  DT_RETURN_IF_ERROR(CheckInput(kName, x, 3, dim_));
  const int64_t batch = x.shape()[0];
  const int64_t seq = x.shape()[1];
  const int64_t hd = head_dim();
  const int64_t group = n_heads_ / n_kv_heads_;
  DTensor positions;  // Undefined: 0..seq-1.
  if (context_parallel_.has_value()) {
    DT_ASSIGN_OR_RETURN(positions, PositionsOf(x, *context_parallel_));
  }
  // [batch, seq, heads, head_dim], rotated.
  DT_ASSIGN_OR_RETURN(DTensor q, (*wq_)(x));
  DT_ASSIGN_OR_RETURN(q, ops::View(q, {batch, seq, n_heads_, hd}));
  DT_ASSIGN_OR_RETURN(q, ops::RotaryEmbedding(q, positions, rope_theta_));
  DT_ASSIGN_OR_RETURN(DTensor k, (*wk_)(x));
  DT_ASSIGN_OR_RETURN(k, ops::View(k, {batch, seq, n_kv_heads_, hd}));
  DT_ASSIGN_OR_RETURN(k, ops::RotaryEmbedding(k, positions, rope_theta_));
  DT_ASSIGN_OR_RETURN(DTensor v, (*wv_)(x));
  DT_ASSIGN_OR_RETURN(v, ops::View(v, {batch, seq, n_kv_heads_, hd}));
  // q [batch, kv_heads, group, seq, head_dim]; k, v [batch, kv_heads, 1, seq,
  // head_dim]: query head h = kv * group + g uses key/value head kv.
  DT_ASSIGN_OR_RETURN(q, ops::View(q, {batch, seq, n_kv_heads_, group, hd}));
  DT_ASSIGN_OR_RETURN(q, ops::Permute(q, {0, 2, 3, 1, 4}));
  DT_ASSIGN_OR_RETURN(k, ops::Permute(k, {0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(k, ops::Unsqueeze(k, 2));
  DT_ASSIGN_OR_RETURN(v, ops::Permute(v, {0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(v, ops::Unsqueeze(v, 2));
  DTensor out;
  if (context_parallel_.has_value()) {
    const ops::RingAttentionOptions ring{context_parallel_->mesh_dim,
                                         context_parallel_->order,
                                         /*causal=*/true};
    DT_ASSIGN_OR_RETURN(out, nn::RingAttention(q, k, v, ring));
  } else {
    DT_ASSIGN_OR_RETURN(
        out, ops::ScaledDotProductAttention(q, k, v, /*causal=*/true));
  }
  // Back to [batch, seq, n_heads * head_dim], heads in order.
  DT_ASSIGN_OR_RETURN(out, ops::Permute(out, {0, 3, 1, 2, 4}));
  DT_ASSIGN_OR_RETURN(out, ops::Reshape(out, {batch, seq, n_heads_ * hd}));
  return (*wo_)(out);
}

std::string Attention::ExtraRepr() const {
  return absl::StrCat("n_heads=", n_heads_, ", n_kv_heads=", n_kv_heads_,
                      ", head_dim=", head_dim(), ", rope_theta=", rope_theta_);
}

}  // namespace nn
}  // namespace dtensor
