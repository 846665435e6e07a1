#ifndef DTENSOR_OPS_ELEMENTWISE_OP_H_
#define DTENSOR_OPS_ELEMENTWISE_OP_H_

#include <functional>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"

// How the elementwise family (dtensor/ops/elementwise_ops.h) builds and calls
// its ops, shared by its two halves: the binary, scalar and where ops
// (elementwise_ops.cc) and the unary ops (elementwise_unary_ops.cc).
namespace dtensor {
namespace ops {

// Which Partial inputs an op passes through (see elementwise_ops.h).
enum class Linearity {
  kNone,
  kSumJoint,       // add, sub
  kSumEach,        // mul
  kSumFirst,       // div, neg, mul/div by a scalar, swiglu_backward
  kSumSecond,      // swiglu (linear in its second input)
  kAffineFirst,    // add/sub a scalar
  kMonotoneFirst,  // relu, exp, sigmoid, tanh
  kMaxJoint,       // maximum
  kMinJoint,       // minimum
  kSelect,         // where
};

// The op `name` of `arity` inputs broadcast together, computing `fn` on the
// local shards: its output has the broadcast shape and the dtype `fn` gives;
// its strategies shard the inputs that iterate an output dim alike on it and
// pass Partial inputs through as `linearity` says.
// Requires: `name` and `summary` outlive the op (literals).
// Errors (of the op): shapes that do not broadcast, naming the op and the
// shapes; what `fn` reports.
OpDef ElementwiseOp(absl::string_view name, absl::string_view summary,
                    int arity, absl::Span<const ArgSpec> args, LocalFn fn,
                    Linearity linearity, BackwardFn backward);

// The local computation of an elementwise op with several outputs, one
// local tensor each.
using MultiLocalFn = std::function<absl::StatusOr<OpLocals>(
    absl::Span<const Tensor> inputs, const OpArgs& args)>;

// ElementwiseOp with `num_outputs` outputs, each of the broadcast shape and
// sharded alike; Partial inputs pass through to every output as `linearity`
// says. Its dtype check probes the first output.
OpDef ElementwiseMultiOutputOp(absl::string_view name,
                               absl::string_view summary, int arity,
                               int num_outputs, MultiLocalFn fn,
                               Linearity linearity, BackwardFn backward);

// d out / d a times the output's gradient `g`, for a one-input op.
using UnaryGrad = std::function<absl::StatusOr<DTensor>(
    const DTensor& a, const DTensor& out, const DTensor& g,
    const OpArgs& args)>;

// The backward of a one-input op whose input's gradient `grad` gives.
BackwardFn UnaryBackward(UnaryGrad grad);

// `cond` as 0 / 1 in the dtype of `like`.
absl::StatusOr<DTensor> MaskAs(const DTensor& cond, const DTensor& like);

// 1 - x.
absl::StatusOr<DTensor> OneMinus(const DTensor& x);

// silu''(a) = s (1 - s) (2 + a (1 - 2 s)), s = sigmoid(a): what the
// backward of silu_backward and swiglu_backward need.
absl::StatusOr<DTensor> SiluSecondDerivative(const DTensor& a);

// The one output of the op `def` on `in` with `args`: what the family's
// functions run.
// Errors: what dispatching `def` reports.
absl::StatusOr<DTensor> CallElementwise(
    const OpDef& def, std::initializer_list<const DTensor*> in,
    const OpArgs& args = OpArgs());

// The OpDefs of the unary half (elementwise_unary_ops.cc) and of the fused
// SwiGLU (elementwise_swiglu_ops.cc), part of ElementwiseOps().
std::vector<const OpDef*> UnaryElementwiseOps();
std::vector<const OpDef*> SwiGluOps();

// For the X-macro lists of dtensor/tensor/elementwise.h, whose ops the family
// files build in Make<Name><Form>() (Form empty, or Scalar for the scalar
// forms): the accessor <Name><Form>Def() of each, and its address as an
// element of the family's list. One list names both, so no op can be left out
// of the registry.
#define DTENSOR_OP_DEF_ACCESSOR(Form, Name) \
  const OpDef& Name##Form##Def() { return StaticOpDef<Make##Name##Form>(); }
#define DTENSOR_OP_DEF_ADDRESS(Form, Name) &Name##Form##Def(),

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_ELEMENTWISE_OP_H_
