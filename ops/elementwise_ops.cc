#include "ops/elementwise_ops.h"

#include <initializer_list>
#include <numeric>
#include <utility>

#include "absl/strings/string_view.h"
#include "ops/dispatch.h"
#include "ops/einsum_strategy.h"
#include "ops/local_fn.h"
#include "tensor/status_macros.h"

namespace dtensor {
namespace ops {
namespace {

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

OpDef MakeElementwise(absl::string_view name, absl::string_view summary,
                      int arity, std::vector<ArgSpec> args, LocalFn fn,
                      Linearity linearity) {
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.num_inputs = arity;
  def.args = std::move(args);
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
  return def;
}

// The ops of the family, in this order (Defs()[kAdd] is add).
enum Id {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAddScalar,
  kSubScalar,
  kMulScalar,
  kDivScalar,
  kPowScalar,
  kEqScalar,
  kNeScalar,
  kLtScalar,
  kLeScalar,
  kGtScalar,
  kGeScalar,
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kRelu,
  kGelu,
  kSilu,
  kSigmoid,
  kTanh,
  kWhere,
  kNumOps,
};

using Binary = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
using WithScalar = absl::StatusOr<Tensor> (*)(const Tensor&, double);
using Unary = absl::StatusOr<Tensor> (*)(const Tensor&);

OpDef BinaryOp(absl::string_view name, absl::string_view summary, Binary f,
               Linearity linearity) {
  return MakeElementwise(
      name, summary, 2, {},
      [f](absl::Span<const Tensor> in, const OpArgs&) {
        return f(in[0], in[1]);
      },
      linearity);
}

OpDef ScalarOp(absl::string_view name, absl::string_view summary, WithScalar f,
               Linearity linearity) {
  return MakeElementwise(
      name, summary, 1, {{"other", ArgKind::kScalar}},
      [f](absl::Span<const Tensor> in, const OpArgs& args) {
        return f(in[0], args.Scalar(0));
      },
      linearity);
}

OpDef UnaryOp(absl::string_view name, absl::string_view summary, Unary f,
              Linearity linearity) {
  return MakeElementwise(
      name, summary, 1, {},
      [f](absl::Span<const Tensor> in, const OpArgs&) { return f(in[0]); },
      linearity);
}

std::vector<OpDef> BuildDefs() {
  std::vector<OpDef> defs;
  defs.reserve(kNumOps);
  // Overloaded tensor-layer functions, pinned to one signature.
  const Binary add = dtensor::Add, sub = dtensor::Sub, mul = dtensor::Mul,
               div = dtensor::Div, pow = dtensor::Pow;
  const Binary eq = dtensor::Eq, ne = dtensor::Ne, lt = dtensor::Lt,
               le = dtensor::Le, gt = dtensor::Gt, ge = dtensor::Ge;
  const WithScalar add_s = dtensor::Add, sub_s = dtensor::Sub,
                   mul_s = dtensor::Mul, div_s = dtensor::Div,
                   pow_s = dtensor::Pow;
  const WithScalar eq_s = dtensor::Eq, ne_s = dtensor::Ne, lt_s = dtensor::Lt,
                   le_s = dtensor::Le, gt_s = dtensor::Gt, ge_s = dtensor::Ge;
  defs.push_back(BinaryOp("add", "a + b", add, Linearity::kSumJoint));
  defs.push_back(BinaryOp("sub", "a - b", sub, Linearity::kSumJoint));
  defs.push_back(BinaryOp("mul", "a * b", mul, Linearity::kSumEach));
  defs.push_back(BinaryOp("div", "a / b", div, Linearity::kSumFirst));
  defs.push_back(BinaryOp("pow", "a ** b", pow, Linearity::kNone));
  defs.push_back(BinaryOp("maximum", "elementwise max(a, b)", dtensor::Maximum,
                          Linearity::kMaxJoint));
  defs.push_back(BinaryOp("minimum", "elementwise min(a, b)", dtensor::Minimum,
                          Linearity::kMinJoint));
  defs.push_back(BinaryOp("eq", "a == b (bool)", eq, Linearity::kNone));
  defs.push_back(BinaryOp("ne", "a != b (bool)", ne, Linearity::kNone));
  defs.push_back(BinaryOp("lt", "a < b (bool)", lt, Linearity::kNone));
  defs.push_back(BinaryOp("le", "a <= b (bool)", le, Linearity::kNone));
  defs.push_back(BinaryOp("gt", "a > b (bool)", gt, Linearity::kNone));
  defs.push_back(BinaryOp("ge", "a >= b (bool)", ge, Linearity::kNone));
  defs.push_back(
      ScalarOp("add_scalar", "a + other", add_s, Linearity::kAffineFirst));
  defs.push_back(
      ScalarOp("sub_scalar", "a - other", sub_s, Linearity::kAffineFirst));
  defs.push_back(
      ScalarOp("mul_scalar", "a * other", mul_s, Linearity::kSumFirst));
  defs.push_back(
      ScalarOp("div_scalar", "a / other", div_s, Linearity::kSumFirst));
  defs.push_back(ScalarOp("pow_scalar", "a ** other", pow_s, Linearity::kNone));
  defs.push_back(ScalarOp("eq_scalar", "a == other", eq_s, Linearity::kNone));
  defs.push_back(ScalarOp("ne_scalar", "a != other", ne_s, Linearity::kNone));
  defs.push_back(ScalarOp("lt_scalar", "a < other", lt_s, Linearity::kNone));
  defs.push_back(ScalarOp("le_scalar", "a <= other", le_s, Linearity::kNone));
  defs.push_back(ScalarOp("gt_scalar", "a > other", gt_s, Linearity::kNone));
  defs.push_back(ScalarOp("ge_scalar", "a >= other", ge_s, Linearity::kNone));
  defs.push_back(UnaryOp("neg", "-a", dtensor::Neg, Linearity::kSumFirst));
  defs.push_back(UnaryOp("abs", "|a|", dtensor::Abs, Linearity::kNone));
  defs.push_back(
      UnaryOp("exp", "e ** a", dtensor::Exp, Linearity::kMonotoneFirst));
  defs.push_back(UnaryOp("log", "ln a", dtensor::Log, Linearity::kNone));
  defs.push_back(UnaryOp("sqrt", "sqrt(a)", dtensor::Sqrt, Linearity::kNone));
  defs.push_back(
      UnaryOp("rsqrt", "1 / sqrt(a)", dtensor::Rsqrt, Linearity::kNone));
  defs.push_back(
      UnaryOp("relu", "max(a, 0)", dtensor::Relu, Linearity::kMonotoneFirst));
  defs.push_back(MakeElementwise(
      "gelu", "GELU (erf, or the tanh approximation with tanh=true)", 1,
      {{"tanh", ArgKind::kBool, "false"}},
      [](absl::Span<const Tensor> in, const OpArgs& args) {
        return dtensor::Gelu(in[0], args.Bool(0) ? GeluApproximation::kTanh
                                                 : GeluApproximation::kNone);
      },
      Linearity::kNone));
  defs.push_back(
      UnaryOp("silu", "a * sigmoid(a)", dtensor::Silu, Linearity::kNone));
  defs.push_back(UnaryOp("sigmoid", "1 / (1 + e ** -a)", dtensor::Sigmoid,
                         Linearity::kMonotoneFirst));
  defs.push_back(
      UnaryOp("tanh", "tanh(a)", dtensor::Tanh, Linearity::kMonotoneFirst));
  defs.push_back(MakeElementwise(
      "where", "cond ? a : b (inputs cond, a, b)", 3, {},
      [](absl::Span<const Tensor> in, const OpArgs&) {
        return dtensor::Where(in[0], in[1], in[2]);
      },
      Linearity::kSelect));
  return defs;
}

const std::vector<OpDef>& Defs() {
  static const std::vector<OpDef>* defs = new std::vector<OpDef>(BuildDefs());
  return *defs;
}

absl::StatusOr<DTensor> Call(Id id, std::initializer_list<const DTensor*> in,
                             const OpArgs& args = OpArgs()) {
  return DispatchOne(Defs()[id], absl::MakeConstSpan(in.begin(), in.size()),
                     args);
}

absl::StatusOr<DTensor> CallScalar(Id id, const DTensor& a, double other) {
  OpArgs args;
  args.AddScalar(other);
  return Call(id, {&a}, args);
}

}  // namespace

absl::StatusOr<DTensor> Add(const DTensor& a, const DTensor& b) {
  return Call(kAdd, {&a, &b});
}
absl::StatusOr<DTensor> Sub(const DTensor& a, const DTensor& b) {
  return Call(kSub, {&a, &b});
}
absl::StatusOr<DTensor> Mul(const DTensor& a, const DTensor& b) {
  return Call(kMul, {&a, &b});
}
absl::StatusOr<DTensor> Div(const DTensor& a, const DTensor& b) {
  return Call(kDiv, {&a, &b});
}
absl::StatusOr<DTensor> Pow(const DTensor& a, const DTensor& b) {
  return Call(kPow, {&a, &b});
}
absl::StatusOr<DTensor> Maximum(const DTensor& a, const DTensor& b) {
  return Call(kMaximum, {&a, &b});
}
absl::StatusOr<DTensor> Minimum(const DTensor& a, const DTensor& b) {
  return Call(kMinimum, {&a, &b});
}

absl::StatusOr<DTensor> Add(const DTensor& a, double b) {
  return CallScalar(kAddScalar, a, b);
}
absl::StatusOr<DTensor> Sub(const DTensor& a, double b) {
  return CallScalar(kSubScalar, a, b);
}
absl::StatusOr<DTensor> Mul(const DTensor& a, double b) {
  return CallScalar(kMulScalar, a, b);
}
absl::StatusOr<DTensor> Div(const DTensor& a, double b) {
  return CallScalar(kDivScalar, a, b);
}
absl::StatusOr<DTensor> Pow(const DTensor& a, double exponent) {
  return CallScalar(kPowScalar, a, exponent);
}

absl::StatusOr<DTensor> Neg(const DTensor& a) { return Call(kNeg, {&a}); }
absl::StatusOr<DTensor> Abs(const DTensor& a) { return Call(kAbs, {&a}); }
absl::StatusOr<DTensor> Exp(const DTensor& a) { return Call(kExp, {&a}); }
absl::StatusOr<DTensor> Log(const DTensor& a) { return Call(kLog, {&a}); }
absl::StatusOr<DTensor> Sqrt(const DTensor& a) { return Call(kSqrt, {&a}); }
absl::StatusOr<DTensor> Rsqrt(const DTensor& a) { return Call(kRsqrt, {&a}); }
absl::StatusOr<DTensor> Relu(const DTensor& a) { return Call(kRelu, {&a}); }
absl::StatusOr<DTensor> Gelu(const DTensor& a,
                             GeluApproximation approximation) {
  OpArgs args;
  args.AddBool(approximation == GeluApproximation::kTanh);
  return Call(kGelu, {&a}, args);
}
absl::StatusOr<DTensor> Silu(const DTensor& a) { return Call(kSilu, {&a}); }
absl::StatusOr<DTensor> Sigmoid(const DTensor& a) {
  return Call(kSigmoid, {&a});
}
absl::StatusOr<DTensor> Tanh(const DTensor& a) { return Call(kTanh, {&a}); }

absl::StatusOr<DTensor> Eq(const DTensor& a, const DTensor& b) {
  return Call(kEq, {&a, &b});
}
absl::StatusOr<DTensor> Ne(const DTensor& a, const DTensor& b) {
  return Call(kNe, {&a, &b});
}
absl::StatusOr<DTensor> Lt(const DTensor& a, const DTensor& b) {
  return Call(kLt, {&a, &b});
}
absl::StatusOr<DTensor> Le(const DTensor& a, const DTensor& b) {
  return Call(kLe, {&a, &b});
}
absl::StatusOr<DTensor> Gt(const DTensor& a, const DTensor& b) {
  return Call(kGt, {&a, &b});
}
absl::StatusOr<DTensor> Ge(const DTensor& a, const DTensor& b) {
  return Call(kGe, {&a, &b});
}
absl::StatusOr<DTensor> Eq(const DTensor& a, double b) {
  return CallScalar(kEqScalar, a, b);
}
absl::StatusOr<DTensor> Ne(const DTensor& a, double b) {
  return CallScalar(kNeScalar, a, b);
}
absl::StatusOr<DTensor> Lt(const DTensor& a, double b) {
  return CallScalar(kLtScalar, a, b);
}
absl::StatusOr<DTensor> Le(const DTensor& a, double b) {
  return CallScalar(kLeScalar, a, b);
}
absl::StatusOr<DTensor> Gt(const DTensor& a, double b) {
  return CallScalar(kGtScalar, a, b);
}
absl::StatusOr<DTensor> Ge(const DTensor& a, double b) {
  return CallScalar(kGeScalar, a, b);
}

absl::StatusOr<DTensor> Where(const DTensor& cond, const DTensor& a,
                              const DTensor& b) {
  return Call(kWhere, {&cond, &a, &b});
}

std::vector<const OpDef*> ElementwiseOps() {
  std::vector<const OpDef*> ops;
  for (const OpDef& def : Defs()) ops.push_back(&def);
  return ops;
}

}  // namespace ops
}  // namespace dtensor
