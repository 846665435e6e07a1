#include "dtensor/ops/add_norm_ops.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/tensor/fused_norm.h"

namespace dtensor {
namespace ops {
namespace {

constexpr ArgSpec kArgs[] = {{"eps", ArgKind::kScalar, "1e-6"}};
constexpr auto kEps = KeyOf<ArgKind::kScalar>(kArgs, "eps");

constexpr absl::string_view kForward = "add_rms_norm";
constexpr absl::string_view kBackward = "add_rms_norm_backward";

// Input `i` (named `name`; absent passes) of x's shape.
absl::Status CheckLikeX(absl::string_view op,
                        absl::Span<const DTensorSpec* const> inputs, size_t i,
                        absl::string_view name) {
  const Shape& x = inputs[0]->shape();
  if (inputs[i] == nullptr || inputs[i]->shape() == x) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " ", ShapeToString(inputs[i]->shape()),
                   " does not match ", ShapeToString(x)));
}

// Input `i` (absent passes) of shape [last dim of x].
absl::Status CheckWeight(absl::string_view op,
                         absl::Span<const DTensorSpec* const> inputs,
                         size_t i) {
  const Shape& x = inputs[0]->shape();
  if (inputs[i] == nullptr || inputs[i]->shape() == Shape{x.back()}) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": weight ", ShapeToString(inputs[i]->shape()),
                   " does not match the last dim of x ", ShapeToString(x)));
}

// The options of one mesh dim for a Partial(sum | avg) placement (none: no
// Partial option).
using PartialOption = std::function<DimStrategy(Placement partial)>;

// Per mesh dim: Replicate; a leading dim of x sharded on every present input
// that `x_like` marks (rows of x; the others [last dim] and Replicate) and
// on output 0, output 1 then sharded alike when `leading_other` is nullopt
// (a row of x too), else `leading_other`; and partial_option's options.
absl::StatusOr<std::vector<OpStrategy>> RowStrategies(
    const StrategyContext& ctx, const std::vector<bool>& x_like,
    std::optional<Placement> leading_other,
    const PartialOption& partial_option) {
  const int64_t rank = ctx.inputs[0]->ndim();
  const std::vector<int> x_loops = IdentityLoops(rank, {rank - 1});
  LoopDims loops;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i] == nullptr) {
      loops.inputs.push_back({});
    } else {
      loops.inputs.push_back(x_like[i] ? x_loops : std::vector<int>{kNoLoop});
    }
  }
  loops.outputs.assign(ctx.outputs.size(), {kNoLoop});
  loops.outputs[0] = x_loops;
  if (!leading_other) loops.outputs[1] = x_loops;
  const Placement r = Placement::Replicate();
  std::vector<DimStrategy> options;
  options.push_back(
      DimStrategy{absl::InlinedVector<Placement, 3>(ctx.inputs.size(), r),
                  absl::InlinedVector<Placement, 1>(ctx.outputs.size(), r),
                  {}});
  for (int64_t d = 0; d + 1 < rank; ++d) {
    const Placement shard = Placement::Shard(d);
    DimStrategy c = options.front();
    for (size_t i = 0; i < x_like.size(); ++i) {
      if (x_like[i] && ctx.inputs[i] != nullptr) c.inputs[i] = shard;
    }
    c.outputs[0] = shard;
    c.outputs[1] = leading_other.value_or(shard);
    options.push_back(std::move(c));
  }
  for (ReduceOp reduce : LinearReduceOps()) {
    if (partial_option) {
      options.push_back(partial_option(Placement::Partial(reduce)));
    }
  }
  const std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                         options);
  return CombineMeshDims(ctx, candidates, loops);
}

// ---- add_rms_norm: (residual, delta, weight?) -> (sum, normed). ----

absl::StatusOr<std::vector<TensorMeta>> AddRmsNormInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args) {
  DT_RETURN_IF_ERROR(CheckLikeX(kForward, inputs, 1, "delta"));
  DT_RETURN_IF_ERROR(CheckWeight(kForward, inputs, 2));
  const LocalFn normed = [](absl::Span<const Tensor> in,
                            const OpArgs& args) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(
        AddRmsNormOutputs out,
        dtensor::AddRmsNorm(in[0], in[1], in[2], args.Get(kEps)));
    return out.normed;
  };
  DT_ASSIGN_OR_RETURN(const DType dtype,
                      ProbeDType(kForward, normed, inputs, args));
  const TensorMeta meta{inputs[0]->shape(), dtype};
  return std::vector<TensorMeta>{meta, meta};
}

