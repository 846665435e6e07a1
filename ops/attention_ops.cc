#include "dtensor/ops/attention_ops.h"

#include <algorithm>
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
#include "dtensor/tensor/attention.h"
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

// The output shape [batch..., Lq, Ev] of q, k, v (inputs 0-2); errors as
// the tensor layer's.
absl::StatusOr<Shape> AttentionShape(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs) {
  return AttentionOutputShape(inputs[0]->shape(), inputs[1]->shape(),
                              inputs[2]->shape(), op);
}

absl::StatusOr<Tensor> AttentionLocal(absl::Span<const Tensor> in,
                                      const OpArgs& args) {
  return dtensor::ScaledDotProductAttention(
      in[0], in[1], in[2], args.Get(kCausal), args.Get(kScale));
}

// The loop dims of q, k, v and of the output [batch..., Lq, Ev] (`out`):
// the output's batch dims 0..nb-1, then Lq (nb) and Ev (nb + 1); E and Lk
// iterate none (never sharded: the scores sum over E, the softmax runs over
// Lk).
struct AttentionLoops {
  std::vector<int> q, k, v, out;
};
AttentionLoops LoopsOfAttention(absl::Span<const DTensorSpec* const> qkv,
                                const Shape& out) {
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
  return {loops_of(*qkv[0], nb, kNoLoop), loops_of(*qkv[1], kNoLoop, kNoLoop),
          loops_of(*qkv[2], kNoLoop, nb + 1), IdentityLoops(nb + 2)};
}

// The forward's strategies, per mesh dim (the einsum options of q, k, v and
// the output, each given the lse's placement):
//   - everything Replicate: the lse too;
//   - a batch dim or Lq sharded (q, k, v sharded where they iterate it,
//     Replicate where broadcast): the lse iterates it, sharded alike;
//   - Ev sharded (v and the output): q and k are whole, so every rank
//     computes every row's lse over every key: Replicate;
//   - v Partial(sum | avg), q and k Replicate, the output Partial: the lse
//     depends on q and k only, the same on every rank: Replicate. (It is
//     never Partial: a sum or mean of log-sum-exps is none.)
// E and Lk iterate no loop, so no strategy splits the keys (ring attention,
// dtensor/ops/ring_attention.h, is what does, merging the blocks' lses).
absl::StatusOr<std::vector<OpStrategy>> AttentionStrategies(
    const StrategyContext& ctx) {
  const Shape& out = ctx.outputs[0].shape;
  const int lq_loop = static_cast<int>(out.size()) - 2;
  const AttentionLoops loops = LoopsOfAttention(ctx.inputs, out);
  EinsumSpec spec;
  spec.num_loops = static_cast<int>(out.size());
  spec.loops.inputs = {loops.q, loops.k, loops.v};
  spec.loops.outputs = {loops.out};
  // softmax(q k^T) v is linear in v.
  spec.partial_rules = {{{2}, LinearReduceOps()}};
  const bool present[] = {true, true, true};
  std::vector<DimStrategy> options = EinsumDimStrategies(spec, present);
  for (DimStrategy& option : options) {
    const Placement& o = option.outputs[0];
    option.outputs.push_back(
        o.is_shard() && o.dim() <= lq_loop ? o : Placement::Replicate());
  }
  spec.loops.outputs.push_back(IdentityLoops(lq_loop + 1));
  const std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                         options);
  return CombineMeshDims(ctx, candidates, spec.loops);
}

// The keys [0, result) of the local k that this rank's queries see. With the
// queries sharded, a causal rank holding queries [o, o + n) of Lq sees keys
// j <= i + (Lk - Lq) for global query i: the first o + n + Lk - Lq keys, so
// that the tensor layer's end-aligned mask over its own queries is the global
// one. All of them otherwise.
absl::StatusOr<int64_t> KeysOfRank(const KernelContext& ctx, int64_t lk) {
  if (!ctx.args().Get(kCausal)) return lk;
  const DTensorSpec& q_spec = *ctx.input(0);
  const int64_t lq_dim = q_spec.ndim() - 2;
  const int64_t lq = q_spec.shape()[lq_dim];
  DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, q_spec));
  return std::clamp<int64_t>(
      block.offset[lq_dim] + block.shape[lq_dim] + lk - lq, 0, lk);
}

