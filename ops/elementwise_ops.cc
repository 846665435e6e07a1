// The elementwise family's binary half (add ... minimum, pow, silu_backward,
// the comparisons), its ops with a scalar operand, where, and the family's
// list; the unary ops are elementwise_unary_ops.cc's.
#include "dtensor/ops/elementwise_ops.h"

#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/elementwise_op.h"

namespace dtensor {
namespace ops {
namespace {

// The ops with a scalar operand (add_scalar, ..., ge_scalar).
constexpr ArgSpec kScalarArgs[] = {{"other", ArgKind::kScalar}};
constexpr auto kOther = KeyOf<ArgKind::kScalar>(kScalarArgs, "other");

// ---- Backward definitions. ----

// The gradients of both inputs (undefined: none) before they are summed back
// over broadcast dims.
using BinaryGrad = std::function<absl::StatusOr<InputGrads>(
    const DTensor& a, const DTensor& b, const DTensor& out, const DTensor& g)>;

BackwardFn BinaryBackward(BinaryGrad grad) {
  return [grad](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(InputGrads grads,
                        grad(call.inputs[0], call.inputs[1], call.outputs[0],
                             call.grad_outputs[0]));
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      DT_ASSIGN_OR_RETURN(grads[i],
                          SumToShape(grads[i], call.inputs[i].shape()));
    }
    return grads;
  };
}

// Comparisons are piecewise constant: no input gets a gradient.
absl::StatusOr<InputGrads> NoGradient(const BackwardCall& call) {
  return InputGrads(call.inputs.size());
}

// d/da and d/db of maximum (`max`) or minimum: the gradient goes to the
// larger (smaller) input, split evenly on ties, as in PyTorch.
BinaryGrad ExtremeGrad(bool max) {
  return [max](const DTensor& a, const DTensor& b, const DTensor&,
               const DTensor& g) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(DTensor tie, Eq(a, b));
    DT_ASSIGN_OR_RETURN(DTensor half, MaskAs(tie, g));
    DT_ASSIGN_OR_RETURN(half, Mul(half, 0.5));
    DT_ASSIGN_OR_RETURN(DTensor a_wins, max ? Gt(a, b) : Lt(a, b));
    DT_ASSIGN_OR_RETURN(DTensor b_wins, max ? Lt(a, b) : Gt(a, b));
    InputGrads grads;
    for (const DTensor& wins : {a_wins, b_wins}) {
      DT_ASSIGN_OR_RETURN(DTensor weight, MaskAs(wins, g));
      DT_ASSIGN_OR_RETURN(weight, Add(weight, half));
      DT_ASSIGN_OR_RETURN(DTensor grad, Mul(g, weight));
      grads.push_back(std::move(grad));
    }
    return grads;
  };
}

absl::StatusOr<InputGrads> PowGrad(const DTensor& a, const DTensor& b,
                                   const DTensor& out, const DTensor& g) {
  // d/da = b * a^(b - 1); d/db = out * ln a, taken as 0 where a = 0 (as
  // PyTorch does for the 0^b of nonnegative b).
  DT_ASSIGN_OR_RETURN(DTensor b_minus_one, Sub(b, 1.0));
  DT_ASSIGN_OR_RETURN(DTensor power, Pow(a, b_minus_one));
  DT_ASSIGN_OR_RETURN(DTensor da, Mul(b, power));
  DT_ASSIGN_OR_RETURN(da, Mul(g, da));
  DT_ASSIGN_OR_RETURN(DTensor log_a, Log(a));
  DT_ASSIGN_OR_RETURN(DTensor db, Mul(out, log_a));
  DT_ASSIGN_OR_RETURN(db, Mul(g, db));
  DT_ASSIGN_OR_RETURN(DTensor zero_base, Eq(a, 0.0));
  DT_ASSIGN_OR_RETURN(DTensor zero, ScalarLike(g, 0));
  DT_ASSIGN_OR_RETURN(db, Where(zero_base, zero, db));
  return InputGrads{std::move(da), std::move(db)};
}

// silu_backward(g, a) = g silu'(a): d/dg = silu'(a), so the incoming G gives
// silu_backward(G, a); d/da = g silu''(a).
absl::StatusOr<InputGrads> SiluBackwardGrad(const DTensor& g, const DTensor& a,
                                            const DTensor&,
                                            const DTensor& incoming) {
  DT_ASSIGN_OR_RETURN(DTensor dg, SiluBackward(incoming, a));
  DT_ASSIGN_OR_RETURN(DTensor da, SiluSecondDerivative(a));
  DT_ASSIGN_OR_RETURN(da, Mul(da, g));
  DT_ASSIGN_OR_RETURN(da, Mul(da, incoming));
  return InputGrads{std::move(dg), std::move(da)};
}

// The output's gradient, unchanged (add/sub of a scalar).
BackwardFn PassGradient() {
  return UnaryBackward(
      [](const DTensor&, const DTensor&, const DTensor& g,
         const OpArgs&) -> absl::StatusOr<DTensor> { return g; });
}

// ---- The ops. ----

using Binary = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
using WithScalar = absl::StatusOr<Tensor> (*)(const Tensor&, double);

OpDef BinaryOp(absl::string_view name, absl::string_view summary, Binary f,
               Linearity linearity, BackwardFn backward) {
  return ElementwiseOp(
      name, summary, 2, {},
      [f](absl::Span<const Tensor> in, const OpArgs&) {
        return f(in[0], in[1]);
      },
      linearity, std::move(backward));
}

OpDef ScalarOp(absl::string_view name, absl::string_view summary, WithScalar f,
               Linearity linearity, BackwardFn backward) {
  return ElementwiseOp(
      name, summary, 1, kScalarArgs,
      [f](absl::Span<const Tensor> in, const OpArgs& args) {
        return f(in[0], args.Get(kOther));
      },
      linearity, std::move(backward));
}

// Overloaded tensor-layer functions, pinned to one signature.
constexpr Binary kAddFn = dtensor::Add, kSubFn = dtensor::Sub,
                 kMulFn = dtensor::Mul, kDivFn = dtensor::Div,
                 kPowFn = dtensor::Pow;
constexpr Binary kEqFn = dtensor::Eq, kNeFn = dtensor::Ne, kLtFn = dtensor::Lt,
                 kLeFn = dtensor::Le, kGtFn = dtensor::Gt, kGeFn = dtensor::Ge;
constexpr WithScalar kAddScalarFn = dtensor::Add, kSubScalarFn = dtensor::Sub,
                     kMulScalarFn = dtensor::Mul, kDivScalarFn = dtensor::Div,
                     kPowScalarFn = dtensor::Pow;
constexpr WithScalar kEqScalarFn = dtensor::Eq, kNeScalarFn = dtensor::Ne,
                     kLtScalarFn = dtensor::Lt, kLeScalarFn = dtensor::Le,
                     kGtScalarFn = dtensor::Gt, kGeScalarFn = dtensor::Ge;
using Out = absl::StatusOr<DTensor>;
using Grads = absl::StatusOr<InputGrads>;

OpDef MakeAdd() {
  return BinaryOp("add", "a + b", kAddFn, Linearity::kSumJoint,
                  BinaryBackward([](const DTensor&, const DTensor&,
                                    const DTensor&, const DTensor& g) -> Grads {
                    return InputGrads{g, g};
                  }));
}

OpDef MakeSub() {
  return BinaryOp("sub", "a - b", kSubFn, Linearity::kSumJoint,
                  BinaryBackward([](const DTensor&, const DTensor&,
                                    const DTensor&, const DTensor& g) -> Grads {
                    DT_ASSIGN_OR_RETURN(DTensor db, Neg(g));
                    return InputGrads{g, std::move(db)};
                  }));
}

OpDef MakeMul() {
  return BinaryOp("mul", "a * b", kMulFn, Linearity::kSumEach,
                  BinaryBackward([](const DTensor& a, const DTensor& b,
                                    const DTensor&, const DTensor& g) -> Grads {
                    DT_ASSIGN_OR_RETURN(DTensor da, Mul(g, b));
                    DT_ASSIGN_OR_RETURN(DTensor db, Mul(g, a));
                    return InputGrads{std::move(da), std::move(db)};
                  }));
}

OpDef MakeDiv() {
  return BinaryOp(
      "div", "a / b", kDivFn, Linearity::kSumFirst,
      BinaryBackward([](const DTensor&, const DTensor& b, const DTensor& out,
                        const DTensor& g) -> Grads {
        // d/db (a / b) = -out / b.
        DT_ASSIGN_OR_RETURN(DTensor da, Div(g, b));
        DT_ASSIGN_OR_RETURN(DTensor db, Mul(da, out));
        DT_ASSIGN_OR_RETURN(db, Neg(db));
        return InputGrads{std::move(da), std::move(db)};
      }));
}

OpDef MakePow() {
  return BinaryOp("pow", "a ** b", kPowFn, Linearity::kNone,
                  BinaryBackward(PowGrad));
}

OpDef MakeSiluBackward() {
  return BinaryOp("silu_backward",
                  "a * silu'(b): SiLU's backward (gradient a, input b)",
                  dtensor::SiluBackward, Linearity::kSumFirst,
                  BinaryBackward(SiluBackwardGrad));
}

OpDef MakeMaximum() {
  return BinaryOp("maximum", "elementwise max(a, b)", dtensor::Maximum,
                  Linearity::kMaxJoint,
                  BinaryBackward(ExtremeGrad(/*max=*/true)));
}

OpDef MakeMinimum() {
  return BinaryOp("minimum", "elementwise min(a, b)", dtensor::Minimum,
                  Linearity::kMinJoint,
                  BinaryBackward(ExtremeGrad(/*max=*/false)));
}

// A comparison (piecewise constant: no gradient) and its scalar form:
// Make<Name>() and Make<Name>Scalar(), registered as `name` and
// `name`_scalar.
#define DT_COMPARISON_MAKERS(Name, name, symbol)                             \
  OpDef Make##Name() {                                                       \
    return BinaryOp(name, "a " symbol " b (bool)", k##Name##Fn,              \
                    Linearity::kNone, NoGradient);                           \
  }                                                                          \
  OpDef Make##Name##Scalar() {                                               \
    return ScalarOp(name "_scalar", "a " symbol " other", k##Name##ScalarFn, \
                    Linearity::kNone, NoGradient);                           \
  }
