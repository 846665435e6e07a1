#include "dtensor/ops/elementwise_ops.h"

#include <cmath>
#include <initializer_list>
#include <numeric>
#include <utility>

#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/local_fn.h"

namespace dtensor {
namespace ops {
namespace {

// The ops with a scalar operand (add_scalar, ..., ge_scalar).
constexpr ArgSpec kScalarArgs[] = {{"other", ArgKind::kScalar}};
constexpr auto kOther = KeyOf<ArgKind::kScalar>(kScalarArgs, "other");

constexpr ArgSpec kGeluArgs[] = {{"tanh", ArgKind::kBool, "false"}};
constexpr auto kTanh = KeyOf<ArgKind::kBool>(kGeluArgs, "tanh");

// Which Partial inputs an op passes through (see the header).
enum class Linearity {
  kNone,
  kSumJoint,       // add, sub
  kSumEach,        // mul
  kSumFirst,       // div, neg, mul/div by a scalar
  kAffineFirst,    // add/sub a scalar
  kMonotoneFirst,  // relu, exp, sigmoid, tanh
  kMaxJoint,       // maximum
  kMinJoint,       // minimum
  kSelect,         // where
};

std::vector<EinsumSpec::PartialRule> RulesOf(Linearity linearity) {
  const std::vector<ReduceOp> linear = {ReduceOp::kSum, ReduceOp::kAvg};
  switch (linearity) {
    case Linearity::kNone:
      return {};
    case Linearity::kSumJoint:
      return {{{0, 1}, linear}};
    case Linearity::kSumEach:
      return {{{0}, linear}, {{1}, linear}};
    case Linearity::kSumFirst:
      return {{{0}, linear}};
    case Linearity::kAffineFirst:
      return {{{0}, {ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}}};
    case Linearity::kMonotoneFirst:
      return {{{0}, {ReduceOp::kMax, ReduceOp::kMin}}};
    case Linearity::kMaxJoint:
      return {{{0, 1}, {ReduceOp::kMax}}};
    case Linearity::kMinJoint:
      return {{{0, 1}, {ReduceOp::kMin}}};
    case Linearity::kSelect:
      return {
          {{1, 2},
           {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}}};
  }
  return {};
}

// The broadcast shape of the inputs; an error names the op and the shapes.
absl::StatusOr<Shape> BroadcastAll(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs) {
  Shape shape = inputs[0]->shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    absl::StatusOr<Shape> next = BroadcastShapes(shape, inputs[i]->shape());
    if (!next.ok()) return WithOpName(op, next.status());
    shape = *std::move(next);
  }
  return shape;
}

OpDef ElementwiseOp(absl::string_view name, absl::string_view summary,
                      int arity, absl::Span<const ArgSpec> args, LocalFn fn,
                      Linearity linearity, BackwardFn backward) {
  OpDef def = NamedOpDef(name, summary, args);
  def.num_inputs = arity;
  def.infer =
      [name, fn](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(Shape shape, BroadcastAll(name, inputs));
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(name, fn, inputs, args));
    return std::vector<TensorMeta>{{std::move(shape), dtype}};
  };
  def.strategies = [rules = RulesOf(linearity)](const StrategyContext& ctx) {
    const Shape& out = ctx.outputs[0].shape;
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(out.size());
    for (const DTensorSpec* in : ctx.inputs) {
      spec.loops.inputs.push_back(BroadcastLoops(in->shape(), out));
    }
    std::vector<int> out_loops(out.size());
    std::iota(out_loops.begin(), out_loops.end(), 0);
    spec.loops.outputs = {std::move(out_loops)};
    spec.partial_rules = rules;
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  def.backward = std::move(backward);
  return def;
}

// ---- Backward definitions. ----

// d out / d a times the output's gradient `g`, for a one-input op.
using UnaryGrad = std::function<absl::StatusOr<DTensor>(
    const DTensor& a, const DTensor& out, const DTensor& g,
    const OpArgs& args)>;
// The gradients of both inputs (undefined: none) before they are summed back
// over broadcast dims.
using BinaryGrad = std::function<absl::StatusOr<InputGrads>(
    const DTensor& a, const DTensor& b, const DTensor& out, const DTensor& g)>;

BackwardFn UnaryBackward(UnaryGrad grad) {
  return [grad](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(DTensor da, grad(call.inputs[0], call.outputs[0],
                                         call.grad_outputs[0], call.args));
    return InputGrads{std::move(da)};
  };
}

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

// `cond` as 0 / 1 in the dtype of `like`.
absl::StatusOr<DTensor> MaskAs(const DTensor& cond, const DTensor& like) {
  return To(cond, like.dtype());
}

// 1 - x.
absl::StatusOr<DTensor> OneMinus(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(DTensor negated, Neg(x));
  return Add(negated, 1.0);
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

absl::StatusOr<DTensor> GeluGrad(const DTensor& a, const DTensor& out,
                                 const DTensor& g, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(DTensor a2, Mul(a, a));
  DTensor d;
  if (args.Get(kTanh)) {
    // gelu = a/2 (1 + tanh u), u = k (a + c a^3): d = (1 + t)/2 +
    // a/2 (1 - t^2) k (1 + 3 c a^2).
    const double k = std::sqrt(2.0 / M_PI);
    const double c = 0.044715;
    DT_ASSIGN_OR_RETURN(DTensor u, Mul(a2, c));
    DT_ASSIGN_OR_RETURN(u, Add(u, 1.0));
    DT_ASSIGN_OR_RETURN(u, Mul(u, a));
    DT_ASSIGN_OR_RETURN(u, Mul(u, k));
    DT_ASSIGN_OR_RETURN(DTensor t, Tanh(u));
    DT_ASSIGN_OR_RETURN(DTensor du, Mul(a2, 3 * c * k));
    DT_ASSIGN_OR_RETURN(du, Add(du, k));
    DT_ASSIGN_OR_RETURN(DTensor t2, Mul(t, t));
    DT_ASSIGN_OR_RETURN(DTensor sech2, OneMinus(t2));
    DT_ASSIGN_OR_RETURN(DTensor inner, Mul(sech2, du));
    DT_ASSIGN_OR_RETURN(inner, Mul(inner, a));
    DT_ASSIGN_OR_RETURN(d, Add(inner, t));
    DT_ASSIGN_OR_RETURN(d, Add(d, 1.0));
    DT_ASSIGN_OR_RETURN(d, Mul(d, 0.5));
  } else {
    // gelu = a Phi(a): d = Phi(a) + a phi(a), with Phi(a) = out / a (1/2 at
    // a = 0) and phi the normal density.
    DT_ASSIGN_OR_RETURN(DTensor at_zero, Eq(a, 0.0));
    DT_ASSIGN_OR_RETURN(DTensor half, ScalarLike(g, 0.5));
    DT_ASSIGN_OR_RETURN(DTensor ratio, Div(out, a));
    DT_ASSIGN_OR_RETURN(DTensor cdf, Where(at_zero, half, ratio));
    DT_ASSIGN_OR_RETURN(DTensor pdf, Mul(a2, -0.5));
    DT_ASSIGN_OR_RETURN(pdf, Exp(pdf));
    DT_ASSIGN_OR_RETURN(pdf, Mul(pdf, 1.0 / std::sqrt(2.0 * M_PI)));
    DT_ASSIGN_OR_RETURN(pdf, Mul(pdf, a));
    DT_ASSIGN_OR_RETURN(d, Add(cdf, pdf));
  }
  return Mul(g, d);
}

absl::StatusOr<DTensor> SiluGrad(const DTensor& a, const DTensor&,
                                 const DTensor& g, const OpArgs&) {
  return SiluBackward(g, a);
}

// silu_backward(g, a) = g silu'(a): d/dg = silu'(a), so the incoming G gives
// silu_backward(G, a); d/da = g silu''(a) with silu''(a) = s (1 - s) (2 +
// a (1 - 2 s)), s = sigmoid(a).
absl::StatusOr<InputGrads> SiluBackwardGrad(const DTensor& g, const DTensor& a,
                                            const DTensor&,
                                            const DTensor& incoming) {
  DT_ASSIGN_OR_RETURN(DTensor dg, SiluBackward(incoming, a));
  DT_ASSIGN_OR_RETURN(DTensor s, Sigmoid(a));
  DT_ASSIGN_OR_RETURN(DTensor slope, OneMinus(s));
  DT_ASSIGN_OR_RETURN(slope, Mul(slope, s));
  DT_ASSIGN_OR_RETURN(DTensor inner, Mul(s, -2.0));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, 1.0));
  DT_ASSIGN_OR_RETURN(inner, Mul(inner, a));
  DT_ASSIGN_OR_RETURN(inner, Add(inner, 2.0));
  DT_ASSIGN_OR_RETURN(DTensor da, Mul(slope, inner));
  DT_ASSIGN_OR_RETURN(da, Mul(da, g));
  DT_ASSIGN_OR_RETURN(da, Mul(da, incoming));
  return InputGrads{std::move(dg), std::move(da)};
}

using Binary = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
using WithScalar = absl::StatusOr<Tensor> (*)(const Tensor&, double);
using Unary = absl::StatusOr<Tensor> (*)(const Tensor&);

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

OpDef UnaryOp(absl::string_view name, absl::string_view summary, Unary f,
              Linearity linearity, BackwardFn backward) {
  return ElementwiseOp(
      name, summary, 1, {},
      [f](absl::Span<const Tensor> in, const OpArgs&) { return f(in[0]); },
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

// The output's gradient, unchanged (add/sub of a scalar).
BackwardFn PassGradient() {
  return UnaryBackward([](const DTensor&, const DTensor&, const DTensor& g,
                          const OpArgs&) -> Out { return g; });
}

// One static OpDef per op.
const OpDef& AddDef() {
  static const OpDef* def = new OpDef(
      BinaryOp("add", "a + b", kAddFn, Linearity::kSumJoint,
               BinaryBackward([](const DTensor&, const DTensor&, const DTensor&,
                                 const DTensor& g) -> Grads {
                 return InputGrads{g, g};
               })));
  return *def;
}

const OpDef& SubDef() {
  static const OpDef* def = new OpDef(
      BinaryOp("sub", "a - b", kSubFn, Linearity::kSumJoint,
               BinaryBackward([](const DTensor&, const DTensor&, const DTensor&,
                                 const DTensor& g) -> Grads {
                 DT_ASSIGN_OR_RETURN(DTensor db, Neg(g));
                 return InputGrads{g, std::move(db)};
               })));
  return *def;
}

const OpDef& MulDef() {
  static const OpDef* def = new OpDef(
      BinaryOp("mul", "a * b", kMulFn, Linearity::kSumEach,
               BinaryBackward([](const DTensor& a, const DTensor& b,
                                 const DTensor&, const DTensor& g) -> Grads {
                 DT_ASSIGN_OR_RETURN(DTensor da, Mul(g, b));
                 DT_ASSIGN_OR_RETURN(DTensor db, Mul(g, a));
                 return InputGrads{std::move(da), std::move(db)};
               })));
  return *def;
}

const OpDef& DivDef() {
  static const OpDef* def = new OpDef(BinaryOp(
      "div", "a / b", kDivFn, Linearity::kSumFirst,
      BinaryBackward([](const DTensor&, const DTensor& b, const DTensor& out,
                        const DTensor& g) -> Grads {
        // d/db (a / b) = -out / b.
        DT_ASSIGN_OR_RETURN(DTensor da, Div(g, b));
        DT_ASSIGN_OR_RETURN(DTensor db, Mul(da, out));
        DT_ASSIGN_OR_RETURN(db, Neg(db));
        return InputGrads{std::move(da), std::move(db)};
      })));
  return *def;
}

const OpDef& PowDef() {
  static const OpDef* def = new OpDef(BinaryOp(
      "pow", "a ** b", kPowFn, Linearity::kNone, BinaryBackward(PowGrad)));
  return *def;
}

const OpDef& SiluBackwardDef() {
  static const OpDef* def = new OpDef(BinaryOp(
      "silu_backward", "a * silu'(b): SiLU's backward (gradient a, input b)",
      dtensor::SiluBackward, Linearity::kSumFirst,
      BinaryBackward(SiluBackwardGrad)));
  return *def;
}

const OpDef& MaximumDef() {
  static const OpDef* def = new OpDef(BinaryOp(
      "maximum", "elementwise max(a, b)", dtensor::Maximum,
      Linearity::kMaxJoint, BinaryBackward(ExtremeGrad(/*max=*/true))));
  return *def;
}

const OpDef& MinimumDef() {
  static const OpDef* def = new OpDef(BinaryOp(
      "minimum", "elementwise min(a, b)", dtensor::Minimum,
      Linearity::kMinJoint, BinaryBackward(ExtremeGrad(/*max=*/false))));
  return *def;
}

// A comparison (piecewise constant: no gradient) and its scalar form:
// NameDef() and NameScalarDef(), registered as `name` and `name`_scalar.
#define DT_COMPARISON_DEFS(Name, name, symbol)                            \
  const OpDef& Name##Def() {                                              \
    static const OpDef* def =                                             \
        new OpDef(BinaryOp(name, "a " symbol " b (bool)", k##Name##Fn,    \
                           Linearity::kNone, BackwardFn(NoGradient)));    \
    return *def;                                                          \
  }                                                                       \
  const OpDef& Name##ScalarDef() {                                        \
    static const OpDef* def = new OpDef(                                  \
        ScalarOp(name "_scalar", "a " symbol " other", k##Name##ScalarFn, \
                 Linearity::kNone, BackwardFn(NoGradient)));              \
    return *def;                                                          \
  }
DT_COMPARISON_DEFS(Eq, "eq", "==")
DT_COMPARISON_DEFS(Ne, "ne", "!=")
DT_COMPARISON_DEFS(Lt, "lt", "<")
DT_COMPARISON_DEFS(Le, "le", "<=")
DT_COMPARISON_DEFS(Gt, "gt", ">")
DT_COMPARISON_DEFS(Ge, "ge", ">=")
#undef DT_COMPARISON_DEFS

const OpDef& AddScalarDef() {
  static const OpDef* def =
      new OpDef(ScalarOp("add_scalar", "a + other", kAddScalarFn,
                         Linearity::kAffineFirst, PassGradient()));
  return *def;
}

const OpDef& SubScalarDef() {
  static const OpDef* def =
      new OpDef(ScalarOp("sub_scalar", "a - other", kSubScalarFn,
                         Linearity::kAffineFirst, PassGradient()));
  return *def;
}

const OpDef& MulScalarDef() {
  static const OpDef* def = new OpDef(
      ScalarOp("mul_scalar", "a * other", kMulScalarFn, Linearity::kSumFirst,
               UnaryBackward([](const DTensor&, const DTensor&,
                                const DTensor& g, const OpArgs& args) {
                 return Mul(g, args.Get(kOther));
               })));
  return *def;
}

const OpDef& DivScalarDef() {
  static const OpDef* def = new OpDef(
      ScalarOp("div_scalar", "a / other", kDivScalarFn, Linearity::kSumFirst,
               UnaryBackward([](const DTensor&, const DTensor&,
                                const DTensor& g, const OpArgs& args) {
                 return Div(g, args.Get(kOther));
               })));
  return *def;
}

const OpDef& PowScalarDef() {
  static const OpDef* def = new OpDef(
      ScalarOp("pow_scalar", "a ** other", kPowScalarFn, Linearity::kNone,
               UnaryBackward([](const DTensor& a, const DTensor&,
                                const DTensor& g, const OpArgs& args) -> Out {
                 // other * a^(other - 1); 0 for other = 0 (a^0 is constant,
                 // 0^-1 is not finite).
                 const double exponent = args.Get(kOther);
                 if (exponent == 0) return Mul(g, 0.0);
                 DT_ASSIGN_OR_RETURN(DTensor d, Pow(a, exponent - 1));
                 DT_ASSIGN_OR_RETURN(d, Mul(d, exponent));
                 return Mul(g, d);
               })));
  return *def;
}

const OpDef& NegDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("neg", "-a", dtensor::Neg, Linearity::kSumFirst,
              UnaryBackward([](const DTensor&, const DTensor&, const DTensor& g,
                               const OpArgs&) { return Neg(g); })));
  return *def;
}

