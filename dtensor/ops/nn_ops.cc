#include "dtensor/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
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
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace ops {
namespace {

absl::StatusOr<DTensor> Call(const OpDef& op,
                             std::initializer_list<const DTensor*> in,
                             const OpArgs& args) {
  return DispatchOne(op, absl::MakeConstSpan(in.begin(), in.size()), args);
}

// ---- softmax, log_softmax. ----

constexpr ArgSpec kSoftmaxArgs[] = {{"dim", ArgKind::kInt}};
constexpr auto kSoftmaxDim = KeyOf<ArgKind::kInt>(kSoftmaxArgs, "dim");

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - e^y sum(g), the
// sums along dim.
absl::StatusOr<InputGrads> SoftmaxBackward(bool log, const BackwardCall& call) {
  const DTensor& y = call.outputs[0];
  const DTensor& g = call.grad_outputs[0];
  const int64_t dims[] = {call.args.Get(kSoftmaxDim)};
  DTensor dx;
  if (log) {
    DT_ASSIGN_OR_RETURN(DTensor total, Sum(g, dims, /*keepdim=*/true));
    DT_ASSIGN_OR_RETURN(DTensor p, Exp(y));
    DT_ASSIGN_OR_RETURN(DTensor spread, Mul(p, total));
    DT_ASSIGN_OR_RETURN(dx, Sub(g, spread));
  } else {
    DT_ASSIGN_OR_RETURN(DTensor gy, Mul(g, y));
    DT_ASSIGN_OR_RETURN(DTensor total, Sum(gy, dims, /*keepdim=*/true));
    DT_ASSIGN_OR_RETURN(DTensor centered, Sub(g, total));
    DT_ASSIGN_OR_RETURN(dx, Mul(y, centered));
  }
  return InputGrads{std::move(dx)};
}

OpDef MakeSoftmax(absl::string_view name, absl::string_view summary, bool log) {
  LocalFn fn = [log](absl::Span<const Tensor> in, const OpArgs& args) {
    return log ? dtensor::LogSoftmax(in[0], args.Get(kSoftmaxDim))
               : dtensor::Softmax(in[0], args.Get(kSoftmaxDim));
  };
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.args.assign(std::begin(kSoftmaxArgs), std::end(kSoftmaxArgs));
  def.infer = SameShapeInfer(name, fn);
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    std::vector<int> loops;
    if (rank > 0) {
      // The probe in infer has checked the dim.
      const int64_t dim = *NormalizeDim(ctx.args.Get(kSoftmaxDim), rank);
      loops = IdentityLoops(rank, {dim});
    }
    spec.loops = {{loops}, {loops}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  def.backward = [log](const BackwardCall& call) {
    return SoftmaxBackward(log, call);
  };
  return def;
}

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

// ---- rotary_embedding. ----

constexpr ArgSpec kRotaryArgs[] = {{"theta", ArgKind::kScalar, "10000"}};
constexpr auto kTheta = KeyOf<ArgKind::kScalar>(kRotaryArgs, "theta");

// The tensor layer's checks, which a probe of size-1 dims cannot run (an odd
// head_dim of 1).
absl::Status CheckRotary(absl::string_view op,
                         absl::Span<const DTensorSpec* const> inputs,
                         const OpArgs& args) {
  const DTensorSpec& x = *inputs[0];
  if (!IsFloatingPoint(x.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x must have a floating dtype, got ",
                     std::string(DTypeName(x.dtype()))));
  }
  if (x.ndim() < 3 || x.shape().back() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op,
        ": x must be [..., seq, heads, head_dim] with an even head_dim, "
        "got shape ",
        ShapeToString(x.shape())));
  }
  if (!(args.Get(kTheta) > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": theta must be positive, got ", args.Get(kTheta)));
  }
  const DTensorSpec* positions = inputs[1];
  if (positions == nullptr) return absl::OkStatus();
  const int64_t seq = x.shape()[x.ndim() - 3];
  if (positions->shape() != Shape{seq}) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": positions ", ShapeToString(positions->shape()),
                     " must be [seq] for x ", ShapeToString(x.shape())));
  }
  if (positions->dtype() != DType::kI32 && positions->dtype() != DType::kI64) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": positions must be i32 or i64, got ",
                     std::string(DTypeName(positions->dtype()))));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpLocals> RotaryKernel(const KernelContext& ctx,
                                      absl::Span<const Tensor> inputs) {
  Tensor positions = inputs[1];
  if (!positions.defined()) {
    // The global positions of this rank's rows.
    const DTensorSpec& x_spec = *ctx.input(0);
    const int64_t seq_dim = x_spec.ndim() - 3;
    DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, x_spec));
    const int64_t first = block.offset[seq_dim];
    if (first != 0) {
      DT_ASSIGN_OR_RETURN(
          positions,
          Tensor::Arange(static_cast<double>(first),
                         static_cast<double>(first + block.shape[seq_dim]), 1,
                         DType::kI64));
    }
  }
  DT_ASSIGN_OR_RETURN(
      Tensor out,
      dtensor::RotaryEmbedding(inputs[0], positions, ctx.args().Get(kTheta)));
  return OpLocals{std::move(out)};
}