DT_COMPARISON_MAKERS(Eq, "eq", "==")
DT_COMPARISON_MAKERS(Ne, "ne", "!=")
DT_COMPARISON_MAKERS(Lt, "lt", "<")
DT_COMPARISON_MAKERS(Le, "le", "<=")
DT_COMPARISON_MAKERS(Gt, "gt", ">")
DT_COMPARISON_MAKERS(Ge, "ge", ">=")
#undef DT_COMPARISON_MAKERS

OpDef MakeAddScalar() {
  return ScalarOp("add_scalar", "a + other", kAddScalarFn,
                  Linearity::kAffineFirst, PassGradient());
}

OpDef MakeSubScalar() {
  return ScalarOp("sub_scalar", "a - other", kSubScalarFn,
                  Linearity::kAffineFirst, PassGradient());
}

OpDef MakeMulScalar() {
  return ScalarOp("mul_scalar", "a * other", kMulScalarFn, Linearity::kSumFirst,
                  UnaryBackward([](const DTensor&, const DTensor&,
                                   const DTensor& g, const OpArgs& args) {
                    return Mul(g, args.Get(kOther));
                  }));
}

OpDef MakeDivScalar() {
  return ScalarOp("div_scalar", "a / other", kDivScalarFn, Linearity::kSumFirst,
                  UnaryBackward([](const DTensor&, const DTensor&,
                                   const DTensor& g, const OpArgs& args) {
                    return Div(g, args.Get(kOther));
                  }));
}

