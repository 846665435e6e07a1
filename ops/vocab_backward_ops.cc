// cross_entropy_backward of the vocabulary family (dtensor/ops/vocab_ops.h):
// cross_entropy's gradient of the logits as one op, whose local kernel is the
// tensor layer's fused backward (dtensor/tensor/loss_backward.h: one pass
// over the logits in their dtype), laid out like the forward; and its own
// backward (double differentiation), written with ops.
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_op.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/tensor/loss_backward.h"

namespace dtensor {
namespace ops {
namespace {

constexpr absl::string_view kName = "cross_entropy_backward";

// Inputs: logits, target, log_sum_exp, grad, count (a mean's). The forward's
// checks on logits and target; log_sum_exp, grad and count of the forward's
// outputs' metas.
absl::StatusOr<std::vector<TensorMeta>> BackwardInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(const std::vector<TensorMeta> forward,
                      CrossEntropyMetas(kName, inputs.subspan(0, 2), args));
  const bool mean = ReductionOf(args) == Reduction::kMean;
  if (mean && inputs[4] == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": a mean needs the count"));
  }
  const struct {
    const char* name;
    const DTensorSpec* spec;
    const TensorMeta& meta;
  } operands[] = {{"log_sum_exp", inputs[2], forward[2]},
                  {"grad", inputs[3], forward[0]},
                  {"count", mean ? inputs[4] : nullptr, forward[1]}};
  for (const auto& operand : operands) {
    if (operand.spec == nullptr) continue;
    const DTensorSpec& spec = *operand.spec;
    if (spec.shape() != operand.meta.shape ||
        spec.dtype() != operand.meta.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": ", operand.name, " is ",
                       std::string(DTypeName(spec.dtype())), " ",
                       ShapeToString(spec.shape()), "; the forward's is ",
                       std::string(DTypeName(operand.meta.dtype)), " ",
                       ShapeToString(operand.meta.shape)));
    }
  }
  return std::vector<TensorMeta>{{inputs[0]->shape(), inputs[0]->dtype()}};
}

// One loop per dim of the logits: the target, the log-sum-exp and a per-row
// grad iterate the leading ones, a reduced grad and the count none. So a mesh
// dim replicates, shards a leading dim (every row tensor alike), or shards
// the classes (the logits alone, each rank its block); and grad
// Partial(sum | avg) with the rest Replicate gives dlogits Partial alike
// (dlogits is linear in grad).
absl::StatusOr<std::vector<OpStrategy>> BackwardStrategies(
    const StrategyContext& ctx) {
  const int64_t rank = ctx.inputs[0]->ndim();
  std::vector<int> rows(rank - 1);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<int> all = rows;
  all.push_back(static_cast<int>(rank - 1));
  const bool per_row = ReductionOf(ctx.args) == Reduction::kNone;
  EinsumSpec spec;
  spec.num_loops = static_cast<int>(rank);
  spec.loops.inputs = {
      all, rows, rows, per_row ? rows : std::vector<int>{}, {}};
  spec.loops.outputs = {all};
  spec.partial_rules = {{{3}, LinearReduceOps()}};
  return EinsumStrategies(ctx, spec);
}

// The tensor layer's fused backward on this rank's block viewed as rows
// [local rows, local classes], the class offset its block's.
absl::StatusOr<OpLocals> BackwardKernel(const KernelContext& ctx,
                                        absl::Span<const Tensor> inputs) {
  const DTensorSpec& spec = *ctx.input(0);
  const int64_t rank = spec.ndim();
  DT_ASSIGN_OR_RETURN(const ShardBlock block, BlockOfRank(ctx, spec));
  const Tensor& logits = inputs[0];
  const int64_t rows = inputs[1].numel();
  const Reduction reduction = ReductionOf(ctx.args());
  CrossEntropyGradInputs in;
  DT_ASSIGN_OR_RETURN(in.logits, logits.Reshape({rows, logits.shape().back()}));
  DT_ASSIGN_OR_RETURN(in.target, inputs[1].To(logits.device()));
  DT_ASSIGN_OR_RETURN(in.target, in.target.To(DType::kI64));
  DT_ASSIGN_OR_RETURN(in.target, in.target.Reshape({rows}));
  DT_ASSIGN_OR_RETURN(in.log_sum_exp, inputs[2].Reshape({rows}));
  // A gradient seeded on the host moves to the logits' device.
  DT_ASSIGN_OR_RETURN(in.grad, inputs[3].To(logits.device()));
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(in.grad, in.grad.Reshape({rows}));
  }
  if (reduction == Reduction::kMean) {
    DT_ASSIGN_OR_RETURN(in.count, inputs[4].To(logits.device()));
  }
  DT_ASSIGN_OR_RETURN(
      const Tensor dlogits,
      dtensor::CrossEntropyBackward(in, reduction, ctx.args().Get(kIgnoreIndex),
                                    block.offset[rank - 1]));
  DT_ASSIGN_OR_RETURN(Tensor out, dlogits.Reshape(logits.shape()));
  return OpLocals{std::move(out)};
}

