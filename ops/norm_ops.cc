#include "dtensor/ops/norm_ops.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"

namespace dtensor {
namespace ops {
namespace {

// ---- rms_norm, layer_norm. ----

// The two differ in eps's default only.
constexpr ArgSpec kRmsNormArgs[] = {{"eps", ArgKind::kScalar, "1e-6"}};
constexpr ArgSpec kLayerNormArgs[] = {{"eps", ArgKind::kScalar, "1e-5"}};
constexpr auto kRmsNormEps = KeyOf<ArgKind::kScalar>(kRmsNormArgs, "eps");
constexpr auto kLayerNormEps = KeyOf<ArgKind::kScalar>(kLayerNormArgs, "eps");

// The key of eps in the schema of the op `layer_norm` names.
constexpr ArgKey<ArgKind::kScalar> NormEps(bool layer_norm) {
  return layer_norm ? kLayerNormEps : kRmsNormEps;
}

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

// The op rms_norm_backward (layer_norm_backward when `layer_norm`).
const OpDef& NormBackwardDef(bool layer_norm);

// The gradients through the fused backward op: dx, dweight where there is a
// weight, dbias where there is a bias.
absl::StatusOr<InputGrads> NormBackward(bool layer_norm,
                                        const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& weight = call.inputs[1];
  const bool with_bias = layer_norm && call.inputs[2].defined();
  OpArgs args;
  args.AddScalar(call.args.Get(NormEps(layer_norm)));
  if (layer_norm) args.AddBool(with_bias);
  const DTensor* in[] = {&x, &call.grad_outputs[0], &weight};
  DT_ASSIGN_OR_RETURN(OpOutputs grads,
                      Dispatch(NormBackwardDef(layer_norm), in, args));
  InputGrads result(call.inputs.size());
  result[0] = std::move(grads[0]);
  if (weight.defined()) result[1] = std::move(grads[1]);
  if (with_bias) result[2] = std::move(grads[2]);
  return result;
}

// rms_norm, or with `layer_norm` layer_norm.
OpDef MakeNorm(bool layer_norm) {
  const absl::string_view name = layer_norm ? "layer_norm" : "rms_norm";
  LocalFn fn = [layer_norm](absl::Span<const Tensor> in, const OpArgs& args) {
    const double eps = args.Get(NormEps(layer_norm));
    return layer_norm ? dtensor::LayerNorm(in[0], in[1], in[2], eps)
                      : dtensor::RmsNorm(in[0], in[1], eps);
  };
  OpDef def = NamedOpDef(
      name,
      layer_norm
          ? "(x - mean) / sqrt(var + eps) * weight + bias over the last dim"
          : "x / sqrt(mean(x^2 over the last dim) + eps) * weight",
      layer_norm ? absl::MakeConstSpan(kLayerNormArgs)
                 : absl::MakeConstSpan(kRmsNormArgs));
  def.num_inputs = layer_norm ? 3 : 2;
  def.num_optional_inputs = def.num_inputs - 1;
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
  def.backward = [layer_norm](const BackwardCall& call) {
    return NormBackward(layer_norm, call);
  };
  return def;
}

// ---- rms_norm_backward, layer_norm_backward: (x, grad, weight?) ->
// (dx, dweight, [dbias]), one fused local kernel
// (dtensor/tensor/norm_backward.h). ----

// rms_norm_backward's arguments are rms_norm's; layer_norm_backward's add
// whether the forward had a bias, whose gradient is then wanted (its values
// are not needed).
constexpr ArgSpec kLayerNormBackwardArgs[] = {
    {"eps", ArgKind::kScalar, "1e-5"}, {"bias", ArgKind::kBool, "false"}};
constexpr auto kLayerNormBackwardEps =
    KeyOf<ArgKind::kScalar>(kLayerNormBackwardArgs, "eps");
constexpr auto kWithBias =
    KeyOf<ArgKind::kBool>(kLayerNormBackwardArgs, "bias");

double BackwardEps(bool layer_norm, const OpArgs& args) {
  return args.Get(layer_norm ? kLayerNormBackwardEps : kRmsNormEps);
}

bool WithBias(bool layer_norm, const OpArgs& args) {
  return layer_norm && args.Get(kWithBias);
}

absl::StatusOr<dtensor::NormGrads> LocalNormBackward(
    bool layer_norm, absl::Span<const Tensor> in, const OpArgs& args) {
  return dtensor::NormBackward(in[0], in[2], in[1],
                               BackwardEps(layer_norm, args), layer_norm,
                               WithBias(layer_norm, args));
}

// The outputs' shapes: dx like x; a parameter's gradient [last dim], or [0]
// for an absent parameter. The probe checks the dtypes; grad and weight
// shapes are checked here (a probe's are all ones).
absl::StatusOr<std::vector<TensorMeta>> NormBackwardInfer(
    bool layer_norm, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args) {
  const absl::string_view op = NormBackwardDef(layer_norm).name;
  const LocalFn dx = [layer_norm](
                         absl::Span<const Tensor> in,
                         const OpArgs& args) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(dtensor::NormGrads grads,
                        LocalNormBackward(layer_norm, in, args));
    return grads.dx;
  };
  const Shape& x = inputs[0]->shape();
  if (inputs[1]->shape() != x) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": grad ", ShapeToString(inputs[1]->shape()),
                     " does not match x ", ShapeToString(x)));
  }
  DT_ASSIGN_OR_RETURN(const DType dtype, ProbeDType(op, dx, inputs, args));
  const DTensorSpec* weight = inputs[2];
  if (weight != nullptr && weight->shape() != Shape{x.back()}) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight ", ShapeToString(weight->shape()),
                     " does not match the last dim of x ", ShapeToString(x)));
  }
  const auto param_grad = [&](bool present) {
    return TensorMeta{Shape{present ? x.back() : 0}, dtype};
  };
  std::vector<TensorMeta> out = {{x, dtype}, param_grad(weight != nullptr)};
  if (layer_norm) out.push_back(param_grad(WithBias(layer_norm, args)));
  return out;
}