// The output and the rows' log-sum-exps of this rank's queries. The tiled
// kernels make the lse as they go (free); on CUDA, head dims too large for
// the kernel's tiles take the host path for it instead of the materialized
// one, where the backward of such dims runs anyway (then without its own
// lse pass).
absl::StatusOr<OpLocals> AttentionKernel(const KernelContext& ctx,
                                         absl::Span<const Tensor> inputs) {
  Tensor k = inputs[1];
  Tensor v = inputs[2];
  DT_ASSIGN_OR_RETURN(const int64_t keys, KeysOfRank(ctx, k.size(-2)));
  if (keys != k.size(-2)) {
    DT_ASSIGN_OR_RETURN(k, k.Narrow(-2, 0, keys));
    DT_ASSIGN_OR_RETURN(v, v.Narrow(-2, 0, keys));
  }
  DT_ASSIGN_OR_RETURN(
      AttentionWithLse result,
      dtensor::ScaledDotProductAttentionWithLse(
          inputs[0], k, v, ctx.args().Get(kCausal), ctx.args().Get(kScale)));
  return OpLocals{std::move(result.out), std::move(result.lse)};
}

// One fused op: scaled_dot_product_attention_backward with the forward's
// saved log-sum-exps (output 1), so that it does not recompute them.
absl::StatusOr<InputGrads> AttentionGrad(const BackwardCall& call) {
  return ScaledDotProductAttentionBackwardWithLse(
      call.inputs[0], call.inputs[1], call.inputs[2], call.outputs[0],
      call.grad_outputs[0], call.outputs[1], call.args.Get(kCausal),
      call.args.Get(kScale));
}

// The forward's flops: q·k^T and p·v, 2·Lq·Lk·(E + Ev) per batch and head
// (of q: grouped kv heads serve several), half of it under a causal mask of
// a square score matrix (what the tiled kernels skip).
double AttentionFlops(absl::Span<const Tensor> in, absl::Span<const Tensor>,
                      const OpArgs& args) {
  const Tensor& q = in[0];
  const Tensor& v = in[2];
  if (!q.defined() || !v.defined() || q.dim() < 2 || v.dim() < 2) return 0.0;
  const double lq = static_cast<double>(q.size(-2));
  const double e = static_cast<double>(q.size(-1));
  const double lk = static_cast<double>(v.size(-2));
  const double ev = static_cast<double>(v.size(-1));
  if (lq == 0 || e == 0) return 0.0;
  const double heads = static_cast<double>(q.numel()) / (lq * e);
  double flops = 2.0 * heads * lq * lk * (e + ev);
  if (args.Get(kCausal) && lq == lk) flops /= 2;
  return flops;
}

// Recomputing q·k^T, then dv, dp, dq and dk: five products for the
// forward's two (2.5 times its flops for E = Ev); without the forward's lse
// (input 5), one more q·k^T pass to recompute it first.
double AttentionBackwardFlops(absl::Span<const Tensor> in,
                              absl::Span<const Tensor> out,
                              const OpArgs& args) {
  const double forward = AttentionFlops(in, out, args);
  if (forward == 0 || (in.size() > 5 && in[5].defined())) {
    return 2.5 * forward;
  }
  const double e = static_cast<double>(in[0].size(-1));
  const double ev = static_cast<double>(in[2].size(-1));
  return 2.5 * forward + forward * e / (e + ev);
}

