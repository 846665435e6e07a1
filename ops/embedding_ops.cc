// embedding and embedding_backward: rows of a table that may be sharded by
// rows (vocab parallel) or columns, and the table's gradient.
#include "dtensor/ops/embedding_ops.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace ops {
namespace {

// Index tensors are i32 or i64.
absl::Status CheckIndexDType(const DTensorSpec& indices, absl::string_view op) {
  if (indices.dtype() == DType::kI32 || indices.dtype() == DType::kI64) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": indices have dtype ", std::string(DTypeName(indices.dtype())),
      "; i32 or i64 is required"));
}

// The einsum spec of embedding, or with `backward` of embedding_backward, on
// ctx's inputs, less its partial rules. Loops, for k index dims: the index
// dims 0..k-1, the table's rows k (contracted) and columns k + 1. embedding
// maps (indices, table) to rows [indices..., dim]; embedding_backward maps
// (indices, grad rows, table) to the table gradient [num, dim].
EinsumSpec EmbeddingSpec(const StrategyContext& ctx, bool backward) {
  const int k = static_cast<int>(ctx.inputs[0]->ndim());
  std::vector<int> rows = IdentityLoops(k);
  rows.push_back(k + 1);
  const std::vector<int> table = {k, k + 1};
  EinsumSpec spec;
  spec.num_loops = k + 2;
  if (backward) {
    spec.loops.inputs = {IdentityLoops(k), std::move(rows), table};
    spec.loops.outputs = {table};
  } else {
    spec.loops.inputs = {IdentityLoops(k), table};
    spec.loops.outputs = {std::move(rows)};
  }
  spec.contraction = {ReduceOp::kSum};
  return spec;
}

// Loops: the indices' dims, then the table's rows (contracted: a row-sharded
// table gives Partial(sum)) and columns.
// The tensor layer's checks (a probe of ones would look up a row out of
// range).
absl::StatusOr<std::vector<TensorMeta>> EmbeddingInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs&) {
  const DTensorSpec& indices = *inputs[0];
  const DTensorSpec& table = *inputs[1];
  if (!IsFloatingPoint(table.dtype()) || table.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding: table must be a floating [num, dim], got ",
                     std::string(DTypeName(table.dtype())), " ",
                     ShapeToString(table.shape())));
  }
  DT_RETURN_IF_ERROR(CheckIndexDType(indices, "embedding"));
  Shape out = indices.shape();
  out.push_back(table.shape()[1]);
  return std::vector<TensorMeta>{{std::move(out), table.dtype()}};
}

absl::StatusOr<std::vector<OpStrategy>> EmbeddingStrategies(
    const StrategyContext& ctx) {
  EinsumSpec spec = EmbeddingSpec(ctx, /*backward=*/false);
  // A lookup selects table elements: it commutes with every reduction.
  spec.partial_rules = {{{1}, AnyReduceOps()}};
  return EinsumStrategies(ctx, spec);
}

// Rows of this rank's table block [first, first + rows) for the indices
// inside it, zero rows for the others; indices are checked against the
// global row count (CUDA indices on the device, deferred: index_checks.h).
// The mask and the local indices are elementwise ops on the indices' device,
// and the output lives on the table's: a Partial(sum) of these terms is
// all-reduced there.
absl::StatusOr<Tensor> MaskedEmbedding(const Tensor& indices,
                                       const Tensor& table, int64_t first,
                                       int64_t num) {
  DT_RETURN_IF_ERROR(CheckIndicesInRange(indices, num, "embedding"));
  Shape out_shape = indices.shape();
  out_shape.push_back(table.size(1));
  const int64_t rows = table.size(0);
  if (rows == 0) {
    return Tensor::Zeros(out_shape, table.dtype(), table.device());
  }
  DT_ASSIGN_OR_RETURN(Tensor local,
                      dtensor::Sub(indices, static_cast<double>(first)));
  DT_ASSIGN_OR_RETURN(const Tensor from_first, dtensor::Ge(local, 0));
  DT_ASSIGN_OR_RETURN(const Tensor before_end,
                      dtensor::Lt(local, static_cast<double>(rows)));
  // And of two bools.
  DT_ASSIGN_OR_RETURN(Tensor inside, dtensor::Minimum(from_first, before_end));
  DT_ASSIGN_OR_RETURN(
      local, dtensor::Where(inside, local, Tensor::Scalar(0, local.dtype())));
  DT_ASSIGN_OR_RETURN(const Tensor rows_found,
                      dtensor::Embedding(local, table));
  DT_ASSIGN_OR_RETURN(inside, inside.Unsqueeze(-1));
  return dtensor::Where(inside, rows_found, Tensor::Scalar(0, table.dtype()));
}

absl::StatusOr<OpLocals> EmbeddingKernel(const KernelContext& ctx,
                                         absl::Span<const Tensor> inputs) {
  const DTensorSpec& table_spec = *ctx.input(1);
  const int64_t num = table_spec.shape()[0];
  DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, table_spec));
  Tensor out;
  if (block.shape[0] == num) {
    DT_ASSIGN_OR_RETURN(out, dtensor::Embedding(inputs[0], inputs[1]));
  } else {
    DT_ASSIGN_OR_RETURN(
        out, MaskedEmbedding(inputs[0], inputs[1], block.offset[0], num));
  }
  return OpLocals{std::move(out)};
}