const OpDef& AbsDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("abs", "|a|", dtensor::Abs, Linearity::kNone,
              UnaryBackward([](const DTensor& a, const DTensor&,
                               const DTensor& g, const OpArgs&) -> Out {
                // sign(a): 0 at 0.
                DT_ASSIGN_OR_RETURN(DTensor positive, Gt(a, 0.0));
                DT_ASSIGN_OR_RETURN(DTensor negative, Lt(a, 0.0));
                DT_ASSIGN_OR_RETURN(positive, MaskAs(positive, g));
                DT_ASSIGN_OR_RETURN(negative, MaskAs(negative, g));
                DT_ASSIGN_OR_RETURN(DTensor sign, Sub(positive, negative));
                return Mul(g, sign);
              })));
  return *def;
}

const OpDef& ExpDef() {
  static const OpDef* def = new OpDef(UnaryOp(
      "exp", "e ** a", dtensor::Exp, Linearity::kMonotoneFirst,
      UnaryBackward([](const DTensor&, const DTensor& out, const DTensor& g,
                       const OpArgs&) { return Mul(g, out); })));
  return *def;
}

const OpDef& LogDef() {
  static const OpDef* def = new OpDef(UnaryOp(
      "log", "ln a", dtensor::Log, Linearity::kNone,
      UnaryBackward([](const DTensor& a, const DTensor&, const DTensor& g,
                       const OpArgs&) { return Div(g, a); })));
  return *def;
}