OpDef MakePowScalar() {
  return ScalarOp(
      "pow_scalar", "a ** other", kPowScalarFn, Linearity::kNone,
      UnaryBackward([](const DTensor& a, const DTensor&, const DTensor& g,
                       const OpArgs& args) -> Out {
        // other * a^(other - 1); 0 for other = 0 (a^0 is constant, 0^-1 is
        // not finite).
        const double exponent = args.Get(kOther);
        if (exponent == 0) return Mul(g, 0.0);
        DT_ASSIGN_OR_RETURN(DTensor d, Pow(a, exponent - 1));
        DT_ASSIGN_OR_RETURN(d, Mul(d, exponent));
        return Mul(g, d);
      }));
}

OpDef MakeWhere() {
  return ElementwiseOp(
      "where", "cond ? a : b (inputs cond, a, b)", 3, {},
      [](absl::Span<const Tensor> in, const OpArgs&) {
        return dtensor::Where(in[0], in[1], in[2]);
      },
      Linearity::kSelect,
      [](const BackwardCall& call) -> Grads {
        const DTensor& cond = call.inputs[0];
        const DTensor& g = call.grad_outputs[0];
        DT_ASSIGN_OR_RETURN(DTensor zero, ScalarLike(g, 0));
        DT_ASSIGN_OR_RETURN(DTensor da, Where(cond, g, zero));
        DT_ASSIGN_OR_RETURN(DTensor db, Where(cond, zero, g));
        DT_ASSIGN_OR_RETURN(da, SumToShape(da, call.inputs[1].shape()));
        DT_ASSIGN_OR_RETURN(db, SumToShape(db, call.inputs[2].shape()));
        return InputGrads{DTensor(), std::move(da), std::move(db)};
      });
}

