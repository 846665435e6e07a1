#include "ops/nn_ops.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ops/dispatch.h"
#include "ops/einsum_strategy.h"
#include "ops/local_fn.h"
#include "ops/rule_helpers.h"
#include "tensor/elementwise.h"
#include "tensor/nn_functional.h"
#include "tensor/status_macros.h"

namespace dtensor {
namespace ops {
namespace {

absl::StatusOr<DTensor> Call(const OpDef& op,
                             std::initializer_list<const DTensor*> in,
                             const OpArgs& args) {
  return DispatchOne(op, absl::MakeConstSpan(in.begin(), in.size()), args);
}

// Rejects the shapes that a probe of size-1 tensors cannot check; errors
// name `op`.
using ShapeCheck = std::function<absl::Status(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args)>;

// An InferFn for an op whose output has the shape of input 0 and the dtype
// its local function gives (ProbeDType), after `check_shapes`.

InferFn SameShapeInfer(absl::string_view op, LocalFn fn,
                       ShapeCheck check_shapes = nullptr) {
  return [op, fn = std::move(fn), check_shapes](
             absl::Span<const DTensorSpec* const> inputs,
             const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(op, fn, inputs, args));
    if (check_shapes) DT_RETURN_IF_ERROR(check_shapes(op, inputs, args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), dtype}};
  };
}

// ---- softmax, log_softmax. ----

OpDef MakeSoftmax(absl::string_view name, absl::string_view summary, bool log) {
  LocalFn fn = [log](absl::Span<const Tensor> in, const OpArgs& args) {
    return log ? dtensor::LogSoftmax(in[0], args.Int(0))
               : dtensor::Softmax(in[0], args.Int(0));
  };
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.args = {{"dim", ArgKind::kInt}};
  def.infer = SameShapeInfer(name, fn);
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    std::vector<int> loops;
    if (rank > 0) {
      // The probe in infer has checked the dim.
      const int64_t dim = *NormalizeDim(ctx.args.Int(0), rank);
      loops = IdentityLoops(rank, {dim});
    }
    spec.loops = {{loops}, {loops}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  return def;
}

// ---- rms_norm, layer_norm. ----

// Weight and bias (inputs 1, 2) are [last dim of x].
absl::Status CheckNormParams(absl::string_view op,
                             absl::Span<const DTensorSpec* const> inputs,
                             const OpArgs&) {
  const Shape& x = inputs[0]->shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    if (inputs[i]->shape() != Shape{x.back()}) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", i == 1 ? "weight " : "bias ",
                       ShapeToString(inputs[i]->shape()),
                       " does not match the last dim of x ", ShapeToString(x)));
    }
  }
  return absl::OkStatus();
}

OpDef MakeNorm(absl::string_view name, absl::string_view summary,
               bool layer_norm) {
  LocalFn fn = [layer_norm](absl::Span<const Tensor> in, const OpArgs& args) {
    return layer_norm ? dtensor::LayerNorm(in[0], in[1], in[2], args.Scalar(0))
                      : dtensor::RmsNorm(in[0], in[1], args.Scalar(0));
  };
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.num_inputs = layer_norm ? 3 : 2;
  def.num_optional_inputs = def.num_inputs - 1;
  def.args = {{"eps", ArgKind::kScalar, layer_norm ? "1e-5" : "1e-6"}};
  def.infer = SameShapeInfer(name, fn, CheckNormParams);
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    const std::vector<int> x_loops = IdentityLoops(rank, {rank - 1});
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    spec.loops.inputs = {x_loops};
    for (size_t i = 1; i < ctx.inputs.size(); ++i) {
      spec.loops.inputs.push_back(ctx.inputs[i] == nullptr
                                      ? std::vector<int>{}
                                      : std::vector<int>{kNoLoop});
    }
    spec.loops.outputs = {x_loops};
    // x * scale * weight (+ bias): linear in the parameters jointly, not in
    // the bias alone.
    if (ctx.inputs[1] != nullptr) {
      std::vector<int> params = {1};
      if (ctx.inputs.size() > 2) params.push_back(2);
      spec.partial_rules = {{params, LinearReduceOps()}};
    }
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  return def;
}

// ---- scaled_dot_product_attention. ----

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
  return dtensor::ScaledDotProductAttention(in[0], in[1], in[2], args.Bool(0),
                                            args.Scalar(1));
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
  if (ctx.args().Bool(0)) {
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

OpDef MakeAttention() {
  OpDef def;
  def.name = "scaled_dot_product_attention";
  def.summary = "softmax(q k^T * scale [+ causal mask]) v";
  def.num_inputs = 3;
  def.args = {{"causal", ArgKind::kBool, "false"},
              {"scale", ArgKind::kScalar, "0"}};
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
  return def;
}

// ---- rotary_embedding. ----

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
  if (!(args.Scalar(0) > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": theta must be positive, got ", args.Scalar(0)));
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
      dtensor::RotaryEmbedding(inputs[0], positions, ctx.args().Scalar(0)));
  return OpLocals{std::move(out)};
}

OpDef MakeRotary() {
  OpDef def;
  def.name = "rotary_embedding";
  def.summary = "rotate-half rotary embedding of x [..., seq, heads, head_dim]";
  def.num_inputs = 2;
  def.num_optional_inputs = 1;
  def.args = {{"theta", ArgKind::kScalar, "10000"}};
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
  return def;
}

// ---- The family. ----

enum Id { kSoftmax, kLogSoftmax, kRmsNorm, kLayerNorm, kAttention, kRotary };

const std::vector<OpDef>& Defs() {
  static const std::vector<OpDef>* defs = new std::vector<OpDef>{
      MakeSoftmax("softmax", "softmax along dim", /*log=*/false),
      MakeSoftmax("log_softmax", "log of softmax along dim", /*log=*/true),
      MakeNorm("rms_norm",
               "x / sqrt(mean(x^2 over the last dim) + eps) * weight",
               /*layer_norm=*/false),
      MakeNorm("layer_norm",
               "(x - mean) / sqrt(var + eps) * weight + bias over the last dim",
               /*layer_norm=*/true),
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

absl::StatusOr<DTensor> RmsNorm(const DTensor& x, const DTensor& weight,
                                double eps) {
  OpArgs args;
  args.AddScalar(eps);
  return Call(Defs()[kRmsNorm], {&x, &weight}, args);
}

absl::StatusOr<DTensor> LayerNorm(const DTensor& x, const DTensor& weight,
                                  const DTensor& bias, double eps) {
  OpArgs args;
  args.AddScalar(eps);
  return Call(Defs()[kLayerNorm], {&x, &weight, &bias}, args);
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

std::vector<const OpDef*> NnOps() {
  std::vector<const OpDef*> ops;
  for (const OpDef& def : Defs()) ops.push_back(&def);
  return ops;
}

}  // namespace ops
}  // namespace dtensor