absl::StatusOr<std::vector<OpStrategy>> AddRmsNormStrategies(
    const StrategyContext& ctx) {
  const Placement r = Placement::Replicate();
  // A Partial weight with the rows Replicate: sum Replicate, normed Partial.
  PartialOption weight_partial;
  if (ctx.inputs[2] != nullptr) {
    weight_partial = [r](Placement partial) {
      return DimStrategy{{r, r, partial}, {r, partial}, {}};
    };
  }
  return RowStrategies(ctx, {true, true, false}, std::nullopt, weight_partial);
}

absl::StatusOr<OpLocals> AddRmsNormKernel(const KernelContext& ctx,
                                          absl::Span<const Tensor> in) {
  DT_ASSIGN_OR_RETURN(
      AddRmsNormOutputs out,
      dtensor::AddRmsNorm(in[0], in[1], in[2], ctx.args().Get(kEps)));
  return OpLocals{std::move(out.sum), std::move(out.normed)};
}

absl::StatusOr<NormGradients> CallBackward(const DTensor& sum,
                                           const DTensor& weight,
                                           const DTensor& grad_normed,
                                           const DTensor& grad_sum, double eps);

// The residual's and the delta's gradient are both dx.
absl::StatusOr<InputGrads> AddRmsNormGrads(const BackwardCall& call) {
  const DTensor& weight = call.inputs[2];
  const DTensor& grad_sum = call.grad_outputs[0];
  const DTensor& grad_normed = call.grad_outputs[1];
  InputGrads result(call.inputs.size());
  if (!grad_normed.defined()) {
    result[0] = grad_sum;
    result[1] = grad_sum;
    return result;
  }
  DT_ASSIGN_OR_RETURN(NormGradients grads,
                      CallBackward(call.outputs[0], weight, grad_normed,
                                   grad_sum, call.args.Get(kEps)));
  result[0] = grads.dx;
  result[1] = std::move(grads.dx);
  if (weight.defined()) result[2] = std::move(grads.dweight);
  return result;
}

OpDef MakeAddRmsNorm() {
  OpDef def = NamedOpDef(kForward,
                         "sum = residual + delta and rms_norm(sum) * weight, "
                         "in one pass over the rows",
                         kArgs);
  def.num_inputs = 3;
  def.num_optional_inputs = 1;
  def.num_outputs = 2;
  def.infer = AddRmsNormInfer;
  def.strategies = AddRmsNormStrategies;
  def.kernel = AddRmsNormKernel;
  def.backward = AddRmsNormGrads;
  return def;
}

// ---- add_rms_norm_backward: (x, grad, weight?, grad_sum?) -> (dx,
// dweight). ----

absl::StatusOr<std::vector<TensorMeta>> AddRmsNormBackwardInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args) {
  DT_RETURN_IF_ERROR(CheckLikeX(kBackward, inputs, 1, "grad"));
  DT_RETURN_IF_ERROR(CheckWeight(kBackward, inputs, 2));
  DT_RETURN_IF_ERROR(CheckLikeX(kBackward, inputs, 3, "grad_sum"));
  const LocalFn dx = [](absl::Span<const Tensor> in,
                        const OpArgs& args) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(NormGrads grads,
                        dtensor::AddRmsNormBackward(in[0], in[2], in[1], in[3],
                                                    args.Get(kEps)));
    return grads.dx;
  };
  DT_ASSIGN_OR_RETURN(const DType dtype,
                      ProbeDType(kBackward, dx, inputs, args));
  const Shape& x = inputs[0]->shape();
  return std::vector<TensorMeta>{
      {x, dtype}, {Shape{inputs[2] != nullptr ? x.back() : 0}, dtype}};
}