// Per mesh dim: replicate; shard a leading dim of x and grad alike (dx alike,
// the parameter gradients Partial(sum): each rank sums its rows); grad
// Partial(sum | avg) with x and weight Replicate (every output is linear in
// grad). The last dim is never sharded; weight is Replicate.
absl::StatusOr<std::vector<OpStrategy>> NormBackwardStrategies(
    const StrategyContext& ctx) {
  const int64_t rank = ctx.inputs[0]->ndim();
  const std::vector<int> x_loops = IdentityLoops(rank, {rank - 1});
  LoopDims loops;
  loops.inputs = {x_loops, x_loops,
                  ctx.inputs[2] == nullptr ? std::vector<int>{}
                                           : std::vector<int>{kNoLoop}};
  loops.outputs.assign(ctx.outputs.size(), {kNoLoop});
  loops.outputs[0] = x_loops;
  const Placement r = Placement::Replicate();
  const auto option = [&](Placement x, Placement grad, Placement dx,
                          Placement params) {
    DimStrategy c{{x, grad, r}, {dx}, {}};
    c.outputs.resize(ctx.outputs.size(), params);
    return c;
  };
  std::vector<DimStrategy> options = {option(r, r, r, r)};
  for (int64_t d = 0; d + 1 < rank; ++d) {
    const Placement shard = Placement::Shard(d);
    options.push_back(
        option(shard, shard, shard, Placement::Partial(ReduceOp::kSum)));
  }
  for (ReduceOp reduce : LinearReduceOps()) {
    const Placement partial = Placement::Partial(reduce);
    options.push_back(option(r, partial, partial, partial));
  }
  const std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                         options);
  return CombineMeshDims(ctx, candidates, loops);
}

// An absent parameter's gradient is an empty [0] tensor.
absl::StatusOr<OpLocals> NormBackwardKernel(bool layer_norm,
                                            const KernelContext& ctx,
                                            absl::Span<const Tensor> inputs) {
  DT_ASSIGN_OR_RETURN(dtensor::NormGrads grads,
                      LocalNormBackward(layer_norm, inputs, ctx.args()));
  const Tensor& x = inputs[0];
  const auto or_empty = [&](Tensor& grad) -> absl::StatusOr<Tensor> {
    if (grad.defined()) return std::move(grad);
    return Tensor::Empty({0}, x.dtype(), x.device());
  };
  OpLocals out{std::move(grads.dx)};
  DT_ASSIGN_OR_RETURN(Tensor dweight, or_empty(grads.dweight));
  out.push_back(std::move(dweight));
  if (layer_norm) {
    DT_ASSIGN_OR_RETURN(Tensor dbias, or_empty(grads.dbias));
    out.push_back(std::move(dbias));
  }
  return out;
}