OpDef MakeAttention() {
  OpDef def =
      NamedOpDef("scaled_dot_product_attention",
                 "softmax(q k^T * scale [+ causal mask]) v", kAttentionArgs);
  def.num_inputs = 3;
  // The rows' log-sum-exps [batch..., Lq], for the backward.
  def.num_outputs = 2;
  def.num_saved_outputs = 1;
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    constexpr absl::string_view kOp = "scaled_dot_product_attention";
    DT_ASSIGN_OR_RETURN(DType dtype,
                        ProbeDType(kOp, AttentionLocal, inputs, args));
    DT_ASSIGN_OR_RETURN(Shape out, AttentionShape(kOp, inputs));
    Shape lse(out.begin(), out.end() - 1);
    return std::vector<TensorMeta>{{std::move(out), dtype},
                                   {std::move(lse), AttentionLseDType(dtype)}};
  };
  def.strategies = AttentionStrategies;
  def.kernel = AttentionKernel;
  def.backward = AttentionGrad;
  def.flops = AttentionFlops;
  return def;
}

// ---- scaled_dot_product_attention_backward: (q, k, v, out, grad_out) ->
// (dq, dk, dv). ----

constexpr absl::string_view kBackwardName =
    "scaled_dot_product_attention_backward";

// lse, where given, of the rows' shape [batch..., Lq] and the lse dtype of
// `dtype`.
absl::Status CheckLseSpec(const DTensorSpec* lse, const Shape& out,
                          DType dtype) {
  if (lse == nullptr) return absl::OkStatus();
  const Shape rows(out.begin(), out.end() - 1);
  const DType lse_dtype = AttentionLseDType(dtype);
  if (lse->shape() == rows && lse->dtype() == lse_dtype) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      kBackwardName, ": lse is ", std::string(DTypeName(lse->dtype())), " ",
      ShapeToString(lse->shape()), "; expected ",
      std::string(DTypeName(lse_dtype)), " ", ShapeToString(rows)));
}

// The forward's checks on q, k, v; out and grad_out of the output's shape
// and q's dtype; lse (optional) as CheckLseSpec. Outputs: q's, k's and v's
// shapes.
absl::StatusOr<std::vector<TensorMeta>> AttentionBackwardInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args) {
  const auto qkv = inputs.subspan(0, 3);
  DT_ASSIGN_OR_RETURN(DType dtype,
                      ProbeDType(kBackwardName, AttentionLocal, qkv, args));
  DT_ASSIGN_OR_RETURN(Shape out, AttentionShape(kBackwardName, qkv));
  const char* names[] = {"out", "grad_out"};
  for (int i = 0; i < 2; ++i) {
    const DTensorSpec& spec = *inputs[3 + i];
    if (spec.shape() != out || spec.dtype() != dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(kBackwardName, ": ", names[i], " is ",
                       std::string(DTypeName(spec.dtype())), " ",
                       ShapeToString(spec.shape()), "; the output is ",
                       std::string(DTypeName(dtype)), " ", ShapeToString(out)));
    }
  }
  DT_RETURN_IF_ERROR(
      CheckLseSpec(inputs.size() > 5 ? inputs[5] : nullptr, out, dtype));
  return std::vector<TensorMeta>{{inputs[0]->shape(), dtype},
                                 {inputs[1]->shape(), dtype},
                                 {inputs[2]->shape(), dtype}};
}

// The placement of a tensor with `loops` when a mesh dim shards loop `loop`:
// Shard of its dim iterating it; else Replicate for an input, and
// Partial(sum) for a gradient (the sum over the loop's blocks of what each
// rank adds: a query block's share of dk and dv, a head-dim block's share of
// dq and dk, a broadcast batch dim's terms).
Placement PlacementFor(const std::vector<int>& loops, int loop, bool output) {
  for (size_t d = 0; d < loops.size(); ++d) {
    if (loops[d] == loop) return Placement::Shard(static_cast<int64_t>(d));
  }
  return output ? Placement::Partial(ReduceOp::kSum) : Placement::Replicate();
}