const OpDef& SqrtDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("sqrt", "sqrt(a)", dtensor::Sqrt, Linearity::kNone,
              UnaryBackward([](const DTensor&, const DTensor& out,
                               const DTensor& g, const OpArgs&) -> Out {
                DT_ASSIGN_OR_RETURN(DTensor twice, Mul(out, 2.0));
                return Div(g, twice);
              })));
  return *def;
}

const OpDef& RsqrtDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("rsqrt", "1 / sqrt(a)", dtensor::Rsqrt, Linearity::kNone,
              UnaryBackward([](const DTensor&, const DTensor& out,
                               const DTensor& g, const OpArgs&) -> Out {
                // -out^3 / 2.
                DT_ASSIGN_OR_RETURN(DTensor d, Pow(out, 3.0));
                DT_ASSIGN_OR_RETURN(d, Mul(d, -0.5));
                return Mul(g, d);
              })));
  return *def;
}

const OpDef& ReluDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("relu", "max(a, 0)", dtensor::Relu, Linearity::kMonotoneFirst,
              UnaryBackward([](const DTensor& a, const DTensor&,
                               const DTensor& g, const OpArgs&) -> Out {
                DT_ASSIGN_OR_RETURN(DTensor positive, Gt(a, 0.0));
                DT_ASSIGN_OR_RETURN(positive, MaskAs(positive, g));
                return Mul(g, positive);
              })));
  return *def;
}