// ---- Their own gradients (second order), written with ops. With A, B, C
// the gradients of dx, dweight, dbias (any may be undefined), r, xh, gh as in
// dtensor/tensor/norm_backward.h, t = mean(A xh), s = mean(gh xh),
// K = mean(A gh) - mean(gh) mean(A) (RMSNorm: mean(A gh)), P(A) = r (A -
// mean(A) - xh t) (RMSNorm: no mean(A)), beta = g B, m = mean(beta xh), all
// means over the last dim:
//   to grad:   weight P(A) + B xh + C
//   to weight: the sum over the rows of g P(A)
//   to x:      W - mean(W) (RMSNorm: W), where
//              W = r beta - r^2 t gh - r^2 s A - (r^2 (K - 3 s t) + r m) xh.
// (dx is symmetric in A and gh, so its gradient to gh is P(A); W is
// d/dxh of the dx and dweight terms, taken through r's and the centering's
// dependence on x.) ----

// The mean over the last dim, kept as size 1.
absl::StatusOr<DTensor> RowMean(const DTensor& x) {
  const int64_t last[] = {-1};
  return Mean(x, last, /*keepdim=*/true);
}

// What the second-order gradients recompute: r (kept last dim), xh and gh.
struct Normalized {
  DTensor r, xh, gh;
};

absl::StatusOr<Normalized> Renormalize(bool layer_norm, const DTensor& x,
                                       const DTensor& grad,
                                       const DTensor& weight, double eps) {
  DTensor centered = x;
  if (layer_norm) {
    DT_ASSIGN_OR_RETURN(DTensor mean, RowMean(x));
    DT_ASSIGN_OR_RETURN(centered, Sub(x, mean));
  }
  Normalized n;
  DT_ASSIGN_OR_RETURN(DTensor square, Mul(centered, centered));
  DT_ASSIGN_OR_RETURN(n.r, RowMean(square));
  DT_ASSIGN_OR_RETURN(n.r, Add(n.r, eps));
  DT_ASSIGN_OR_RETURN(n.r, Rsqrt(n.r));
  DT_ASSIGN_OR_RETURN(n.xh, Mul(centered, n.r));
  n.gh = grad;
  if (weight.defined()) {
    DT_ASSIGN_OR_RETURN(n.gh, Mul(grad, weight));
  }
  return n;
}