absl::StatusOr<std::vector<OpStrategy>> AddRmsNormBackwardStrategies(
    const StrategyContext& ctx) {
  const Placement r = Placement::Replicate();
  const bool with_grad_sum = ctx.inputs[3] != nullptr;
  // Every output is linear in grad and grad_sum jointly.
  const PartialOption grads_partial = [&](Placement partial) {
    return DimStrategy{
        {r, partial, r, with_grad_sum ? partial : r}, {partial, partial}, {}};
  };
  // Each rank sums dweight over its rows.
  return RowStrategies(ctx, {true, true, false, true},
                       Placement::Partial(ReduceOp::kSum), grads_partial);
}

absl::StatusOr<OpLocals> AddRmsNormBackwardKernel(const KernelContext& ctx,
                                                  absl::Span<const Tensor> in) {
  DT_ASSIGN_OR_RETURN(NormGrads grads,
                      dtensor::AddRmsNormBackward(in[0], in[2], in[1], in[3],
                                                  ctx.args().Get(kEps)));
  if (!grads.dweight.defined()) {
    DT_ASSIGN_OR_RETURN(grads.dweight,
                        Tensor::Empty({0}, in[0].dtype(), in[0].device()));
  }
  return OpLocals{std::move(grads.dx), std::move(grads.dweight)};
}

// Its own gradients (second order): dx is rms_norm_backward's dx plus
// grad_sum and dweight is rms_norm_backward's, so x, grad and weight get
// rms_norm_backward's second-order gradients and grad_sum gets dx's.
absl::StatusOr<InputGrads> AddRmsNormBackwardGrads(const BackwardCall& call) {
  DT_ASSIGN_OR_RETURN(InputGrads grads, RmsNormBackwardInputGrads(call));
  grads.resize(call.inputs.size());
  if (call.inputs[3].defined()) grads[3] = call.grad_outputs[0];
  return grads;
}

OpDef MakeAddRmsNormBackward() {
  OpDef def = NamedOpDef(kBackward,
                         "add_rms_norm's gradients (dx of residual and delta, "
                         "dweight) from its sum and output gradients, fused",
                         kArgs);
  def.num_inputs = 4;
  def.num_optional_inputs = 2;
  def.num_outputs = 2;
  def.infer = AddRmsNormBackwardInfer;
  def.strategies = AddRmsNormBackwardStrategies;
  def.kernel = AddRmsNormBackwardKernel;
  def.backward = AddRmsNormBackwardGrads;
  return def;
}

const OpDef& AddRmsNormDef() { return StaticOpDef<MakeAddRmsNorm>(); }
const OpDef& AddRmsNormBackwardDef() {
  return StaticOpDef<MakeAddRmsNormBackward>();
}

absl::StatusOr<NormGradients> CallBackward(const DTensor& sum,
                                           const DTensor& weight,
                                           const DTensor& grad_normed,
                                           const DTensor& grad_sum,
                                           double eps) {
  OpArgs args;
  args.AddScalar(eps);
  const DTensor* in[] = {&sum, &grad_normed, &weight, &grad_sum};
  DT_ASSIGN_OR_RETURN(OpOutputs out,
                      Dispatch(AddRmsNormBackwardDef(), in, args));
  NormGradients grads;
  grads.dx = std::move(out[0]);
  if (weight.defined()) grads.dweight = std::move(out[1]);
  return grads;
}

}  // namespace

absl::StatusOr<AddNormOutputs> AddRmsNorm(const DTensor& residual,
                                          const DTensor& delta,
                                          const DTensor& weight, double eps) {
  OpArgs args;
  args.AddScalar(eps);
  const DTensor* in[] = {&residual, &delta, &weight};
  DT_ASSIGN_OR_RETURN(OpOutputs out, Dispatch(AddRmsNormDef(), in, args));
  return AddNormOutputs{std::move(out[0]), std::move(out[1])};
}

absl::StatusOr<NormGradients> AddRmsNormBackward(const DTensor& sum,
                                                 const DTensor& weight,
                                                 const DTensor& grad_normed,
                                                 const DTensor& grad_sum,
                                                 double eps) {
  return CallBackward(sum, weight, grad_normed, grad_sum, eps);
}

std::vector<const OpDef*> AddNormOps() {
  return {&AddRmsNormDef(), &AddRmsNormBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
