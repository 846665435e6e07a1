#ifndef DTENSOR_OPS_ELEMENTWISE_OPS_H_
#define DTENSOR_OPS_ELEMENTWISE_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace ops {

// The tensor layer's elementwise ops (dtensor/tensor/elementwise.h: the same
// dtype rules and NumPy broadcasting) on DTensors. Outputs follow the inputs'
// shards: the tensors iterating an output dim are sharded alike on it, a
// broadcast (size-1) dim is never sharded. Partial inputs pass through where
// the op commutes with the reduction, the other inputs being Replicate:
//   add, sub              Partial(sum | avg) on both inputs
//   mul                   Partial(sum | avg) on either input
//   div, neg, mul/div by a scalar   Partial(sum | avg) on the first input
//   add/sub a scalar      Partial(avg | max | min)
//   maximum / minimum     Partial(max) / Partial(min) on both inputs
//   relu, exp, sigmoid, tanh (nondecreasing)   Partial(max | min)
//   where                 any Partial on a and b (cond Replicate)
// The other ops (log, gelu, pow, comparisons, ...) need non-Partial inputs.
//
// Registry names: add sub mul div pow maximum minimum eq ne lt le gt ge
// (two tensors); add_scalar sub_scalar mul_scalar div_scalar pow_scalar
// eq_scalar ne_scalar lt_scalar le_scalar gt_scalar ge_scalar (a tensor and
// the kScalar argument "other"); neg abs exp log sqrt rsqrt relu gelu (bool
// argument "tanh") silu sigmoid tanh; where (cond, a, b); swiglu (a, b);
// swiglu_backward (grad, a, b; two outputs).

// Add, Sub, Mul, Div, Pow, Maximum, Minimum; the comparisons Eq, Ne, Lt, Le,
// Gt, Ge (giving kBool); the scalar forms (a, double b) of Add, Sub, Mul, Div,
// Pow and the comparisons; the unary Neg, Abs, Exp, Log, Sqrt, Rsqrt, Relu,
// Silu, Sigmoid, Tanh: the lists of dtensor/tensor/elementwise.h, on DTensor.
DTENSOR_DECLARE_ELEMENTWISE(DTensor)

absl::StatusOr<DTensor> Gelu(const DTensor& a, GeluApproximation approximation =
                                                   GeluApproximation::kNone);
// grad * silu'(x) in one pass (registry name silu_backward, PyTorch's
// silu_backward): what Silu's backward runs. Linear in `grad`, so a Partial
// gradient stays Partial.
absl::StatusOr<DTensor> SiluBackward(const DTensor& grad, const DTensor& x);

// silu(a) * b in one kernel (registry name swiglu; dtensor/tensor/swiglu.h):
// the gate of a SwiGLU feed-forward. a and b have one shape (no
// broadcasting). Linear in b: a Partial b (a Replicate) stays Partial.
// Its backward is swiglu_backward.
absl::StatusOr<DTensor> SwiGlu(const DTensor& a, const DTensor& b);

// The gradients of SwiGlu(a, b) for its output's gradient.
struct SwiGluGradients {
  DTensor a;
  DTensor b;
};

// Both gradients of SwiGlu in one kernel (registry name swiglu_backward;
// inputs grad, a, b of one shape). Linear in `grad`: a Partial gradient stays
// Partial.
absl::StatusOr<SwiGluGradients> SwiGluBackward(const DTensor& grad,
                                               const DTensor& a,
                                               const DTensor& b);

// cond ? a : b, all three broadcast together.
// Errors: `cond` not kBool; what the binary ops report.
absl::StatusOr<DTensor> Where(const DTensor& cond, const DTensor& a,
                              const DTensor& b);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> ElementwiseOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_ELEMENTWISE_OPS_H_
