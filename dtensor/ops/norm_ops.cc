#include "dtensor/ops/norm_ops.h"

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/tensor/nn_functional.h"

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

// The mean over the last dim, kept as size 1.
absl::StatusOr<DTensor> RowMean(const DTensor& x) {
  const int64_t last[] = {-1};
  return Mean(x, last, /*keepdim=*/true);
}

// With xh the normalized x (x r for rms_norm, (x - mean) r for layer_norm,
// r = 1 / sqrt(mean(...) + eps)) and gh = g weight: dweight = sum(g xh),
// dbias = sum(g) over the leading dims; dx = r (gh - mean(gh xh) xh), less
// mean(gh) for layer_norm.
absl::StatusOr<InputGrads> NormBackward(bool layer_norm,
                                        const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& weight = call.inputs[1];
  const DTensor& g = call.grad_outputs[0];
  DTensor centered = x;
  if (layer_norm) {
    DT_ASSIGN_OR_RETURN(DTensor mean, RowMean(x));
    DT_ASSIGN_OR_RETURN(centered, Sub(x, mean));
  }
  DT_ASSIGN_OR_RETURN(DTensor square, Mul(centered, centered));
  DT_ASSIGN_OR_RETURN(DTensor r, RowMean(square));
  DT_ASSIGN_OR_RETURN(r, Add(r, call.args.Get(NormEps(layer_norm))));
  DT_ASSIGN_OR_RETURN(r, Rsqrt(r));
  DT_ASSIGN_OR_RETURN(DTensor xh, Mul(centered, r));
  InputGrads grads(call.inputs.size());
  DTensor gh = g;
  if (weight.defined()) {
    DT_ASSIGN_OR_RETURN(DTensor g_xh, Mul(g, xh));
    DT_ASSIGN_OR_RETURN(grads[1], SumToShape(g_xh, weight.shape()));
    DT_ASSIGN_OR_RETURN(gh, Mul(g, weight));
  }
  if (layer_norm && call.inputs[2].defined()) {
    DT_ASSIGN_OR_RETURN(grads[2], SumToShape(g, call.inputs[2].shape()));
  }
  DT_ASSIGN_OR_RETURN(DTensor gh_xh, Mul(gh, xh));
  DT_ASSIGN_OR_RETURN(DTensor projection, RowMean(gh_xh));
  DT_ASSIGN_OR_RETURN(projection, Mul(xh, projection));
  DT_ASSIGN_OR_RETURN(DTensor inner, Sub(gh, projection));
  if (layer_norm) {
    DT_ASSIGN_OR_RETURN(DTensor gh_mean, RowMean(gh));
    DT_ASSIGN_OR_RETURN(inner, Sub(inner, gh_mean));
  }
  DT_ASSIGN_OR_RETURN(grads[0], Mul(r, inner));
  return grads;
}

OpDef MakeNorm(absl::string_view name, absl::string_view summary,
               bool layer_norm) {
  LocalFn fn = [layer_norm](absl::Span<const Tensor> in, const OpArgs& args) {
    const double eps = args.Get(NormEps(layer_norm));
    return layer_norm ? dtensor::LayerNorm(in[0], in[1], in[2], eps)
                      : dtensor::RmsNorm(in[0], in[1], eps);
  };
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.num_inputs = layer_norm ? 3 : 2;
  def.num_optional_inputs = def.num_inputs - 1;
  if (layer_norm) {
    def.args.assign(std::begin(kLayerNormArgs), std::end(kLayerNormArgs));
  } else {
    def.args.assign(std::begin(kRmsNormArgs), std::end(kRmsNormArgs));
  }
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

// ---- The family. ----

const OpDef& RmsNormDef() {
  static const OpDef* def = new OpDef(MakeNorm(
      "rms_norm", "x / sqrt(mean(x^2 over the last dim) + eps) * weight",
      /*layer_norm=*/false));
  return *def;
}

const OpDef& LayerNormDef() {
  static const OpDef* def = new OpDef(
      MakeNorm("layer_norm",
               "(x - mean) / sqrt(var + eps) * weight + bias over the last dim",
               /*layer_norm=*/true));
  return *def;
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

std::vector<const OpDef*> NormOps() { return {&RmsNormDef(), &LayerNormDef()}; }

}  // namespace ops
}  // namespace dtensor