// Per mesh dim: replicate; shard one loop (a batch dim of the output, Lq or
// Ev), each input sharded on it where it iterates it (Replicate where
// broadcast), each gradient sharded where its input iterates it and
// Partial(sum) elsewhere; or grad_out Partial(sum | avg) with the rest
// Replicate (every gradient is linear in grad_out) giving Partial gradients.
// The lse [batch..., Lq] (absent: Replicate, never read) follows q's batch
// and Lq shards and is Replicate otherwise: with Ev sharded or grad_out
// Partial every rank has every query and needs each row's whole lse (never
// Partial, which an lse cannot be).
absl::StatusOr<std::vector<OpStrategy>> AttentionBackwardStrategies(
    const StrategyContext& ctx) {
  const Shape& out = ctx.inputs[3]->shape();
  const AttentionLoops a = LoopsOfAttention(ctx.inputs.subspan(0, 3), out);
  const bool has_lse = ctx.inputs.size() > 5 && ctx.inputs[5] != nullptr;
  const std::vector<int> lse_loops =
      has_lse ? IdentityLoops(out.size() - 1) : std::vector<int>{};
  LoopDims loops;
  loops.inputs = {a.q, a.k, a.v, a.out, a.out, lse_loops};
  loops.outputs = {a.q, a.k, a.v};
  const Placement r = Placement::Replicate();
  std::vector<DimStrategy> options = {{{r, r, r, r, r, r}, {r, r, r}, {}}};
  for (int loop = 0; loop < static_cast<int>(out.size()); ++loop) {
    DimStrategy option;
    for (const std::vector<int>& in : loops.inputs) {
      option.inputs.push_back(PlacementFor(in, loop, false));
    }
    for (const std::vector<int>& grad : loops.outputs) {
      option.outputs.push_back(PlacementFor(grad, loop, true));
    }
    options.push_back(std::move(option));
  }
  for (ReduceOp op : LinearReduceOps()) {
    const Placement partial = Placement::Partial(op);
    options.push_back(
        {{r, r, r, r, partial, r}, {partial, partial, partial}, {}});
  }
  const std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                         options);
  return CombineMeshDims(ctx, candidates, loops);
}

// The tensor layer's backward on this rank's blocks, with the forward's key
// narrowing under a sharded causal Lq (the lse of these queries, where given,
// is over those keys: the forward narrowed alike); dk and dv are 0 for the
// keys past the narrowed ones (their Partial(sum) terms from this rank's
// queries).
absl::StatusOr<OpLocals> AttentionBackwardKernel(
    const KernelContext& ctx, absl::Span<const Tensor> inputs) {
  const Tensor& k = inputs[1];
  const Tensor& v = inputs[2];
  DT_ASSIGN_OR_RETURN(const int64_t keys, KeysOfRank(ctx, k.size(-2)));
  DT_ASSIGN_OR_RETURN(const Tensor k_seen, k.Narrow(-2, 0, keys));
  DT_ASSIGN_OR_RETURN(const Tensor v_seen, v.Narrow(-2, 0, keys));
  const bool causal = ctx.args().Get(kCausal);
  const double scale = ctx.args().Get(kScale);
  const bool has_lse = inputs.size() > 5 && inputs[5].defined();
  DT_ASSIGN_OR_RETURN(AttentionGrads grads,
                      has_lse
                          ? dtensor::ScaledDotProductAttentionBackwardWithLse(
                                inputs[0], k_seen, v_seen, inputs[3], inputs[4],
                                inputs[5], causal, scale)
                          : dtensor::ScaledDotProductAttentionBackward(
                                inputs[0], k_seen, v_seen, inputs[3], inputs[4],
                                causal, scale));
  if (keys != k.size(-2)) {
    for (auto [grad, like] : {std::pair{&grads.dk, &k}, {&grads.dv, &v}}) {
      DT_ASSIGN_OR_RETURN(
          Tensor full,
          Tensor::Zeros(like->shape(), like->dtype(), like->device()));
      DT_ASSIGN_OR_RETURN(Tensor seen, full.Narrow(-2, 0, keys));
      DT_RETURN_IF_ERROR(seen.CopyFrom(*grad));
      *grad = std::move(full);
    }
  }
  return OpLocals{std::move(grads.dq), std::move(grads.dk),
                  std::move(grads.dv)};
}

