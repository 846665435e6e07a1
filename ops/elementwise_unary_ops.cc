// The unary half of the elementwise family (dtensor/ops/elementwise_ops.h):
// neg, abs, exp, log, sqrt, rsqrt, relu, gelu, silu, sigmoid, tanh.
#include <cmath>
#include <utility>

#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/elementwise_op.h"
#include "dtensor/ops/elementwise_ops.h"

namespace dtensor {
namespace ops {
namespace {

constexpr ArgSpec kGeluArgs[] = {{"tanh", ArgKind::kBool, "false"}};
constexpr auto kTanh = KeyOf<ArgKind::kBool>(kGeluArgs, "tanh");

using Unary = absl::StatusOr<Tensor> (*)(const Tensor&);
using Out = absl::StatusOr<DTensor>;

OpDef UnaryOp(absl::string_view name, absl::string_view summary, Unary f,
              Linearity linearity, BackwardFn backward) {
  return ElementwiseOp(
      name, summary, 1, {},
      [f](absl::Span<const Tensor> in, const OpArgs&) { return f(in[0]); },
      linearity, std::move(backward));
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

OpDef MakeNeg() {
  return UnaryOp(
      "neg", "-a", dtensor::Neg, Linearity::kSumFirst,
      UnaryBackward([](const DTensor&, const DTensor&, const DTensor& g,
                       const OpArgs&) { return Neg(g); }));
}

OpDef MakeAbs() {
  return UnaryOp("abs", "|a|", dtensor::Abs, Linearity::kNone,
                 UnaryBackward([](const DTensor& a, const DTensor&,
                                  const DTensor& g, const OpArgs&) -> Out {
                   // sign(a): 0 at 0.
                   DT_ASSIGN_OR_RETURN(DTensor positive, Gt(a, 0.0));
                   DT_ASSIGN_OR_RETURN(DTensor negative, Lt(a, 0.0));
                   DT_ASSIGN_OR_RETURN(positive, MaskAs(positive, g));
                   DT_ASSIGN_OR_RETURN(negative, MaskAs(negative, g));
                   DT_ASSIGN_OR_RETURN(DTensor sign, Sub(positive, negative));
                   return Mul(g, sign);
                 }));
}

OpDef MakeExp() {
  return UnaryOp(
      "exp", "e ** a", dtensor::Exp, Linearity::kMonotoneFirst,
      UnaryBackward([](const DTensor&, const DTensor& out, const DTensor& g,
                       const OpArgs&) { return Mul(g, out); }));
}

OpDef MakeLog() {
  return UnaryOp(
      "log", "ln a", dtensor::Log, Linearity::kNone,
      UnaryBackward([](const DTensor& a, const DTensor&, const DTensor& g,
                       const OpArgs&) { return Div(g, a); }));
}

OpDef MakeSqrt() {
  return UnaryOp("sqrt", "sqrt(a)", dtensor::Sqrt, Linearity::kNone,
                 UnaryBackward([](const DTensor&, const DTensor& out,
                                  const DTensor& g, const OpArgs&) -> Out {
                   DT_ASSIGN_OR_RETURN(DTensor twice, Mul(out, 2.0));
                   return Div(g, twice);
                 }));
}

OpDef MakeRsqrt() {
  return UnaryOp("rsqrt", "1 / sqrt(a)", dtensor::Rsqrt, Linearity::kNone,
                 UnaryBackward([](const DTensor&, const DTensor& out,
                                  const DTensor& g, const OpArgs&) -> Out {
                   // -out^3 / 2.
                   DT_ASSIGN_OR_RETURN(DTensor d, Pow(out, 3.0));
                   DT_ASSIGN_OR_RETURN(d, Mul(d, -0.5));
                   return Mul(g, d);
                 }));
}

OpDef MakeRelu() {
  return UnaryOp("relu", "max(a, 0)", dtensor::Relu, Linearity::kMonotoneFirst,
                 UnaryBackward([](const DTensor& a, const DTensor&,
                                  const DTensor& g, const OpArgs&) -> Out {
                   DT_ASSIGN_OR_RETURN(DTensor positive, Gt(a, 0.0));
                   DT_ASSIGN_OR_RETURN(positive, MaskAs(positive, g));
                   return Mul(g, positive);
                 }));
}

OpDef MakeGelu() {
  return ElementwiseOp(
      "gelu", "GELU (erf, or the tanh approximation with tanh=true)", 1,
      kGeluArgs,
      [](absl::Span<const Tensor> in, const OpArgs& args) {
        return dtensor::Gelu(in[0], args.Get(kTanh) ? GeluApproximation::kTanh
                                                    : GeluApproximation::kNone);
      },
      Linearity::kNone, UnaryBackward(GeluGrad));
}

OpDef MakeSilu() {
  return UnaryOp("silu", "a * sigmoid(a)", dtensor::Silu, Linearity::kNone,
                 UnaryBackward(SiluGrad));
}

OpDef MakeSigmoid() {
  return UnaryOp("sigmoid", "1 / (1 + e ** -a)", dtensor::Sigmoid,
                 Linearity::kMonotoneFirst,
                 UnaryBackward([](const DTensor&, const DTensor& out,
                                  const DTensor& g, const OpArgs&) -> Out {
                   DT_ASSIGN_OR_RETURN(DTensor d, OneMinus(out));
                   DT_ASSIGN_OR_RETURN(d, Mul(d, out));
                   return Mul(g, d);
                 }));
}

OpDef MakeTanh() {
  return UnaryOp("tanh", "tanh(a)", dtensor::Tanh, Linearity::kMonotoneFirst,
                 UnaryBackward([](const DTensor&, const DTensor& out,
                                  const DTensor& g, const OpArgs&) -> Out {
                   DT_ASSIGN_OR_RETURN(DTensor d, Mul(out, out));
                   DT_ASSIGN_OR_RETURN(d, OneMinus(d));
                   return Mul(g, d);
                 }));
}

DTENSOR_ELEMENTWISE_UNARY(DTENSOR_OP_DEF_ACCESSOR, )
const OpDef& GeluDef() { return StaticOpDef<MakeGelu>(); }

}  // namespace

// The functions of elementwise.h's unary list call their op.
#define DT_DEFINE_UNARY(T, Name)               \
  absl::StatusOr<T> Name(const T& a) {         \
    return CallElementwise(Name##Def(), {&a}); \
  }
DTENSOR_ELEMENTWISE_UNARY(DT_DEFINE_UNARY, DTensor)
#undef DT_DEFINE_UNARY

absl::StatusOr<DTensor> Gelu(const DTensor& a,
                             GeluApproximation approximation) {
  OpArgs args;
  args.AddBool(approximation == GeluApproximation::kTanh);
  return CallElementwise(GeluDef(), {&a}, args);
}

std::vector<const OpDef*> UnaryElementwiseOps() {
  return {&GeluDef(), DTENSOR_ELEMENTWISE_UNARY(DTENSOR_OP_DEF_ADDRESS, )};
}

}  // namespace ops
}  // namespace dtensor
