#include "dtensor/ops/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/nn_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace ops {
namespace {

// ---- scaled_dot_product_attention. ----

// A scale of 0 is 1 / sqrt(head_dim).
constexpr ArgSpec kAttentionArgs[] = {{"causal", ArgKind::kBool, "false"},
                                      {"scale", ArgKind::kScalar, "0"}};
constexpr auto kCausal = KeyOf<ArgKind::kBool>(kAttentionArgs, "causal");
constexpr auto kScale = KeyOf<ArgKind::kScalar>(kAttentionArgs, "scale");

// The output shape [batch..., Lq, Ev] of q, k, v (ranks >= 2, checked by the
// probe); errors as the tensor layer's.
absl::StatusOr<Shape> AttentionShape(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs) {
  const Shape& q = inputs[0]->shape();
  const Shape& k = inputs[1]->shape();
  const Shape& v = inputs[2]->shape();
  const auto shapes = [&] {
    return absl::StrCat("q ", ShapeToString(q), ", k ", ShapeToString(k),
                        ", v ", ShapeToString(v));
  };
  if (q.back() != k.back() || k[k.size() - 2] != v[v.size() - 2]) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": need q [..., Lq, E], k [..., Lk, E], v [..., Lk, "
                     "Ev], got ",
                     shapes()));
  }
  const auto batch_of = [](const Shape& s) {
    return absl::MakeConstSpan(s).subspan(0, s.size() - 2);
  };
  absl::StatusOr<Shape> batch = BroadcastShapes(batch_of(q), batch_of(k));
  if (batch.ok()) batch = BroadcastShapes(*batch, batch_of(v));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": leading dims do not broadcast: ", shapes()));
  }
  Shape out = *std::move(batch);
  out.push_back(q[q.size() - 2]);
  out.push_back(v.back());
  return out;
}

absl::StatusOr<Tensor> AttentionLocal(absl::Span<const Tensor> in,
                                      const OpArgs& args) {
  return dtensor::ScaledDotProductAttention(
      in[0], in[1], in[2], args.Get(kCausal), args.Get(kScale));
}

// Loops: the output's batch dims, then Lq, Ev; E and Lk iterate none.
absl::StatusOr<std::vector<OpStrategy>> AttentionStrategies(
    const StrategyContext& ctx) {
  const Shape& out = ctx.outputs[0].shape;
  const int nb = static_cast<int>(out.size()) - 2;
  const Shape batch(out.begin(), out.begin() + nb);
  const auto loops_of = [&](const DTensorSpec& spec, int second_last,
                            int last) {
    const Shape& s = spec.shape();
    std::vector<int> loops =
        BroadcastLoops(absl::MakeConstSpan(s).subspan(0, s.size() - 2), batch);
    loops.push_back(second_last);
    loops.push_back(last);
    return loops;
  };
  EinsumSpec spec;
  spec.num_loops = nb + 2;
  spec.loops.inputs = {loops_of(*ctx.inputs[0], nb, kNoLoop),
                       loops_of(*ctx.inputs[1], kNoLoop, kNoLoop),
                       loops_of(*ctx.inputs[2], kNoLoop, nb + 1)};
  spec.loops.outputs = {IdentityLoops(nb + 2)};
  // softmax(q k^T) v is linear in v.
  spec.partial_rules = {{{2}, LinearReduceOps()}};
  return EinsumStrategies(ctx, spec);
}

// With the queries sharded, a causal rank holding queries [o, o + n) of Lq
// sees keys j <= i + (Lk - Lq) for global query i: it keeps the first
// o + n + Lk - Lq keys, so that the tensor layer's end-aligned mask over its
// own queries is the global one.
absl::StatusOr<OpLocals> AttentionKernel(const KernelContext& ctx,
                                         absl::Span<const Tensor> inputs) {
  Tensor k = inputs[1];
  Tensor v = inputs[2];
  if (ctx.args().Get(kCausal)) {
    const DTensorSpec& q_spec = *ctx.input(0);
    const int64_t lq_dim = q_spec.ndim() - 2;
    const int64_t lq = q_spec.shape()[lq_dim];
    const int64_t lk = k.size(-2);
    DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, q_spec));
    const int64_t keys = std::clamp<int64_t>(
        block.offset[lq_dim] + block.shape[lq_dim] + lk - lq, 0, lk);
    if (keys != lk) {
      DT_ASSIGN_OR_RETURN(k, k.Narrow(-2, 0, keys));
      DT_ASSIGN_OR_RETURN(v, v.Narrow(-2, 0, keys));
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor out,
                      AttentionLocal({inputs[0], k, v}, ctx.args()));
  return OpLocals{std::move(out)};
}

// The replicated mask [lq, lk] of the keys each query sees under causal
// attention: query i sees keys j <= i + (lk - lq). Without data under a
// metadata-only runtime (filling lq * lk elements would dominate a
// metadata-only training step at long sequences).
absl::StatusOr<DTensor> CausalMask(const DTensor& like, int64_t lq,
                                   int64_t lk) {
  if (like.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(like.mesh(),
                            std::vector<Placement>(like.mesh().ndim()),
                            {lq, lk}, DType::kBool));
    return DTensor::FromSpec(like.runtime(), std::move(spec));
  }
  DT_ASSIGN_OR_RETURN(Tensor mask, Tensor::Empty({lq, lk}, DType::kBool));
  bool* seen = mask.data<bool>();
  for (int64_t i = 0; i < lq; ++i) {
    for (int64_t j = 0; j < lk; ++j) seen[i * lk + j] = j <= i + lk - lq;
  }
  return ReplicatedConstant(like, mask);
}