// ---- Its own backward (double differentiation), through materialized
// [Lq, Lk] weights: a rare path, written with ops. ----

// The replicated mask [lq, lk] of the keys each query sees under causal
// attention: query i sees keys j <= i + (lk - lq). Without data under a
// metadata-only runtime (filling lq * lk elements would dominate a
// metadata-only run at long sequences).
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

// The attention weights p = softmax(q k^T * scale) [batch..., Lq, Lk], the
// keys a causal query does not see at -inf and p = 0 there (so that a query
// seeing no key has p = 0, like its zero output row).
absl::StatusOr<DTensor> AttentionWeights(const DTensor& q, const DTensor& k,
                                         bool causal, double scale) {
  DT_ASSIGN_OR_RETURN(DTensor k_t, Transpose(k, -2, -1));
  DT_ASSIGN_OR_RETURN(DTensor scores, Matmul(q, k_t));
  DT_ASSIGN_OR_RETURN(scores, Mul(scores, scale));
  if (!causal) return Softmax(scores, -1);
  const int64_t lq = q.shape()[q.spec().ndim() - 2];
  const int64_t lk = k.shape()[k.spec().ndim() - 2];
  DT_ASSIGN_OR_RETURN(DTensor visible, CausalMask(q, lq, lk));
  DT_ASSIGN_OR_RETURN(
      DTensor hidden,
      ScalarLike(scores, -std::numeric_limits<double>::infinity()));
  DT_ASSIGN_OR_RETURN(scores, Where(visible, scores, hidden));
  DT_ASSIGN_OR_RETURN(DTensor p, Softmax(scores, -1));
  DT_ASSIGN_OR_RETURN(DTensor zero, ScalarLike(p, 0));
  return Where(visible, p, zero);
}

// a b^T over the last two dims (batch dims broadcast).
absl::StatusOr<DTensor> MatmulT(const DTensor& a, const DTensor& b) {
  DT_ASSIGN_OR_RETURN(DTensor b_t, Transpose(b, -2, -1));
  return Matmul(a, b_t);
}

// a^T b over the last two dims.
absl::StatusOr<DTensor> TMatmul(const DTensor& a, const DTensor& b) {
  DT_ASSIGN_OR_RETURN(DTensor a_t, Transpose(a, -2, -1));
  return Matmul(a_t, b);
}

// x - rowsum(x * y) over the last dim, kept.
absl::StatusOr<DTensor> MinusRowDot(const DTensor& x, const DTensor& y) {
  const int64_t last[] = {-1};
  DT_ASSIGN_OR_RETURN(DTensor xy, Mul(x, y));
  DT_ASSIGN_OR_RETURN(DTensor total, Sum(xy, last, /*keepdim=*/true));
  return Sub(x, total);
}