// acc += term, or acc = term when acc is undefined.
absl::Status Accumulate(DTensor& acc, absl::StatusOr<DTensor> term) {
  if (!term.ok()) return term.status();
  if (!acc.defined()) {
    acc = *std::move(term);
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(acc, Add(acc, *term));
  return absl::OkStatus();
}

// The second-order gradients: to x (W, before LayerNorm's centering), to grad
// and to weight.
struct SecondOrder {
  DTensor w, dgrad, dweight;
};

// The terms of A, the gradient of dx.
absl::Status AddTermsOfA(bool layer_norm, const DTensor& a, const DTensor& grad,
                         const DTensor& weight, const Normalized& n,
                         SecondOrder& out) {
  DT_ASSIGN_OR_RETURN(DTensor a_xh, Mul(a, n.xh));
  DT_ASSIGN_OR_RETURN(const DTensor t, RowMean(a_xh));
  DT_ASSIGN_OR_RETURN(DTensor gh_xh, Mul(n.gh, n.xh));
  DT_ASSIGN_OR_RETURN(const DTensor s, RowMean(gh_xh));
  DT_ASSIGN_OR_RETURN(DTensor a_gh, Mul(a, n.gh));
  DT_ASSIGN_OR_RETURN(DTensor k, RowMean(a_gh));
  DT_ASSIGN_OR_RETURN(DTensor xh_t, Mul(n.xh, t));
  DT_ASSIGN_OR_RETURN(DTensor pa, Sub(a, xh_t));
  if (layer_norm) {
    DT_ASSIGN_OR_RETURN(const DTensor a_mean, RowMean(a));
    DT_ASSIGN_OR_RETURN(pa, Sub(pa, a_mean));
    DT_ASSIGN_OR_RETURN(const DTensor gh_mean, RowMean(n.gh));
    DT_ASSIGN_OR_RETURN(DTensor shift, Mul(gh_mean, a_mean));
    DT_ASSIGN_OR_RETURN(k, Sub(k, shift));
  }
  DT_ASSIGN_OR_RETURN(pa, Mul(pa, n.r));
  DT_RETURN_IF_ERROR(
      Accumulate(out.dgrad, weight.defined() ? Mul(pa, weight) : pa));
  if (weight.defined()) {
    DT_ASSIGN_OR_RETURN(DTensor g_pa, Mul(grad, pa));
    DT_ASSIGN_OR_RETURN(out.dweight, SumToShape(g_pa, weight.shape()));
  }
  // W's terms: -r^2 (t gh + s A + (K - 3 s t) xh).
  DT_ASSIGN_OR_RETURN(const DTensor r2, Mul(n.r, n.r));
  DT_ASSIGN_OR_RETURN(DTensor inner, Mul(n.gh, t));
  DT_ASSIGN_OR_RETURN(DTensor s_a, Mul(a, s));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, s_a));
  DT_ASSIGN_OR_RETURN(DTensor st3, Mul(s, t));
  DT_ASSIGN_OR_RETURN(st3, Mul(st3, 3.0));
  DT_ASSIGN_OR_RETURN(k, Sub(k, st3));
  DT_ASSIGN_OR_RETURN(DTensor k_xh, Mul(k, n.xh));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, k_xh));
  DT_ASSIGN_OR_RETURN(inner, Mul(inner, r2));
  return Accumulate(out.w, Neg(inner));
}

// The terms of B, the gradient of dweight: B xh to grad; r (beta - m xh) to
// W.
absl::Status AddTermsOfB(const DTensor& b, const DTensor& grad,
                         const Normalized& n, SecondOrder& out) {
  DT_RETURN_IF_ERROR(Accumulate(out.dgrad, Mul(b, n.xh)));
  DT_ASSIGN_OR_RETURN(const DTensor beta, Mul(grad, b));
  DT_ASSIGN_OR_RETURN(DTensor beta_xh, Mul(beta, n.xh));
  DT_ASSIGN_OR_RETURN(const DTensor m, RowMean(beta_xh));
  DT_ASSIGN_OR_RETURN(DTensor m_xh, Mul(m, n.xh));
  DT_ASSIGN_OR_RETURN(DTensor term, Sub(beta, m_xh));
  return Accumulate(out.w, Mul(term, n.r));
}

absl::StatusOr<InputGrads> NormBackwardGrads(bool layer_norm,
                                             const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& grad = call.inputs[1];
  const DTensor& weight = call.inputs[2];
  const DTensor& a = call.grad_outputs[0];
  // The gradients of the [0] stand-ins of absent parameters are ignored.
  const DTensor& b = weight.defined() ? call.grad_outputs[1] : DTensor();
  const DTensor& c =
      WithBias(layer_norm, call.args) ? call.grad_outputs[2] : DTensor();
  DT_ASSIGN_OR_RETURN(const Normalized n,
                      Renormalize(layer_norm, x, grad, weight,
                                  BackwardEps(layer_norm, call.args)));
  SecondOrder out;
  if (a.defined()) {
    DT_RETURN_IF_ERROR(AddTermsOfA(layer_norm, a, grad, weight, n, out));
  }
  if (b.defined()) {
    DT_RETURN_IF_ERROR(AddTermsOfB(b, grad, n, out));
  }
  if (c.defined()) {
    // C [last dim] broadcast over the rows.
    DT_RETURN_IF_ERROR(Accumulate(
        out.dgrad, out.dgrad.defined() ? c : Expand(c, grad.shape())));
  }
  DTensor dx = out.w;
  if (layer_norm && dx.defined()) {
    DT_ASSIGN_OR_RETURN(const DTensor w_mean, RowMean(dx));
    DT_ASSIGN_OR_RETURN(dx, Sub(dx, w_mean));
  }
  return InputGrads{std::move(dx), std::move(out.dgrad),
                    std::move(out.dweight)};
}