// dtable: the scatter-add of the output rows' gradients (embedding_backward),
// laid out like the table where the gradient allows.
absl::StatusOr<InputGrads> EmbeddingGrad(const BackwardCall& call) {
  DT_ASSIGN_OR_RETURN(DTensor dtable, ops::EmbeddingBackward(
                                          call.inputs[0], call.grad_outputs[0],
                                          call.inputs[1]));
  return InputGrads{DTensor(), std::move(dtable)};
}

// ---- embedding_backward: (indices [*], grad [*, dim], table [num, dim]) ->
// [num, dim]; the table gives only its shape and sharding. ----

absl::StatusOr<std::vector<TensorMeta>> EmbeddingBackwardInfer(
    absl::Span<const DTensorSpec* const> inputs, const OpArgs&) {
  const DTensorSpec& indices = *inputs[0];
  const DTensorSpec& grad = *inputs[1];
  const DTensorSpec& table = *inputs[2];
  DT_RETURN_IF_ERROR(CheckIndexDType(indices, "embedding_backward"));
  Shape want = indices.shape();
  want.push_back(table.ndim() == 2 ? table.shape()[1] : 0);
  if (!IsFloatingPoint(grad.dtype()) || table.ndim() != 2 ||
      grad.shape() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding_backward: grad must be a floating [indices..., dim] for "
        "indices ",
        ShapeToString(indices.shape()), " and a table [num, dim]; got grad ",
        std::string(DTypeName(grad.dtype())), " ", ShapeToString(grad.shape()),
        ", table ", ShapeToString(table.shape())));
  }
  return std::vector<TensorMeta>{{table.shape(), grad.dtype()}};
}

// Loops: the index dims 0..k-1 (contracted: sharding them gives a
// Partial(sum) table gradient), the table row k and the row width k + 1. The
// table iterates both as the output does, so each strategy wants the table
// sharded as the gradient it gives (Replicate where that is Partial), and
// the cost of bringing the table there (counted, never paid: the table is a
// spec-only input) prices the gradient's later move to the table's sharding:
// the cheapest is the table's own sharding where the indices and grad allow it
// (rows: each rank adds only the rows of its block, indices and grad
// Replicate).
absl::StatusOr<std::vector<OpStrategy>> EmbeddingBackwardStrategies(
    const StrategyContext& ctx) {
  EinsumSpec spec = EmbeddingSpec(ctx, /*backward=*/true);
  // Linear in grad.
  spec.partial_rules = {{{1}, {ReduceOp::kSum, ReduceOp::kAvg}}};
  return EinsumStrategies(ctx, spec);
}

// This rank's block of the table gradient: its rows of the output spec
// (indices checked against the whole table's rows, as embedding's are).
absl::StatusOr<OpLocals> EmbeddingBackwardKernel(
    const KernelContext& ctx, absl::Span<const Tensor> inputs) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, ctx.output(0)));
  DT_ASSIGN_OR_RETURN(
      Tensor dtable,
      dtensor::EmbeddingBackward(inputs[0], inputs[1], ctx.output(0).shape()[0],
                                 block.offset[0], block.shape[0]));
  return OpLocals{std::move(dtable)};
}

// Linear in grad: its gradient looks the incoming rows up again. None for
// the table, whose values it does not read.
absl::StatusOr<InputGrads> EmbeddingBackwardBackward(const BackwardCall& call) {
  DT_ASSIGN_OR_RETURN(DTensor dgrad,
                      Embedding(call.inputs[0], call.grad_outputs[0]));
  return InputGrads{DTensor(), std::move(dgrad), DTensor()};
}

OpDef MakeEmbeddingBackward() {
  OpDef def = NamedOpDef(
      "embedding_backward",
      "table gradient [num, dim] of embedding: grad rows scatter-added at "
      "their indices, laid out like the table");
  def.num_inputs = 3;
  def.spec_only_inputs = {2};
  def.infer = EmbeddingBackwardInfer;
  def.strategies = EmbeddingBackwardStrategies;
  def.kernel = EmbeddingBackwardKernel;
  def.backward = EmbeddingBackwardBackward;
  return def;
}

OpDef MakeEmbedding() {
  OpDef def =
      NamedOpDef("embedding", "rows of table [num, dim] at integer indices");
  def.num_inputs = 2;
  def.infer = EmbeddingInfer;
  def.strategies = EmbeddingStrategies;
  def.kernel = EmbeddingKernel;
  def.backward = EmbeddingGrad;
  return def;
}

const OpDef& EmbeddingDef() { return StaticOpDef<MakeEmbedding>(); }

const OpDef& EmbeddingBackwardDef() {
  return StaticOpDef<MakeEmbeddingBackward>();
}

}  // namespace

absl::StatusOr<DTensor> Embedding(const DTensor& indices,
                                  const DTensor& table) {
  const DTensor* in[] = {&indices, &table};
  return DispatchOne(EmbeddingDef(), in, OpArgs());
}

absl::StatusOr<DTensor> EmbeddingBackward(const DTensor& indices,
                                          const DTensor& grad,
                                          const DTensor& table) {
  const DTensor* in[] = {&indices, &grad, &table};
  return DispatchOne(EmbeddingBackwardDef(), in, OpArgs());
}
std::vector<const OpDef*> EmbeddingOps() {
  return {&EmbeddingDef(), &EmbeddingBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