const OpDef& GeluDef() {
  static const OpDef* def = new OpDef(ElementwiseOp(
      "gelu", "GELU (erf, or the tanh approximation with tanh=true)", 1,
      kGeluArgs,
      [](absl::Span<const Tensor> in, const OpArgs& args) {
        return dtensor::Gelu(in[0], args.Get(kTanh) ? GeluApproximation::kTanh
                                                    : GeluApproximation::kNone);
      },
      Linearity::kNone, UnaryBackward(GeluGrad)));
  return *def;
}

const OpDef& SiluDef() {
  static const OpDef* def =
      new OpDef(UnaryOp("silu", "a * sigmoid(a)", dtensor::Silu,
                        Linearity::kNone, UnaryBackward(SiluGrad)));
  return *def;
}

const OpDef& SigmoidDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("sigmoid", "1 / (1 + e ** -a)", dtensor::Sigmoid,
              Linearity::kMonotoneFirst,
              UnaryBackward([](const DTensor&, const DTensor& out,
                               const DTensor& g, const OpArgs&) -> Out {
                DT_ASSIGN_OR_RETURN(DTensor d, OneMinus(out));
                DT_ASSIGN_OR_RETURN(d, Mul(d, out));
                return Mul(g, d);
              })));
  return *def;
}

const OpDef& TanhDef() {
  static const OpDef* def = new OpDef(
      UnaryOp("tanh", "tanh(a)", dtensor::Tanh, Linearity::kMonotoneFirst,
              UnaryBackward([](const DTensor&, const DTensor& out,
                               const DTensor& g, const OpArgs&) -> Out {
                DT_ASSIGN_OR_RETURN(DTensor d, Mul(out, out));
                DT_ASSIGN_OR_RETURN(d, OneMinus(d));
                return Mul(g, d);
              })));
  return *def;
}