OpDef MakeNormBackward(bool layer_norm) {
  OpDef def = NamedOpDef(
      layer_norm ? "layer_norm_backward" : "rms_norm_backward",
      layer_norm ? "layer_norm's gradients (dx, dweight, dbias) from x, "
                   "the output gradient and weight, fused"
                 : "rms_norm's gradients (dx, dweight) from x, the output "
                   "gradient and weight, fused",
      layer_norm ? absl::MakeConstSpan(kLayerNormBackwardArgs)
                 : absl::MakeConstSpan(kRmsNormArgs));
  def.num_inputs = 3;
  def.num_optional_inputs = 1;
  def.num_outputs = layer_norm ? 3 : 2;
  def.infer = [layer_norm](absl::Span<const DTensorSpec* const> inputs,
                           const OpArgs& args) {
    return NormBackwardInfer(layer_norm, inputs, args);
  };
  def.strategies = NormBackwardStrategies;
  def.kernel = [layer_norm](const KernelContext& ctx,
                            absl::Span<const Tensor> inputs) {
    return NormBackwardKernel(layer_norm, ctx, inputs);
  };
  def.backward = [layer_norm](const BackwardCall& call) {
    return NormBackwardGrads(layer_norm, call);
  };
  return def;
}

// ---- The family. ----

const OpDef& RmsNormDef() {
  return StaticOpDef<MakeNorm, /*layer_norm=*/false>();
}
const OpDef& LayerNormDef() {
  return StaticOpDef<MakeNorm, /*layer_norm=*/true>();
}

const OpDef& NormBackwardDef(bool layer_norm) {
  return layer_norm ? StaticOpDef<MakeNormBackward, /*layer_norm=*/true>()
                    : StaticOpDef<MakeNormBackward, /*layer_norm=*/false>();
}

// Both backward ops' typed functions: the outputs, undefined for an absent
// parameter.
absl::StatusOr<NormGradients> CallNormBackward(
    bool layer_norm, const DTensor& x, const DTensor& weight, bool with_bias,
    const DTensor& grad, double eps) {
  OpArgs args;
  args.AddScalar(eps);
  if (layer_norm) args.AddBool(with_bias);
  const DTensor* in[] = {&x, &grad, &weight};
  DT_ASSIGN_OR_RETURN(OpOutputs out,
                      Dispatch(NormBackwardDef(layer_norm), in, args));
  NormGradients grads;
  grads.dx = std::move(out[0]);
  if (weight.defined()) grads.dweight = std::move(out[1]);
  if (with_bias) grads.dbias = std::move(out[2]);
  return grads;
}

}  // namespace

absl::StatusOr<DTensor> RmsNorm(const DTensor& x, const DTensor& weight,
                                double eps) {
  OpArgs args;
  args.AddScalar(eps);
  const DTensor* in[] = {&x, &weight};
  return DispatchOne(RmsNormDef(), in, args);
}

absl::StatusOr<DTensor> LayerNorm(const DTensor& x, const DTensor& weight,
                                  const DTensor& bias, double eps) {
  OpArgs args;
  args.AddScalar(eps);
  const DTensor* in[] = {&x, &weight, &bias};
  return DispatchOne(LayerNormDef(), in, args);
}

absl::StatusOr<NormGradients> RmsNormBackward(const DTensor& x,
                                              const DTensor& weight,
                                              const DTensor& grad, double eps) {
  return CallNormBackward(/*layer_norm=*/false, x, weight, false, grad, eps);
}

absl::StatusOr<NormGradients> LayerNormBackward(const DTensor& x,
                                                const DTensor& weight,
                                                const DTensor& bias,
                                                const DTensor& grad,
                                                double eps) {
  return CallNormBackward(/*layer_norm=*/true, x, weight, bias.defined(), grad,
                          eps);
}

absl::StatusOr<std::vector<DTensor>> RmsNormBackwardInputGrads(
    const BackwardCall& call) {
  return NormBackwardGrads(/*layer_norm=*/false, call);
}

std::vector<const OpDef*> NormOps() {
  return {&RmsNormDef(), &LayerNormDef(), &NormBackwardDef(false),
          &NormBackwardDef(true)};
}

}  // namespace ops
}  // namespace dtensor
