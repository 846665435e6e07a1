#include "dtensor/ops/reduction_ops.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <numeric>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/reduction.h"

namespace dtensor {
namespace ops {
namespace {

enum class Kind { kSum, kMean, kMax, kMin, kMinMax, kSumSquares };

// Every reduction's; empty dims reduce all.
constexpr ArgSpec kReduceArgs[] = {{"dims", ArgKind::kInts, ""},
                                   {"keepdim", ArgKind::kBool, "false"}};
constexpr auto kDims = KeyOf<ArgKind::kInts>(kReduceArgs, "dims");
constexpr auto kKeepdim = KeyOf<ArgKind::kBool>(kReduceArgs, "keepdim");

// Which dims of a rank-`rank` tensor `dims` reduces (empty: all). Requires
// dims the tensor layer accepts (the probe checked them); a 0-d tensor
// reduces nothing.
std::vector<bool> ReducedMask(absl::Span<const int64_t> dims, int64_t rank) {
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) {
    absl::StatusOr<int64_t> n = NormalizeDim(d, rank);
    if (n.ok()) mask[*n] = true;
  }
  return mask;
}

Shape ReducedShape(const Shape& shape, const std::vector<bool>& mask,
                   bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t ReducedCount(const Shape& shape, const std::vector<bool>& mask) {
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) count *= shape[d];
  }
  return count;
}

// A tensor on `device` filled with the identity of `op` (max: -inf or the
// lowest value; min: +inf or the highest), the term of a rank whose shard of
// the reduced dims is empty. Filled on the host (an integer's extremes are no
// doubles for Fill) and moved: the collectives that combine it with the other
// ranks' terms work on the input's device.
absl::StatusOr<Tensor> IdentityOf(ReduceOp op, Shape shape, DType dtype,
                                  Device device) {
  const bool max = op == ReduceOp::kMax;
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(std::move(shape), dtype));
  DT_RETURN_IF_ERROR(DispatchDType(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      // Integers and bool: their own extremes (bool: false and true).
      std::fill_n(out.data<T>(), out.numel(),
                  max ? std::numeric_limits<T>::lowest()
                      : std::numeric_limits<T>::max());
      return absl::OkStatus();
    } else {
      return out.Fill(max ? -std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::infinity());
    }
  }));
  return out.To(device);
}

// Max or min of a local shard; the identity where its reduced extent is
// empty (the tensor layer rejects that).
absl::StatusOr<Tensor> ExtremeLocal(ReduceOp op, const Tensor& x,
                                    absl::Span<const int64_t> dims,
                                    bool keepdim) {
  const std::vector<bool> mask = ReducedMask(dims, x.dim());
  if (ReducedCount(x.shape(), mask) == 0) {
    return IdentityOf(op, ReducedShape(x.shape(), mask, keepdim), x.dtype(),
                      x.device());
  }
  return op == ReduceOp::kMax ? dtensor::Max(x, dims, keepdim)
                              : dtensor::Min(x, dims, keepdim);
}

// The tensor-layer function that validates a call of `kind` (dims, dtype).
LocalFn ProbeOf(Kind kind) {
  return [kind](absl::Span<const Tensor> in,
                const OpArgs& args) -> absl::StatusOr<Tensor> {
    switch (kind) {
      case Kind::kSum:
        return dtensor::Sum(in[0], args.Get(kDims), args.Get(kKeepdim));
      case Kind::kMean:
        return dtensor::Mean(in[0], args.Get(kDims), args.Get(kKeepdim));
      case Kind::kMax:
        return dtensor::Max(in[0], args.Get(kDims), args.Get(kKeepdim));
      case Kind::kSumSquares:
        return dtensor::SumOfSquares(in[0], args.Get(kDims),
                                     args.Get(kKeepdim));
      default:
        return dtensor::Min(in[0], args.Get(kDims), args.Get(kKeepdim));
    }
  };
}

