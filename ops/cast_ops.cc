#include "dtensor/ops/cast_ops.h"

#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/rule_helpers.h"

namespace dtensor {
namespace ops {
namespace {

// The Partial ops that commute with converting `from` to `to`: sums where
// no term is rounded (the same dtype, or a wider floating one), max and min
// where the conversion is nondecreasing (all but a wrapping i64 -> i32 and
// x != 0 to bool).
std::vector<ReduceOp> PartialsThrough(DType from, DType to) {
  if (from == to) return AnyReduceOps();
  std::vector<ReduceOp> ops;
  if (IsFloatingPoint(from) && IsFloatingPoint(to) &&
      ElementSize(to) > ElementSize(from)) {
    ops = LinearReduceOps();
  }
  if (to != DType::kBool && !(from == DType::kI64 && to == DType::kI32)) {
    ops.push_back(ReduceOp::kMax);
    ops.push_back(ReduceOp::kMin);
  }
  return ops;
}

// to(dtype): the target DType as its integer value.
constexpr ArgSpec kToArgs[] = {{"dtype", ArgKind::kInt}};
constexpr auto kDType = KeyOf<ArgKind::kInt>(kToArgs, "dtype");

absl::StatusOr<DType> TargetDType(const OpArgs& args) {
  const int64_t value = args.Get(kDType);
  if (value < 0 || value > static_cast<int64_t>(DType::kBool)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "to: dtype ", value,
        " is not a DType (0 f32, 1 f64, 2 bf16, 3 f16, 4 i32, 5 i64, 6 bool)"));
  }
  return static_cast<DType>(value);
}

OpDef MakeTo() {
  OpDef def = NamedOpDef("to", "convert to another dtype", kToArgs);
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(DType dtype, TargetDType(args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), dtype}};
  };
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    spec.loops = {{IdentityLoops(rank)}, {IdentityLoops(rank)}};
    std::vector<ReduceOp> through =
        PartialsThrough(ctx.inputs[0]->dtype(), ctx.outputs[0].dtype);
    if (!through.empty()) spec.partial_rules = {{{0}, std::move(through)}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel([](absl::Span<const Tensor> in,
                              const OpArgs& args) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(DType dtype, TargetDType(args));
    return in[0].To(dtype);
  });
  // The gradient converted back; none through a non-floating dtype.
  def.backward = [](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    const DType from = call.inputs[0].dtype();
    if (!IsFloatingPoint(from) || !IsFloatingPoint(call.outputs[0].dtype())) {
      return InputGrads(1);
    }
    DT_ASSIGN_OR_RETURN(DTensor dx, To(call.grad_outputs[0], from));
    return InputGrads{std::move(dx)};
  };
  return def;
}

const OpDef& ToDef() { return StaticOpDef<MakeTo>(); }

}  // namespace

absl::StatusOr<DTensor> To(const DTensor& x, DType dtype) {
  const DTensor* in[] = {&x};
  OpArgs args;
  args.AddInt(static_cast<int64_t>(dtype));
  return DispatchOne(ToDef(), in, args);
}

std::vector<const OpDef*> CastOps() { return {&ToDef()}; }

}  // namespace ops
}  // namespace dtensor