// The one-hot rows of `indices` over the classes of dim `dim` of `like`, in
// `dtype`: element [..., c] is 1 where index == c, the classes laid out like
// that dim (class-sharded logits give a class-sharded one-hot).
absl::StatusOr<DTensor> OneHot(const DTensor& indices, const DTensor& like,
                               int64_t dim, DType dtype) {
  DT_ASSIGN_OR_RETURN(DTensor classes, ArangeAlong(like, dim, indices.dtype()));
  DT_ASSIGN_OR_RETURN(DTensor column, Unsqueeze(indices, -1));
  DT_ASSIGN_OR_RETURN(DTensor hit, Eq(column, classes));
  return To(hit, dtype);
}

// Per row: counted / count (a mean's) or counted, counted = 1 where the
// target is not ignore_index, in `dtype`.
absl::StatusOr<DTensor> RowScale(const BackwardCall& call, DType dtype) {
  DT_ASSIGN_OR_RETURN(
      DTensor counted,
      Ne(call.inputs[1], static_cast<double>(call.args.Get(kIgnoreIndex))));
  DT_ASSIGN_OR_RETURN(counted, To(counted, dtype));
  if (ReductionOf(call.args) != Reduction::kMean) return counted;
  DT_ASSIGN_OR_RETURN(const DTensor count, To(call.inputs[4], dtype));
  return Div(counted, count);
}

// With p = exp(x - lse) and s the row scale (RowScale), the op is
// G = (p - onehot) g s. For G's gradient U: x gets U g s p; lse gets minus
// its sum over the classes; g gets rowsum(U (p - onehot)) s, summed over the
// rows unless g is per row. None to the target and the count (integers).
absl::StatusOr<InputGrads> BackwardBackward(const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& g = call.inputs[3];
  const DType dtype = call.inputs[2].dtype();
  const int64_t last[] = {-1};
  DT_ASSIGN_OR_RETURN(const DTensor u, To(call.grad_outputs[0], dtype));
  DT_ASSIGN_OR_RETURN(DTensor p, To(x, dtype));
  DT_ASSIGN_OR_RETURN(const DTensor lse_column, Unsqueeze(call.inputs[2], -1));
  DT_ASSIGN_OR_RETURN(p, Sub(p, lse_column));
  DT_ASSIGN_OR_RETURN(p, Exp(p));
  DT_ASSIGN_OR_RETURN(const DTensor scale, RowScale(call, dtype));
  DT_ASSIGN_OR_RETURN(const DTensor g_in, To(g, dtype));
  DT_ASSIGN_OR_RETURN(DTensor weight, Mul(scale, g_in));
  DT_ASSIGN_OR_RETURN(weight, Unsqueeze(weight, -1));
  DT_ASSIGN_OR_RETURN(DTensor dx, Mul(u, p));
  DT_ASSIGN_OR_RETURN(dx, Mul(dx, weight));
  DT_ASSIGN_OR_RETURN(DTensor dlse, Sum(dx, last));
  DT_ASSIGN_OR_RETURN(dlse, Neg(dlse));
  DT_ASSIGN_OR_RETURN(const DTensor onehot,
                      OneHot(call.inputs[1], x, x.spec().ndim() - 1, dtype));
  DT_ASSIGN_OR_RETURN(DTensor dg, Sub(p, onehot));
  DT_ASSIGN_OR_RETURN(dg, Mul(u, dg));
  DT_ASSIGN_OR_RETURN(dg, Sum(dg, last));
  DT_ASSIGN_OR_RETURN(dg, Mul(dg, scale));
  if (ReductionOf(call.args) != Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(dg, Sum(dg));
  }
  DT_ASSIGN_OR_RETURN(dx, To(dx, x.dtype()));
  DT_ASSIGN_OR_RETURN(dg, To(dg, g.dtype()));
  return InputGrads{std::move(dx), DTensor(), std::move(dlse), std::move(dg),
                    DTensor()};
}

OpDef MakeCrossEntropyBackward() {
  OpDef def = NamedOpDef(
      kName,
      "cross_entropy's gradient of the logits (inputs logits, target, "
      "log_sum_exp, grad, count?) in one pass over them",
      kCrossEntropyArgs);
  def.num_inputs = 5;
  def.num_optional_inputs = 1;
  def.infer = BackwardInfer;
  def.strategies = BackwardStrategies;
  def.kernel = BackwardKernel;
  def.backward = BackwardBackward;
  return def;
}

}  // namespace

const OpDef& CrossEntropyBackwardDef() {
  return StaticOpDef<MakeCrossEntropyBackward>();
}

absl::StatusOr<DTensor> CrossEntropyBackward(
    const DTensor& logits, const DTensor& target, const DTensor& log_sum_exp,
    const DTensor& grad, const DTensor& count, Reduction reduction,
    int64_t ignore_index) {
  const DTensor* in[] = {&logits, &target, &log_sum_exp, &grad, &count};
  OpArgs args;
  args.AddInt(static_cast<int64_t>(reduction)).AddInt(ignore_index);
  return DispatchOne(CrossEntropyBackwardDef(), in, args);
}

}  // namespace ops
}  // namespace dtensor