const OpDef& WhereDef() {
  static const OpDef* def = new OpDef(ElementwiseOp(
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
      }));
  return *def;
}

absl::StatusOr<DTensor> Call(const OpDef& def,
                             std::initializer_list<const DTensor*> in,
                             const OpArgs& args = OpArgs()) {
  return DispatchOne(def, absl::MakeConstSpan(in.begin(), in.size()), args);
}

absl::StatusOr<DTensor> CallScalar(const OpDef& def, const DTensor& a,
                                   double other) {
  OpArgs args;
  args.AddScalar(other);
  return Call(def, {&a}, args);
}

}  // namespace

// The functions of elementwise.h's lists call their op (XDef, or XScalarDef
// for a scalar form).
#define DT_DEFINE_BINARY(T, Name)                  \
  absl::StatusOr<T> Name(const T& a, const T& b) { \
    return Call(Name##Def(), {&a, &b});            \
  }
#define DT_DEFINE_WITH_SCALAR(T, Name)           \
  absl::StatusOr<T> Name(const T& a, double b) { \
    return CallScalar(Name##ScalarDef(), a, b);  \
  }
#define DT_DEFINE_UNARY(T, Name) \
  absl::StatusOr<T> Name(const T& a) { return Call(Name##Def(), {&a}); }
DTENSOR_ELEMENTWISE_BINARY(DT_DEFINE_BINARY, DTensor)
DTENSOR_ELEMENTWISE_COMPARISONS(DT_DEFINE_BINARY, DTensor)
DTENSOR_ELEMENTWISE_WITH_SCALAR(DT_DEFINE_WITH_SCALAR, DTensor)
DTENSOR_ELEMENTWISE_UNARY(DT_DEFINE_UNARY, DTensor)
#undef DT_DEFINE_UNARY
#undef DT_DEFINE_WITH_SCALAR
#undef DT_DEFINE_BINARY

absl::StatusOr<DTensor> Gelu(const DTensor& a,
                             GeluApproximation approximation) {
  OpArgs args;
  args.AddBool(approximation == GeluApproximation::kTanh);
  return Call(GeluDef(), {&a}, args);
}
absl::StatusOr<DTensor> SiluBackward(const DTensor& grad, const DTensor& x) {
  return Call(SiluBackwardDef(), {&grad, &x});
}

absl::StatusOr<DTensor> Where(const DTensor& cond, const DTensor& a,
                              const DTensor& b) {
  return Call(WhereDef(), {&cond, &a, &b});
}

std::vector<const OpDef*> ElementwiseOps() {
  return {&AddDef(),         &SubDef(),       &MulDef(),       &DivDef(),
          &PowDef(),         &MaximumDef(),   &MinimumDef(),   &EqDef(),
          &NeDef(),          &LtDef(),        &LeDef(),        &GtDef(),
          &GeDef(),          &AddScalarDef(), &SubScalarDef(), &MulScalarDef(),
          &DivScalarDef(),   &PowScalarDef(), &EqScalarDef(),  &NeScalarDef(),
          &LtScalarDef(),    &LeScalarDef(),  &GtScalarDef(),  &GeScalarDef(),
          &NegDef(),         &AbsDef(),       &ExpDef(),       &LogDef(),
          &SqrtDef(),        &RsqrtDef(),     &ReluDef(),      &GeluDef(),
          &SiluDef(),        &SigmoidDef(),   &TanhDef(),      &WhereDef(),
          &SiluBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