std::vector<ReduceOp> ContractionOf(Kind kind) {
  switch (kind) {
    case Kind::kSum:
    case Kind::kMean:
    case Kind::kSumSquares:
      return {ReduceOp::kSum};
    case Kind::kMax:
      return {ReduceOp::kMax};
    case Kind::kMin:
      return {ReduceOp::kMin};
    case Kind::kMinMax:
      return {ReduceOp::kMin, ReduceOp::kMax};
  }
  return {};
}

std::vector<EinsumSpec::PartialRule> RulesOf(Kind kind) {
  switch (kind) {
    case Kind::kSum:
    case Kind::kMean:
      return {{{0}, {ReduceOp::kSum, ReduceOp::kAvg}}};
    case Kind::kMax:
      return {{{0}, {ReduceOp::kMax}}};
    case Kind::kMin:
      return {{{0}, {ReduceOp::kMin}}};
    case Kind::kMinMax:
    case Kind::kSumSquares:  // Squares of Partial terms do not add up.
      return {};
  }
  return {};
}

absl::StatusOr<OpLocals> ReduceLocal(Kind kind, const KernelContext& ctx,
                                     const Tensor& x) {
  const absl::Span<const int64_t> dims = ctx.args().Get(kDims);
  const bool keepdim = ctx.args().Get(kKeepdim);
  switch (kind) {
    case Kind::kSum: {
      DT_ASSIGN_OR_RETURN(Tensor sum, dtensor::Sum(x, dims, keepdim));
      return OpLocals{std::move(sum)};
    }
    case Kind::kMean: {
      // Each rank's share of the global mean: its local sum over the global
      // count (a Partial(sum) of these is the mean, however uneven the
      // shards).
      const Shape& global = ctx.input(0)->shape();
      const int64_t count = ReducedCount(
          global, ReducedMask(dims, static_cast<int64_t>(global.size())));
      DT_ASSIGN_OR_RETURN(Tensor sum, dtensor::Sum(x, dims, keepdim));
      DT_ASSIGN_OR_RETURN(Tensor mean,
                          dtensor::Div(sum, static_cast<double>(count)));
      return OpLocals{std::move(mean)};
    }
    case Kind::kMax:
    case Kind::kMin: {
      DT_ASSIGN_OR_RETURN(
          Tensor out,
          ExtremeLocal(kind == Kind::kMax ? ReduceOp::kMax : ReduceOp::kMin, x,
                       dims, keepdim));
      return OpLocals{std::move(out)};
    }
    case Kind::kSumSquares: {
      DT_ASSIGN_OR_RETURN(Tensor sum, dtensor::SumOfSquares(x, dims, keepdim));
      return OpLocals{std::move(sum)};
    }
    case Kind::kMinMax: {
      DT_ASSIGN_OR_RETURN(Tensor min,
                          ExtremeLocal(ReduceOp::kMin, x, dims, keepdim));
      DT_ASSIGN_OR_RETURN(Tensor max,
                          ExtremeLocal(ReduceOp::kMax, x, dims, keepdim));
      return OpLocals{std::move(min), std::move(max)};
    }
  }
  return absl::InternalError("unknown reduction");
}

// ---- Backward definitions. ----

// The gradient `g` of a reduction's output with the reduced dims of x back as
// size 1 (the keepdim shape), so that it broadcasts against x.
absl::StatusOr<DTensor> WithKeptDims(const DTensor& g, const DTensor& x,
                                     const OpArgs& args) {
  if (args.Get(kKeepdim)) return g;
  const std::vector<bool> mask = ReducedMask(args.Get(kDims), x.spec().ndim());
  return Reshape(g, ReducedShape(x.shape(), mask, /*keepdim=*/true));
}

