#ifndef DTENSOR_OPS_OP_DEF_H_
#define DTENSOR_OPS_OP_DEF_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/strategy.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The local results of a kernel, one per output.
using OpLocals = absl::InlinedVector<Tensor, 1>;

struct Propagation;

// What a kernel sees besides its local inputs: the call's arguments, the
// propagation that chose its strategy (the global specs of its inputs in the
// shardings the strategy gave them, and of its outputs), and the runtime (its
// rank, and the process groups for a kernel that communicates itself).
class KernelContext {
 public:
  KernelContext(const OpArgs& args, const Propagation& propagation,
                const Runtime& runtime)
      : args_(args), propagation_(propagation), runtime_(runtime) {}

  const OpArgs& args() const { return args_; }
  const Propagation& propagation() const { return propagation_; }
  const OpStrategy& strategy() const;
  // The spec of input i as the kernel gets it; null for an absent input.
  const DTensorSpec* input(size_t i) const;
  const DTensorSpec& output(size_t j) const;
  const Runtime& runtime() const { return runtime_; }

 private:
  const OpArgs& args_;
  const Propagation& propagation_;
  const Runtime& runtime_;
};

// The shapes and dtypes of an op's outputs from its inputs' global specs
// (null for an absent optional input) and arguments. It validates the call
// the way the local kernel would (shapes, dtypes, dims), so that a
// metadata-only run rejects what a real one rejects.
// Errors: the kernel's shape, dtype and dim errors, naming the op and the bad
// value.
using InferFn = std::function<absl::StatusOr<std::vector<TensorMeta>>(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args)>;

// Every strategy the op supports for the call (see dtensor/ops/strategy.h,
// dtensor/ops/einsum_strategy.h). The engine drops those whose input shardings
// cannot be reached from the inputs' shardings, or that give a Partial a dtype
// cannot reduce with (avg of integers, sum or avg of bools), and picks the
// cheapest of the rest. Only strategies that are correct for uneven shards may
// be returned.
using StrategyFn = std::function<absl::StatusOr<std::vector<OpStrategy>>(
    const StrategyContext& ctx)>;

// Runs the op on this rank's local shards (undefined for an absent input),
// laid out as ctx.strategy() says; returns one local tensor per output, of
// the shape the output's spec gives this rank. A kernel that communicates
// (OpStrategy::kernel_comms) does so through ctx.runtime().groups().
using KernelFn = std::function<absl::StatusOr<OpLocals>(
    const KernelContext& ctx, absl::Span<const Tensor> inputs)>;

// The floating-point operations an op's kernel did on this rank, from the
// local inputs as the kernel got them (undefined where an optional one was
// absent), its local outputs and the call's arguments. The profiler
// (dtensor/ops/op_profile.h) reports TFLOP/s for ops that define it (matmuls,
// attention) and GB/s over the bytes of the local inputs and outputs for the
// others (elementwise ops, reductions): the one place an op states its work.
using FlopsFn = std::function<double(absl::Span<const Tensor> inputs,
                                     absl::Span<const Tensor> outputs,
                                     const OpArgs& args)>;

// A forward call as autograd sees it: inputs (undefined where an optional one
// was absent), arguments, outputs, and the gradients of the outputs
// (undefined where an output got none).
struct BackwardCall {
  absl::Span<const DTensor> inputs;
  const OpArgs& args;
  absl::Span<const DTensor> outputs;
  absl::Span<const DTensor> grad_outputs;
};

// The gradients of an op's inputs, one per input (undefined where an input
// gets none), written with ops, so that they are sharded and propagated like
// any other call. Autograd (dtensor/nn/autograd.h) calls it with at least one
// output gradient defined (so the only one of a one-output op), each of its
// output's shape and dtype.
// Requires: the returned gradients have their inputs' shapes and dtypes (the
// helpers of dtensor/ops/backward_helpers.h sum broadcast dims back).
using BackwardFn =
    std::function<absl::StatusOr<std::vector<DTensor>>(const BackwardCall&)>;

// Everything the engine knows about one op. Ops are static singletons
// (function-local statics in their family's file) listed in the registry;
// the functions may capture what the ops of one family differ in.
struct OpDef {
  // The registry name ("mm", "add", "sum") and one line for listings.
  absl::string_view name;
  absl::string_view summary;
  // Tensor inputs; the last `num_optional_inputs` may be absent.
  int num_inputs = 1;
  int num_optional_inputs = 0;
  int num_outputs = 1;
  // The last `num_saved_outputs` outputs exist for the backward only
  // (cross_entropy's count and log-sum-exp): the engine does not count
  // completing their Partials into a strategy's cost (docs/ops.md).
  int num_saved_outputs = 0;
  // Inputs whose data the kernel never reads: only their sharding steers the
  // choice (embedding_backward's table: the gradient comes out laid out like
  // it). A strategy's cost still counts their redistribution, as the price
  // of the sharding it picks for them, but the propagation carries no plan for
  // them: no data moves and no collective is recorded; the kernel gets their
  // local tensor as it is (not in the strategy's sharding) and must not read
  // it.
  std::vector<int> spec_only_inputs;
  // The non-tensor arguments, in call order.
  std::vector<ArgSpec> args;
  InferFn infer;
  StrategyFn strategies;
  KernelFn kernel;
  // Empty where the op has no gradient definition yet.
  BackwardFn backward;
  // Empty: the profiler counts the op by the bytes it moves.
  FlopsFn flops;
};

// An OpDef named `name`, listed with `summary`, taking the non-tensor
// arguments `args`, the other fields at their defaults: what each family's
// definitions start from.
inline OpDef NamedOpDef(absl::string_view name, absl::string_view summary,
                        absl::Span<const ArgSpec> args = {}) {
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.args.assign(args.begin(), args.end());
  return def;
}

// The OpDef that Make(args...) returns, built on first use and never
// destroyed (the registry and autograd tapes keep pointers to it): the body
// of a family's accessors, as in
//   const OpDef& EmbeddingDef() { return StaticOpDef<MakeEmbedding>(); }
template <auto Make, auto... Args>
const OpDef& StaticOpDef() {
  static const OpDef* def = new OpDef(Make(Args...));
  return *def;
}

}  // namespace dtensor

#endif  // DTENSOR_OPS_OP_DEF_H_