// The embedding rotates each pair by an angle proportional to its position;
// the transpose of a rotation is the rotation by minus the angle, so
// dx = rotary_embedding(g, -positions).
absl::StatusOr<InputGrads> RotaryBackward(const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  DTensor positions = call.inputs[1];
  if (!positions.defined()) {
    const int64_t seq = x.shape()[x.spec().ndim() - 3];
    DT_ASSIGN_OR_RETURN(Tensor all, Tensor::Arange(0, static_cast<double>(seq),
                                                   1, DType::kI64));
    DT_ASSIGN_OR_RETURN(positions, ReplicatedConstant(x, all));
  }
  DT_ASSIGN_OR_RETURN(DTensor reversed, Neg(positions));
  DT_ASSIGN_OR_RETURN(
      DTensor dx,
      RotaryEmbedding(call.grad_outputs[0], reversed, call.args.Get(kTheta)));
  return InputGrads{std::move(dx), DTensor()};
}

OpDef MakeRotary() {
  OpDef def;
  def.name = "rotary_embedding";
  def.summary = "rotate-half rotary embedding of x [..., seq, heads, head_dim]";
  def.num_inputs = 2;
  def.num_optional_inputs = 1;
  def.args.assign(std::begin(kRotaryArgs), std::end(kRotaryArgs));
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_RETURN_IF_ERROR(CheckRotary("rotary_embedding", inputs, args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), inputs[0]->dtype()}};
  };
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    const std::vector<int> x_loops = IdentityLoops(rank, {rank - 1});
    spec.loops.inputs = {x_loops,
                         ctx.inputs[1] == nullptr
                             ? std::vector<int>{}
                             : std::vector<int>{static_cast<int>(rank - 3)}};
    spec.loops.outputs = {x_loops};
    spec.partial_rules = {{{0}, LinearReduceOps()}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = RotaryKernel;
  def.backward = RotaryBackward;
  return def;
}

// ---- The family. ----

enum Id { kSoftmax, kLogSoftmax, kAttention, kRotary };

const std::vector<OpDef>& Defs() {
  static const std::vector<OpDef>* defs = new std::vector<OpDef>{
      MakeSoftmax("softmax", "softmax along dim", /*log=*/false),
      MakeSoftmax("log_softmax", "log of softmax along dim", /*log=*/true),
      MakeAttention(),
      MakeRotary(),
  };
  return *defs;
}

}  // namespace

absl::StatusOr<DTensor> Softmax(const DTensor& x, int64_t dim) {
  OpArgs args;
  args.AddInt(dim);
  return Call(Defs()[kSoftmax], {&x}, args);
}

absl::StatusOr<DTensor> LogSoftmax(const DTensor& x, int64_t dim) {
  OpArgs args;
  args.AddInt(dim);
  return Call(Defs()[kLogSoftmax], {&x}, args);
}

absl::StatusOr<DTensor> ScaledDotProductAttention(const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v, bool causal,
                                                  double scale) {
  OpArgs args;
  args.AddBool(causal).AddScalar(scale);
  return Call(Defs()[kAttention], {&q, &k, &v}, args);
}

absl::StatusOr<DTensor> RotaryEmbedding(const DTensor& x,
                                        const DTensor& positions,
                                        double theta) {
  OpArgs args;
  args.AddScalar(theta);
  return Call(Defs()[kRotary], {&x, &positions}, args);
}

std::vector<const OpDef*> NnOps() { return PointersTo(Defs()); }

}  // namespace ops
}  // namespace dtensor