DTENSOR_ELEMENTWISE_BINARY(DTENSOR_OP_DEF_ACCESSOR, )
DTENSOR_ELEMENTWISE_COMPARISONS(DTENSOR_OP_DEF_ACCESSOR, )
DTENSOR_ELEMENTWISE_WITH_SCALAR(DTENSOR_OP_DEF_ACCESSOR, Scalar)
const OpDef& SiluBackwardDef() { return StaticOpDef<MakeSiluBackward>(); }
const OpDef& WhereDef() { return StaticOpDef<MakeWhere>(); }

}  // namespace

// The functions of elementwise.h's binary, comparison and scalar lists call
// their op (XDef, or XScalarDef for a scalar form).
#define DT_DEFINE_BINARY(T, Name)                  \
  absl::StatusOr<T> Name(const T& a, const T& b) { \
    return CallElementwise(Name##Def(), {&a, &b}); \
  }
#define DT_DEFINE_WITH_SCALAR(T, Name)                                      \
  absl::StatusOr<T> Name(const T& a, double b) {                            \
    return CallElementwise(Name##ScalarDef(), {&a}, OpArgs().AddScalar(b)); \
  }
DTENSOR_ELEMENTWISE_BINARY(DT_DEFINE_BINARY, DTensor)
DTENSOR_ELEMENTWISE_COMPARISONS(DT_DEFINE_BINARY, DTensor)
DTENSOR_ELEMENTWISE_WITH_SCALAR(DT_DEFINE_WITH_SCALAR, DTensor)
#undef DT_DEFINE_WITH_SCALAR
#undef DT_DEFINE_BINARY

absl::StatusOr<DTensor> SiluBackward(const DTensor& grad, const DTensor& x) {
  return CallElementwise(SiluBackwardDef(), {&grad, &x});
}

absl::StatusOr<DTensor> Where(const DTensor& cond, const DTensor& a,
                              const DTensor& b) {
  return CallElementwise(WhereDef(), {&cond, &a, &b});
}

std::vector<const OpDef*> ElementwiseOps() {
  // clang-format off
  std::vector<const OpDef*> ops = {
      &WhereDef(), &SiluBackwardDef(),
      DTENSOR_ELEMENTWISE_BINARY(DTENSOR_OP_DEF_ADDRESS, )
      DTENSOR_ELEMENTWISE_COMPARISONS(DTENSOR_OP_DEF_ADDRESS, )
      DTENSOR_ELEMENTWISE_WITH_SCALAR(DTENSOR_OP_DEF_ADDRESS, Scalar)};
  // clang-format on
  for (const std::vector<const OpDef*>& more :
       {UnaryElementwiseOps(), SwiGluOps()}) {
    ops.insert(ops.end(), more.begin(), more.end());
  }
  return ops;
}

}  // namespace ops
}  // namespace dtensor
