#include "examples/fused_op/silu_mul_op.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/registry.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace examples {
namespace {

constexpr absl::string_view kName = "silu_mul";

// The local computation, the same on shards as on whole tensors.
absl::StatusOr<Tensor> SiluMulLocal(absl::Span<const Tensor> in,
                                    const OpArgs&) {
  DT_ASSIGN_OR_RETURN(Tensor activated, dtensor::Silu(in[0]));
  return dtensor::Mul(activated, in[1]);
}

// Output shape and dtype; rejects what the kernel would reject.
absl::StatusOr<std::vector<TensorMeta>> Infer(
    absl::Span<const DTensorSpec* const> in, const OpArgs& args) {
  if (in[0]->shape() != in[1]->shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": gate ", ShapeToString(in[0]->shape()), " and up ",
        ShapeToString(in[1]->shape()), " differ in shape"));
  }
  DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(kName, SiluMulLocal, in, args));
  return std::vector<TensorMeta>{{in[0]->shape(), dtype}};
}

// Every dim is a loop dim of both inputs and the output; up's Partial(sum |
// avg) passes with gate Replicate.
absl::StatusOr<std::vector<OpStrategy>> Strategies(const StrategyContext& ctx) {
  const int rank = static_cast<int>(ctx.outputs[0].shape.size());
  std::vector<int> loops(rank);
  std::iota(loops.begin(), loops.end(), 0);
  EinsumSpec spec;
  spec.num_loops = rank;
  spec.loops = {{loops, loops}, {loops}};
  spec.partial_rules = {{{1}, {ReduceOp::kSum, ReduceOp::kAvg}}};
  return EinsumStrategies(ctx, spec);
}

// d/dup = g silu(gate); d/dgate = g up s (1 + gate (1 - s)), s = sigmoid(gate).
absl::StatusOr<std::vector<DTensor>> Backward(const BackwardCall& call) {
  const DTensor& gate = call.inputs[0];
  const DTensor& up = call.inputs[1];
  const DTensor& g = call.grad_outputs[0];
  DT_ASSIGN_OR_RETURN(DTensor activated, ops::Silu(gate));
  DT_ASSIGN_OR_RETURN(DTensor d_up, ops::Mul(g, activated));
  DT_ASSIGN_OR_RETURN(DTensor s, ops::Sigmoid(gate));
  DT_ASSIGN_OR_RETURN(DTensor d, ops::Mul(s, -1.0));
  DT_ASSIGN_OR_RETURN(d, ops::Add(d, 1.0));
  DT_ASSIGN_OR_RETURN(d, ops::Mul(d, gate));
  DT_ASSIGN_OR_RETURN(d, ops::Add(d, 1.0));
  DT_ASSIGN_OR_RETURN(d, ops::Mul(d, s));
  DT_ASSIGN_OR_RETURN(d, ops::Mul(d, up));
  DT_ASSIGN_OR_RETURN(DTensor d_gate, ops::Mul(g, d));
  return std::vector<DTensor>{std::move(d_gate), std::move(d_up)};
}

// silu_mul takes no arguments. An op that does declares a constexpr schema
// with one key per argument and reads them by key (dtensor/ops/op_args.h,
// docs/ops.md):
//   constexpr ArgSpec kScaleArgs[] = {{"alpha", ArgKind::kScalar, "1"}};
//   constexpr auto kAlpha = KeyOf<ArgKind::kScalar>(kScaleArgs, "alpha");
//   OpDef def = NamedOpDef(kName, "...", kScaleArgs);
//   ... args.Get(kAlpha) ...
OpDef MakeSiluMul() {
  OpDef def = NamedOpDef(
      kName, "silu(gate) * up (a fused SwiGLU activation; an example)");
  def.num_inputs = 2;
  def.infer = Infer;
  def.strategies = Strategies;
  def.kernel = LocalKernel(SiluMulLocal);
  def.backward = Backward;
  return def;
}

// Known to OpRegistry::Global() in every binary that links this library.
const OpRegistration kRegistration(&SiluMulDef());

}  // namespace

const OpDef& SiluMulDef() { return StaticOpDef<MakeSiluMul>(); }

absl::StatusOr<DTensor> SiluMul(const DTensor& gate, const DTensor& up) {
  const DTensor* inputs[] = {&gate, &up};
  return DispatchOne(SiluMulDef(), inputs, OpArgs());
}

}  // namespace examples
}  // namespace dtensor