// d x of an extreme (max or min) `out` whose gradient is `g`: g goes to the
// elements equal to the extreme, split evenly among ties (as PyTorch's amax).
absl::StatusOr<DTensor> ExtremeGrad(const DTensor& x, const DTensor& out,
                                    const DTensor& g, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(DTensor kept_out, WithKeptDims(out, x, args));
  DT_ASSIGN_OR_RETURN(DTensor kept_g, WithKeptDims(g, x, args));
  DT_ASSIGN_OR_RETURN(DTensor hit, Eq(x, kept_out));
  DT_ASSIGN_OR_RETURN(hit, To(hit, x.dtype()));
  DT_ASSIGN_OR_RETURN(DTensor ties,
                      Sum(hit, args.Get(kDims), /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(DTensor share, Div(kept_g, ties));
  return Mul(hit, share);
}

absl::StatusOr<InputGrads> ReduceBackward(Kind kind, const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  if (kind == Kind::kMinMax) {
    DTensor dx;
    for (size_t j = 0; j < 2; ++j) {
      if (!call.grad_outputs[j].defined()) continue;
      DT_ASSIGN_OR_RETURN(
          DTensor part,
          ExtremeGrad(x, call.outputs[j], call.grad_outputs[j], call.args));
      if (dx.defined()) {
        DT_ASSIGN_OR_RETURN(dx, Add(dx, part));
      } else {
        dx = std::move(part);
      }
    }
    return InputGrads{std::move(dx)};
  }
  const DTensor& g = call.grad_outputs[0];
  if (kind == Kind::kMax || kind == Kind::kMin) {
    DT_ASSIGN_OR_RETURN(DTensor dx,
                        ExtremeGrad(x, call.outputs[0], g, call.args));
    return InputGrads{std::move(dx)};
  }
  DT_ASSIGN_OR_RETURN(DTensor kept, WithKeptDims(g, x, call.args));
  if (kind == Kind::kSumSquares) {
    // d sum(x^2) = 2 x g, in x's dtype.
    DT_ASSIGN_OR_RETURN(kept, To(kept, x.dtype()));
    DT_ASSIGN_OR_RETURN(DTensor twice, Mul(x, 2.0));
    DT_ASSIGN_OR_RETURN(DTensor dx, Mul(twice, kept));
    return InputGrads{std::move(dx)};
  }
  if (kind == Kind::kMean) {
    const int64_t count = ReducedCount(
        x.shape(), ReducedMask(call.args.Get(kDims), x.spec().ndim()));
    DT_ASSIGN_OR_RETURN(kept, Div(kept, static_cast<double>(count)));
  }
  DT_ASSIGN_OR_RETURN(DTensor dx, Expand(kept, x.shape()));
  return InputGrads{std::move(dx)};
}

OpDef ReductionOp(absl::string_view name, absl::string_view summary,
                  Kind kind) {
  OpDef def = NamedOpDef(name, summary, kReduceArgs);
  def.num_inputs = 1;
  def.num_outputs = kind == Kind::kMinMax ? 2 : 1;
  def.infer =
      [name, kind, probe = ProbeOf(kind)](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(name, probe, inputs, args));
    const Shape& shape = inputs[0]->shape();
    const std::vector<bool> mask =
        ReducedMask(args.Get(kDims), inputs[0]->ndim());
    const bool extreme =
        kind == Kind::kMax || kind == Kind::kMin || kind == Kind::kMinMax;
    if (extreme && ReducedCount(shape, mask) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": the reduced extent (dims [",
                       absl::StrJoin(args.Get(kDims), ", "), "] of shape ",
                       ShapeToString(shape), ") is empty"));
    }
    const TensorMeta out{ReducedShape(shape, mask, args.Get(kKeepdim)), dtype};
    return std::vector<TensorMeta>(kind == Kind::kMinMax ? 2 : 1, out);
  };
  def.strategies = [kind](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    const std::vector<bool> mask = ReducedMask(ctx.args.Get(kDims), rank);
    const bool keepdim = ctx.args.Get(kKeepdim);
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    std::vector<int> in_loops(rank);
    std::iota(in_loops.begin(), in_loops.end(), 0);
    std::vector<int> out_loops;
    for (int d = 0; d < rank; ++d) {
      if (!mask[d]) {
        out_loops.push_back(d);
      } else if (keepdim) {
        out_loops.push_back(kNoLoop);
      }
    }
    spec.loops.inputs = {std::move(in_loops)};
    spec.loops.outputs.assign(kind == Kind::kMinMax ? 2 : 1, out_loops);
    spec.contraction = ContractionOf(kind);
    spec.partial_rules = RulesOf(kind);
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = [kind](const KernelContext& ctx,
                      absl::Span<const Tensor> inputs) {
    return ReduceLocal(kind, ctx, inputs[0]);
  };
  def.backward = [kind](const BackwardCall& call) {
    return ReduceBackward(kind, call);
  };
  return def;
}