// The forward of the backward op, materialized: p, dp = g v^T and
// ds = p (dp - delta) with delta = rowsum(g * out) (unscaled).
struct BackwardTerms {
  DTensor p, dp_minus_delta, ds;
};
absl::StatusOr<BackwardTerms> BackwardTermsOf(const BackwardCall& call,
                                              double scale) {
  const DTensor& g = call.inputs[4];
  const int64_t last[] = {-1};
  BackwardTerms t;
  DT_ASSIGN_OR_RETURN(t.p, AttentionWeights(call.inputs[0], call.inputs[1],
                                            call.args.Get(kCausal), scale));
  DT_ASSIGN_OR_RETURN(DTensor dp, MatmulT(g, call.inputs[2]));
  DT_ASSIGN_OR_RETURN(DTensor g_out, Mul(g, call.inputs[3]));
  DT_ASSIGN_OR_RETURN(DTensor delta, Sum(g_out, last, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(t.dp_minus_delta, Sub(dp, delta));
  DT_ASSIGN_OR_RETURN(t.ds, Mul(t.p, t.dp_minus_delta));
  return t;
}

// The gradient of output i of the call, zeros where it got none.
absl::StatusOr<DTensor> OutputGradOrZeros(const BackwardCall& call, int i) {
  if (call.grad_outputs[i].defined()) return call.grad_outputs[i];
  return FullLike(call.outputs[i], 0);
}

// With s the scale, the op computes dq = s ds k, dk = s ds^T q, dv = p^T g.
// For the gradients a, b, c of dq, dk, dv and w = s (a k^T + q b^T) (that of
// ds): q gets s ds b + s dz k, k gets s ds^T a + s dz^T q, where dz =
// p (gp - rowsum(gp p)) is the softmax's backward of gp = g c^T +
// w (dp - delta) (that of p); with wp = w p (that of dp), v gets wp^T g, g
// gets p c + wp v - rowsum(wp) out, and out gets -rowsum(wp) g. A given lse
// gets no gradient: p is recomputed from q and k here, so q's and k's
// gradients hold the lse's dependence on them (it is the forward's lse of q
// and k), which its own gradient through the forward would add again.
absl::StatusOr<InputGrads> AttentionBackwardBackward(const BackwardCall& call) {
  const DTensor& q = call.inputs[0];
  const DTensor& k = call.inputs[1];
  const DTensor& v = call.inputs[2];
  const DTensor& out = call.inputs[3];
  const DTensor& g = call.inputs[4];
  const double s = AttentionScale(call.args.Get(kScale), q.shape().back());
  DT_ASSIGN_OR_RETURN(const BackwardTerms t, BackwardTermsOf(call, s));
  DT_ASSIGN_OR_RETURN(const DTensor a, OutputGradOrZeros(call, 0));
  DT_ASSIGN_OR_RETURN(const DTensor b, OutputGradOrZeros(call, 1));
  DT_ASSIGN_OR_RETURN(const DTensor c, OutputGradOrZeros(call, 2));
  DT_ASSIGN_OR_RETURN(DTensor a_k, MatmulT(a, k));
  DT_ASSIGN_OR_RETURN(DTensor q_b, MatmulT(q, b));
  DT_ASSIGN_OR_RETURN(DTensor w, Add(a_k, q_b));
  DT_ASSIGN_OR_RETURN(w, Mul(w, s));
  DT_ASSIGN_OR_RETURN(DTensor wp, Mul(w, t.p));
  DT_ASSIGN_OR_RETURN(DTensor gp, MatmulT(g, c));
  DT_ASSIGN_OR_RETURN(DTensor w_dp, Mul(w, t.dp_minus_delta));
  DT_ASSIGN_OR_RETURN(gp, Add(gp, w_dp));
  DT_ASSIGN_OR_RETURN(DTensor dz, MinusRowDot(gp, t.p));
  DT_ASSIGN_OR_RETURN(dz, Mul(dz, t.p));
  // Both q and k gradients: s (ds b + dz k), s (ds^T a + dz^T q).
  DT_ASSIGN_OR_RETURN(DTensor dq, Matmul(t.ds, b));
  DT_ASSIGN_OR_RETURN(DTensor dz_k, Matmul(dz, k));
  DT_ASSIGN_OR_RETURN(dq, Add(dq, dz_k));
  DT_ASSIGN_OR_RETURN(dq, Mul(dq, s));
  DT_ASSIGN_OR_RETURN(DTensor dk, TMatmul(t.ds, a));
  DT_ASSIGN_OR_RETURN(DTensor dz_q, TMatmul(dz, q));
  DT_ASSIGN_OR_RETURN(dk, Add(dk, dz_q));
  DT_ASSIGN_OR_RETURN(dk, Mul(dk, s));
  DT_ASSIGN_OR_RETURN(DTensor dv, TMatmul(wp, g));
  // -rowsum(wp), for out and g.
  const int64_t last[] = {-1};
  DT_ASSIGN_OR_RETURN(DTensor minus_row, Sum(wp, last, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(minus_row, Neg(minus_row));
  DT_ASSIGN_OR_RETURN(DTensor dout, Mul(minus_row, g));
  DT_ASSIGN_OR_RETURN(DTensor dg, Matmul(t.p, c));
  DT_ASSIGN_OR_RETURN(DTensor wp_v, Matmul(wp, v));
  DT_ASSIGN_OR_RETURN(dg, Add(dg, wp_v));
  DT_ASSIGN_OR_RETURN(DTensor row_out, Mul(minus_row, out));
  DT_ASSIGN_OR_RETURN(dg, Add(dg, row_out));
  InputGrads grads(6);
  DT_ASSIGN_OR_RETURN(grads[0], SumToShape(dq, q.shape()));
  DT_ASSIGN_OR_RETURN(grads[1], SumToShape(dk, k.shape()));
  DT_ASSIGN_OR_RETURN(grads[2], SumToShape(dv, v.shape()));
  grads[3] = std::move(dout);
  grads[4] = std::move(dg);
  return grads;
}

OpDef MakeAttentionBackward() {
  OpDef def = NamedOpDef(
      kBackwardName,
      "dq, dk, dv of scaled_dot_product_attention given out and grad_out: one "
      "tiled pass, no [Lq, Lk] matrix",
      kAttentionArgs);
  // The forward's saved lse, optional (absent: recomputed).
  def.num_inputs = 6;
  def.num_optional_inputs = 1;
  def.num_outputs = 3;
  def.infer = AttentionBackwardInfer;
  def.strategies = AttentionBackwardStrategies;
  def.kernel = AttentionBackwardKernel;
  def.backward = AttentionBackwardBackward;
  def.flops = AttentionBackwardFlops;
  return def;
}

const OpDef& AttentionDef() { return StaticOpDef<MakeAttention>(); }

const OpDef& AttentionBackwardDef() {
  return StaticOpDef<MakeAttentionBackward>();
}

}  // namespace

absl::StatusOr<DTensor> ScaledDotProductAttention(const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v, bool causal,
                                                  double scale) {
  const DTensor* in[] = {&q, &k, &v};
  OpArgs args;
  args.AddBool(causal).AddScalar(scale);
  DT_ASSIGN_OR_RETURN(OpOutputs outputs, Dispatch(AttentionDef(), in, args));
  return std::move(outputs[0]);
}

absl::StatusOr<std::vector<DTensor>> ScaledDotProductAttentionBackward(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const DTensor& grad_out, bool causal, double scale) {
  return ScaledDotProductAttentionBackwardWithLse(q, k, v, out, grad_out,
                                                  DTensor(), causal, scale);
}

absl::StatusOr<std::vector<DTensor>> ScaledDotProductAttentionBackwardWithLse(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const DTensor& grad_out, const DTensor& lse, bool causal, double scale) {
  const DTensor* in[] = {&q, &k, &v, &out, &grad_out, &lse};
  OpArgs args;
  args.AddBool(causal).AddScalar(scale);
  DT_ASSIGN_OR_RETURN(OpOutputs grads,
                      Dispatch(AttentionBackwardDef(), in, args));
  return std::vector<DTensor>(grads.begin(), grads.end());
}

std::vector<const OpDef*> AttentionOps() {
  return {&AttentionDef(), &AttentionBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