// Recomputes the attention weights p = softmax(s) of the scores
// s = q k^T * scale (keys a causal query does not see at -inf, and p 0 there,
// so that a query seeing no key has p = 0, like its zero output row), then
// dv = p^T g, dp = g v^T, ds = p (dp - sum(dp p)), dq = ds k * scale,
// dk = ds^T q * scale, each summed over the batch dims it was broadcast on.
absl::StatusOr<InputGrads> AttentionBackward(const BackwardCall& call) {
  const DTensor& q = call.inputs[0];
  const DTensor& k = call.inputs[1];
  const DTensor& v = call.inputs[2];
  const DTensor& g = call.grad_outputs[0];
  const bool causal = call.args.Get(kCausal);
  const double scale =
      call.args.Get(kScale) > 0
          ? call.args.Get(kScale)
          : 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
  const int64_t last[] = {-1};
  DT_ASSIGN_OR_RETURN(DTensor k_t, Transpose(k, -2, -1));
  DT_ASSIGN_OR_RETURN(DTensor scores, Matmul(q, k_t));
  DT_ASSIGN_OR_RETURN(scores, Mul(scores, scale));
  DTensor visible;
  if (causal) {
    // Query i sees keys j <= i + (lk - lq).
    const int64_t lq = q.shape()[q.spec().ndim() - 2];
    const int64_t lk = k.shape()[k.spec().ndim() - 2];
    DT_ASSIGN_OR_RETURN(visible, CausalMask(q, lq, lk));
    DT_ASSIGN_OR_RETURN(
        DTensor hidden,
        ScalarLike(scores, -std::numeric_limits<double>::infinity()));
    DT_ASSIGN_OR_RETURN(scores, Where(visible, scores, hidden));
  }
  DT_ASSIGN_OR_RETURN(DTensor p, Softmax(scores, -1));
  if (causal) {
    DT_ASSIGN_OR_RETURN(DTensor zero, ScalarLike(p, 0));
    DT_ASSIGN_OR_RETURN(p, Where(visible, p, zero));
  }
  DT_ASSIGN_OR_RETURN(DTensor p_t, Transpose(p, -2, -1));
  DT_ASSIGN_OR_RETURN(DTensor dv, Matmul(p_t, g));
  DT_ASSIGN_OR_RETURN(DTensor v_t, Transpose(v, -2, -1));
  DT_ASSIGN_OR_RETURN(DTensor dp, Matmul(g, v_t));
  DT_ASSIGN_OR_RETURN(DTensor dp_p, Mul(dp, p));
  DT_ASSIGN_OR_RETURN(DTensor total, Sum(dp_p, last, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(DTensor ds, Sub(dp, total));
  DT_ASSIGN_OR_RETURN(ds, Mul(ds, p));
  DT_ASSIGN_OR_RETURN(ds, Mul(ds, scale));
  DT_ASSIGN_OR_RETURN(DTensor dq, Matmul(ds, k));
  DT_ASSIGN_OR_RETURN(DTensor ds_t, Transpose(ds, -2, -1));
  DT_ASSIGN_OR_RETURN(DTensor dk, Matmul(ds_t, q));
  DT_ASSIGN_OR_RETURN(dq, SumToShape(dq, q.shape()));
  DT_ASSIGN_OR_RETURN(dk, SumToShape(dk, k.shape()));
  DT_ASSIGN_OR_RETURN(dv, SumToShape(dv, v.shape()));
  return InputGrads{std::move(dq), std::move(dk), std::move(dv)};
}

OpDef MakeAttention() {
  OpDef def;
  def.name = "scaled_dot_product_attention";
  def.summary = "softmax(q k^T * scale [+ causal mask]) v";
  def.num_inputs = 3;
  def.args.assign(std::begin(kAttentionArgs), std::end(kAttentionArgs));
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    constexpr absl::string_view kOp = "scaled_dot_product_attention";
    DT_ASSIGN_OR_RETURN(DType dtype,
                        ProbeDType(kOp, AttentionLocal, inputs, args));
    DT_ASSIGN_OR_RETURN(Shape out, AttentionShape(kOp, inputs));
    return std::vector<TensorMeta>{{std::move(out), dtype}};
  };
  def.strategies = AttentionStrategies;
  def.kernel = AttentionKernel;
  def.backward = AttentionBackward;
  return def;
}

const OpDef& AttentionDef() {
  static const OpDef* def = new OpDef(MakeAttention());
  return *def;
}

}  // namespace

absl::StatusOr<DTensor> ScaledDotProductAttention(const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v, bool causal,
                                                  double scale) {
  const DTensor* in[] = {&q, &k, &v};
  OpArgs args;
  args.AddBool(causal).AddScalar(scale);
  return DispatchOne(AttentionDef(), in, args);
}

std::vector<const OpDef*> AttentionOps() { return {&AttentionDef()}; }

}  // namespace ops
}  // namespace dtensor