// One maker and accessor per op: `Make<Name>()` is ReductionOp's op of
// the arguments, `<Name>Def()` builds it once.
#define DTENSOR_REDUCTION_DEF(Name, name, summary, kind)          \
  OpDef Make##Name() { return ReductionOp(name, summary, kind); } \
  const OpDef& Name##Def() { return StaticOpDef<Make##Name>(); }
DTENSOR_REDUCTION_DEF(Sum, "sum", "sum over dims", Kind::kSum)
DTENSOR_REDUCTION_DEF(Mean, "mean", "mean over dims (floating dtypes)",
                      Kind::kMean)
DTENSOR_REDUCTION_DEF(Amax, "amax", "max over dims", Kind::kMax)
DTENSOR_REDUCTION_DEF(Amin, "amin", "min over dims", Kind::kMin)
DTENSOR_REDUCTION_DEF(Max, "max", "max over dims (values, as amax)", Kind::kMax)
DTENSOR_REDUCTION_DEF(Min, "min", "min over dims (values, as amin)", Kind::kMin)
DTENSOR_REDUCTION_DEF(Aminmax, "aminmax", "(min, max) over dims", Kind::kMinMax)
DTENSOR_REDUCTION_DEF(SumSquares, "sum_squares",
                      "sum of squares over dims (f64, floating inputs)",
                      Kind::kSumSquares)
#undef DTENSOR_REDUCTION_DEF

absl::StatusOr<OpOutputs> Call(const OpDef& def, const DTensor& x,
                               absl::Span<const int64_t> dims, bool keepdim) {
  const DTensor* in[] = {&x};
  OpArgs args;
  args.AddInts(dims).AddBool(keepdim);
  return Dispatch(def, in, args);
}

absl::StatusOr<DTensor> CallOne(const OpDef& def, const DTensor& x,
                                absl::Span<const int64_t> dims, bool keepdim) {
  DT_ASSIGN_OR_RETURN(OpOutputs out, Call(def, x, dims, keepdim));
  return std::move(out[0]);
}

}  // namespace

// The single-output reductions call their op's definition.
#define DTENSOR_DEFINE_REDUCTION(Name, Def)                                    \
  absl::StatusOr<DTensor> Name(const DTensor& x,                               \
                               absl::Span<const int64_t> dims, bool keepdim) { \
    return CallOne(Def(), x, dims, keepdim);                                   \
  }
DTENSOR_DEFINE_REDUCTION(Sum, SumDef)
DTENSOR_DEFINE_REDUCTION(SumOfSquares, SumSquaresDef)
DTENSOR_DEFINE_REDUCTION(Mean, MeanDef)
DTENSOR_DEFINE_REDUCTION(Amax, AmaxDef)
DTENSOR_DEFINE_REDUCTION(Amin, AminDef)
DTENSOR_DEFINE_REDUCTION(Max, MaxDef)
DTENSOR_DEFINE_REDUCTION(Min, MinDef)
#undef DTENSOR_DEFINE_REDUCTION

absl::StatusOr<std::pair<DTensor, DTensor>> Aminmax(
    const DTensor& x, absl::Span<const int64_t> dims, bool keepdim) {
  DT_ASSIGN_OR_RETURN(OpOutputs out, Call(AminmaxDef(), x, dims, keepdim));
  return std::make_pair(std::move(out[0]), std::move(out[1]));
}

std::vector<const OpDef*> ReductionOps() {
  return {&SumDef(), &MeanDef(), &AmaxDef(),    &AminDef(),
          &MaxDef(), &MinDef(),  &AminmaxDef(), &SumSquaresDef()};
}

}  // namespace ops
}  // namespace dtensor
