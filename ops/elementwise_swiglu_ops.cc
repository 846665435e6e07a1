// The fused SwiGLU of the elementwise family (dtensor/ops/elementwise_ops.h):
// swiglu (silu(a) * b) and swiglu_backward (both its gradients), one kernel
// each (dtensor/tensor/swiglu.h).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/elementwise_op.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/tensor/swiglu.h"

namespace dtensor {
namespace ops {
namespace {

// `def` whose inputs must have one shape (the fused kernels do not
// broadcast): checked before its own inference, so that a metadata-only run
// rejects what the kernel rejects.
OpDef WithSameShapes(OpDef def) {
  def.infer =
      [infer = std::move(def.infer), name = def.name](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    for (const DTensorSpec* in : inputs) {
      if (in->shape() != inputs[0]->shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": inputs of shapes ", ShapeToString(inputs[0]->shape()),
            " and ", ShapeToString(in->shape()), " (one shape is required)"));
      }
    }
    return infer(inputs, args);
  };
  return def;
}

// `g`, or zeros like `like` where g is undefined (an output that got no
// gradient).
absl::StatusOr<DTensor> OrZeros(const DTensor& g, const DTensor& like) {
  if (g.defined()) return g;
  return Mul(like, 0.0);
}

// swiglu_backward(g, a, b) = (g b silu'(a), g silu(a)) for output gradients
// Ga, Gb: d/dg = Ga b silu'(a) + Gb silu(a); d/da = g (Ga b silu''(a) +
// Gb silu'(a)); d/db = Ga g silu'(a).
absl::StatusOr<InputGrads> SwiGluBackwardGrad(const BackwardCall& call) {
  const DTensor& g = call.inputs[0];
  const DTensor& a = call.inputs[1];
  const DTensor& b = call.inputs[2];
  DT_ASSIGN_OR_RETURN(const DTensor ga,
                      OrZeros(call.grad_outputs[0], call.outputs[0]));
  DT_ASSIGN_OR_RETURN(const DTensor gb,
                      OrZeros(call.grad_outputs[1], call.outputs[1]));
  DT_ASSIGN_OR_RETURN(const DTensor ga_b, Mul(ga, b));
  DT_ASSIGN_OR_RETURN(DTensor dg, SiluBackward(ga_b, a));
  DT_ASSIGN_OR_RETURN(const DTensor gate_gb, SwiGlu(a, gb));
  DT_ASSIGN_OR_RETURN(dg, Add(dg, gate_gb));
  DT_ASSIGN_OR_RETURN(DTensor da, SiluSecondDerivative(a));
  DT_ASSIGN_OR_RETURN(da, Mul(da, ga_b));
  DT_ASSIGN_OR_RETURN(const DTensor gb_slope, SiluBackward(gb, a));
  DT_ASSIGN_OR_RETURN(da, Add(da, gb_slope));
  DT_ASSIGN_OR_RETURN(da, Mul(da, g));
  DT_ASSIGN_OR_RETURN(const DTensor ga_g, Mul(ga, g));
  DT_ASSIGN_OR_RETURN(DTensor db, SiluBackward(ga_g, a));
  return InputGrads{std::move(dg), std::move(da), std::move(db)};
}

OpDef MakeSwiGlu() {
  return WithSameShapes(ElementwiseOp(
      "swiglu", "silu(a) * b in one kernel (a SwiGLU feed-forward's gate)", 2,
      {},
      [](absl::Span<const Tensor> in, const OpArgs&) {
        return dtensor::SwiGlu(in[0], in[1]);
      },
      Linearity::kSumSecond,
      [](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
        DT_ASSIGN_OR_RETURN(SwiGluGradients grads,
                            SwiGluBackward(call.grad_outputs[0], call.inputs[0],
                                           call.inputs[1]));
        return InputGrads{std::move(grads.a), std::move(grads.b)};
      }));
}

OpDef MakeSwiGluBackward() {
  return WithSameShapes(ElementwiseMultiOutputOp(
      "swiglu_backward",
      "the gradients of swiglu(a, b) for grad (inputs grad, a, b; outputs "
      "d/da, d/db) in one kernel",
      3, 2,
      [](absl::Span<const Tensor> in,
         const OpArgs&) -> absl::StatusOr<OpLocals> {
        DT_ASSIGN_OR_RETURN(SwiGluGrads grads,
                            dtensor::SwiGluBackward(in[0], in[1], in[2]));
        return OpLocals{std::move(grads.a), std::move(grads.b)};
      },
      Linearity::kSumFirst, SwiGluBackwardGrad));
}

const OpDef& SwiGluDef() { return StaticOpDef<MakeSwiGlu>(); }
const OpDef& SwiGluBackwardDef() { return StaticOpDef<MakeSwiGluBackward>(); }

}  // namespace

absl::StatusOr<DTensor> SwiGlu(const DTensor& a, const DTensor& b) {
  return CallElementwise(SwiGluDef(), {&a, &b});
}

absl::StatusOr<SwiGluGradients> SwiGluBackward(const DTensor& grad,
                                               const DTensor& a,
                                               const DTensor& b) {
  const DTensor* inputs[] = {&grad, &a, &b};
  DT_ASSIGN_OR_RETURN(OpOutputs out,
                      Dispatch(SwiGluBackwardDef(), inputs, OpArgs()));
  return SwiGluGradients{std::move(out[0]), std::move(out[1])};
}

std::vector<const OpDef*> SwiGluOps() {
  return {&SwiGluDef(), &SwiGluBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
