#include "dtensor/ops/vocab_ops.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/functional.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_op.h"
#include "dtensor/tensor/cuda/loss_body.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/loss_cuda.h"
#include "dtensor/tensor/reduction.h"
#include "dtensor/tensor/vector_exp.h"

namespace dtensor {
namespace ops {
namespace {

using internal::CheckIndexInRange;
using internal::ReadIndices;

// ---- cross_entropy. ----

constexpr absl::string_view kCrossEntropy = "cross_entropy";

}  // namespace

absl::StatusOr<std::vector<TensorMeta>> CrossEntropyMetas(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args) {
  const DTensorSpec& logits = *inputs[0];
  const DTensorSpec& target = *inputs[1];
  if (!IsFloatingPoint(logits.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": logits must have a floating dtype, got ",
                     std::string(DTypeName(logits.dtype()))));
  }
  if (target.dtype() != DType::kI32 && target.dtype() != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": target has dtype ", std::string(DTypeName(target.dtype())),
        "; i32 or i64 is required"));
  }
  const int64_t rank = logits.ndim();
  if (rank < 1 || target.ndim() != rank - 1 ||
      !std::equal(target.shape().begin(), target.shape().end(),
                  logits.shape().begin())) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": logits ", ShapeToString(logits.shape()), " and target ",
        ShapeToString(target.shape()),
        " must be [d0, ..., dk, C] and [d0, ..., dk] (k >= -1: [C] and [])"));
  }
  const int64_t reduction = args.Get(kReduction);
  if (reduction < 0 || reduction > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": reduction ", reduction,
                     " is not 0 (none), 1 (mean) or 2 (sum)"));
  }
  const Shape out =
      ReductionOf(args) == Reduction::kNone ? target.shape() : Shape{};
  return std::vector<TensorMeta>{
      {out, logits.dtype()},
      {Shape{}, DType::kI64},
      {target.shape(), ComputeDTypeOf(logits.dtype())}};
}

namespace {

// The mesh dims a cross-entropy kernel with logits laid out by `logits`
// reduces over: those sharding the classes (loss parallel) and those
// sharding the rows, any leading dim (the count of a mean), each ascending.
struct LossGroups {
  std::vector<int64_t> class_dims;
  std::vector<int64_t> batch_dims;
};

LossGroups LossGroupsOf(const Sharding& logits) {
  const int64_t rank = logits.tensor_rank();
  LossGroups groups{MeshDimsOf(logits, rank - 1), {}};
  for (int64_t d = 0; d + 1 < rank; ++d) {
    for (int64_t m : MeshDimsOf(logits, d)) groups.batch_dims.push_back(m);
  }
  std::sort(groups.batch_dims.begin(), groups.batch_dims.end());
  return groups;
}

// The collectives of the kernel below for logits of `shape` laid out by
// `logits`: the max and the (sum of exp, target logit) all-reduces over the
// class dims, sized by the largest local batch (the product of the leading
// dims' first chunks, which the chunk rule makes the largest), and a mean's
// 16-byte loss sum and count (f64) over the batch dims.
std::vector<KernelComm> CrossEntropyComms(
    const Sharding& logits, const Shape& shape, DType dtype,
    Reduction reduction, absl::Span<const int64_t> mesh_shape) {
  const LossGroups groups = LossGroupsOf(logits);
  std::vector<KernelComm> comms;
  if (!groups.class_dims.empty()) {
    const std::vector<int64_t> origin(mesh_shape.size(), 0);
    int64_t batch = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) {
      batch *=
          NestedChunk(shape[d], logits.MeshDimsSharding(d), mesh_shape, origin)
              .size;
    }
    const double bytes =
        static_cast<double>(batch * ElementSize(ComputeDTypeOf(dtype)));
    comms.push_back({CommKind::kAllReduce, groups.class_dims, bytes});
    comms.push_back({CommKind::kAllReduce, groups.class_dims, 2 * bytes});
  }
  if (reduction == Reduction::kMean && !groups.batch_dims.empty()) {
    comms.push_back({CommKind::kAllReduce, groups.batch_dims,
                     static_cast<double>(2 * sizeof(double))});
  }
  return comms;
}

// Per mesh dim: replicate; shard a leading dim d, any of them (rows are
// independent; target alike; the loss sharded, Partial(sum) once summed,
// complete for a mean, whose kernel all-reduces the loss sum with the count
// in one collective; the count complete for a mean, else Partial(sum) of the
// local counts; the log-sum-exp sharded like the rows); shard the classes
// (target Replicate, outputs complete). With `keep_class_shards` (loss
// parallel), the mesh dims that shard the logits' classes have only the
// last option.
absl::StatusOr<std::vector<OpStrategy>> CrossEntropyStrategies(
    const StrategyContext& ctx, bool keep_class_shards) {
  const DTensorSpec& logits = *ctx.inputs[0];
  const int64_t rank = logits.ndim();
  const Reduction reduction = ReductionOf(ctx.args);
  const bool per_sample = reduction == Reduction::kNone;
  // Loop d is tensor dim d of the logits; the target and the per-row
  // outputs iterate the leading ones.
  LoopDims loops;
  std::vector<int> rows(rank - 1);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<int> logit_loops = rows;
  logit_loops.push_back(static_cast<int>(rank - 1));
  loops.inputs = {logit_loops, rows};
  loops.outputs = {per_sample ? rows : std::vector<int>{}, {}, rows};
  const Placement r = Placement::Replicate();
  const Placement partial_sum = Placement::Partial(ReduceOp::kSum);
  std::vector<DimStrategy> options = {{{r, r}, {r, r, r}, {}}};
  // A mean all-reduces its sum with the count: complete at once.
  const bool mean = reduction == Reduction::kMean;
  for (int64_t d = 0; d + 1 < rank; ++d) {
    const Placement by_row = Placement::Shard(d);
    options.push_back({{by_row, by_row},
                       {per_sample ? by_row : (mean ? r : partial_sum),
                        mean ? r : partial_sum, by_row},
                       {}});
  }
  options.push_back({{Placement::Shard(rank - 1), r}, {r, r, r}, {}});
  std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                   options);
  if (keep_class_shards) {
    for (int64_t m : MeshDimsOf(logits.sharding(), rank - 1)) {
      candidates[m] = {options.back()};
    }
  }
  DT_ASSIGN_OR_RETURN(std::vector<OpStrategy> strategies,
                      CombineMeshDims(ctx, candidates, loops));
  for (OpStrategy& s : strategies) {
    s.kernel_comms = CrossEntropyComms(
        s.inputs[0], logits.shape(), logits.dtype(), reduction, ctx.mesh_shape);
  }
  return strategies;
}

// What the kernel computes per row of this rank, complete over the classes,
// as f64 [2, rows] on the logits' device: row 0 the losses (0 for an ignored
// target), row 1 the log-sum-exps of the logits (for every row, ignored or
// not: the backward's softmax is exp(logit - lse)).
//
// The host loop over contiguous CPU logits of element type T, a row at a
// time in the compute dtype C (one row converted, never a copy of all the
// logits), with the class group's all-reduces of C tensors; the finish is
// dtensor/tensor/cuda/loss_body.h's, which the device path shares.
template <typename T>
absl::StatusOr<Tensor> RowResultsOf(
    const KernelContext& ctx, const Tensor& logits,
    const std::vector<int64_t>& targets, int64_t class_offset,
    const std::shared_ptr<Communicator>& group) {
  using C = ComputeType<T>;
  const int64_t ignore_index = ctx.args().Get(kIgnoreIndex);
  const int64_t n = logits.size(0);
  const int64_t c = logits.size(1);
  const T* x = logits.data<T>();
  std::vector<C> converted(std::is_same_v<T, C> ? 0 : c);
  // Row i of the logits in C.
  const auto row_of = [&](int64_t i) -> const C* {
    if constexpr (std::is_same_v<T, C>) {
      return x + i * c;
    } else {
      for (int64_t j = 0; j < c; ++j) {
        converted[j] = static_cast<C>(x[i * c + j]);
      }
      return converted.data();
    }
  };
  const DType dtype = CppToDType<C>();
  DT_ASSIGN_OR_RETURN(Tensor row_max, Tensor::Empty({n}, dtype));
  C* max = row_max.data<C>();
  for (int64_t i = 0; i < n; ++i) {
    const C* row = row_of(i);
    max[i] = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < c; ++j) max[i] = std::max(max[i], row[j]);
  }
  if (group != nullptr) {
    DT_RETURN_IF_ERROR(AllReduceAnywhere(*group, row_max, ReduceOp::kMax));
  }
  // Row 0: sum of exp(logit - max) over this rank's classes; row 1: the
  // target logit where this rank owns the target class, else 0.
  DT_ASSIGN_OR_RETURN(Tensor sums, Tensor::Zeros({2, n}, dtype));
  C* sum_exp = sums.data<C>();
  C* picked = sum_exp + n;
  std::vector<C> exps(c);
  for (int64_t i = 0; i < n; ++i) {
    const C* row = row_of(i);
    ExpShifted(row, exps.data(), c, max[i]);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += exps[j];
    sum_exp[i] = static_cast<C>(sum);
    picked[i] = cuda::TargetLogitInBlock(cuda::Row<C>{row, c, 1}, targets[i],
                                         class_offset);
  }
  if (group != nullptr) {
    DT_RETURN_IF_ERROR(AllReduceAnywhere(*group, sums, ReduceOp::kSum));
  }
  DT_ASSIGN_OR_RETURN(Tensor rows, Tensor::Empty({2, n}, DType::kF64));
  double* out = rows.data<double>();
  for (int64_t i = 0; i < n; ++i) {
    const cuda::RowLoss loss = cuda::RowLossOf(max[i], sum_exp[i], picked[i],
                                               targets[i] == ignore_index);
    out[i] = loss.loss;
    out[n + i] = loss.log_sum_exp;
  }
  return rows;
}

// The device path over CUDA logits: the row kernel when this rank holds every
// class; else loss_body.h's steps (the row max, then the sums of exp and the
// target logits), each all-reduced over the class group in the compute dtype
// on the device, as the host loop's. `targets` is i64 [rows] on the logits'
// device. No logit leaves the device.
absl::StatusOr<Tensor> RowResultsOnDevice(
    const KernelContext& ctx, const Tensor& logits, const Tensor& targets,
    int64_t class_offset, const std::shared_ptr<Communicator>& group) {
  const int64_t ignore_index = ctx.args().Get(kIgnoreIndex);
  if (group == nullptr) {
    return cuda::CrossEntropyRowsOnDevice(logits, targets, ignore_index);
  }
  DT_ASSIGN_OR_RETURN(Tensor row_max, cuda::LossShardMaxOnDevice(logits));
  DT_RETURN_IF_ERROR(AllReduceAnywhere(*group, row_max, ReduceOp::kMax));
  DT_ASSIGN_OR_RETURN(Tensor sums, cuda::LossShardSumsOnDevice(
                                       logits, targets, row_max, class_offset));
  DT_RETURN_IF_ERROR(AllReduceAnywhere(*group, sums, ReduceOp::kSum));
  return cuda::LossShardFinishOnDevice(row_max, sums, targets, ignore_index);
}

// The communicator of the mesh dims sharding the classes; null when none do.
absl::StatusOr<std::shared_ptr<Communicator>> ClassGroup(
    const KernelContext& ctx, const LossGroups& groups) {
  if (groups.class_dims.empty()) return std::shared_ptr<Communicator>();
  return ctx.runtime().groups()->ForMeshDims(ctx.input(0)->mesh(),
                                             groups.class_dims);
}

// The rows' results of CPU logits [rows, classes] (`targets` their target
// values).
absl::StatusOr<Tensor> RowResultsOnHost(const KernelContext& ctx,
                                        const Tensor& logits,
                                        const std::vector<int64_t>& targets,
                                        int64_t class_offset,
                                        const LossGroups& groups) {
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> class_group,
                      ClassGroup(ctx, groups));
  const Tensor host = logits.Contiguous();
  return internal::DispatchFloatingDType(
      host.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        return RowResultsOf<decltype(tag)>(ctx, host, targets, class_offset,
                                           class_group);
      });
}

// The loss sum and count of non-ignored targets of the whole batch, from
// this rank's: one all-reduce of the f64 pair [sum, count] (f64 [2] on the
// sum's device; counts are exact in f64) over the batch dims.
absl::StatusOr<std::pair<Tensor, Tensor>> GlobalSumAndCount(
    const KernelContext& ctx, const LossGroups& groups, const Tensor& sum,
    const Tensor& count) {
  DT_ASSIGN_OR_RETURN(const Tensor count_f64, count.To(DType::kF64));
  DT_ASSIGN_OR_RETURN(const Tensor sum_f64, sum.To(DType::kF64));
  if (groups.batch_dims.empty()) return std::make_pair(sum_f64, count_f64);
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> batch_group,
                      ctx.runtime().groups()->ForMeshDims(ctx.input(0)->mesh(),
                                                          groups.batch_dims));
  DT_ASSIGN_OR_RETURN(Tensor pair, dtensor::Stack({sum_f64, count_f64}, 0));
  DT_RETURN_IF_ERROR(AllReduceAnywhere(*batch_group, pair, ReduceOp::kSum));
  DT_ASSIGN_OR_RETURN(Tensor total, pair.Select(0, 0));
  DT_ASSIGN_OR_RETURN(Tensor total_count, pair.Select(0, 1));
  return std::make_pair(std::move(total), std::move(total_count));
}

// A mean loss (f64 scalar) and the count of non-ignored targets (i64
// scalar), both of the whole batch and complete, from this rank's loss `sum`
// and `count`; 0 / 0 is NaN, like the tensor layer.
absl::StatusOr<std::pair<Tensor, Tensor>> MeanOf(const KernelContext& ctx,
                                                 const LossGroups& groups,
                                                 const Tensor& sum,
                                                 const Tensor& count) {
  DT_ASSIGN_OR_RETURN(auto totals, GlobalSumAndCount(ctx, groups, sum, count));
  DT_ASSIGN_OR_RETURN(Tensor mean, dtensor::Div(totals.first, totals.second));
  DT_ASSIGN_OR_RETURN(Tensor global_count, totals.second.To(DType::kI64));
  return std::make_pair(std::move(mean), std::move(global_count));
}

// The sum of this rank's CPU losses (f64 [rows]) as an f64 scalar, in row
// order (as the tensor layer's CrossEntropy).
absl::StatusOr<Tensor> TotalLoss(const Tensor& losses) {
  DT_ASSIGN_OR_RETURN(const std::vector<double> values,
                      losses.ToVector<double>());
  double total = 0;
  for (double loss : values) total += loss;
  return Tensor::Scalar(total, DType::kF64);
}

// The loss of a sum or none reduction, of this rank's CPU losses (f64
// [rows]).
absl::StatusOr<Tensor> ReducedLoss(const Tensor& losses, Reduction reduction,
                                   const Shape& target_shape, DType dtype) {
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(const Tensor shaped, losses.Reshape(target_shape));
    return shaped.To(dtype);
  }
  DT_ASSIGN_OR_RETURN(Tensor total, TotalLoss(losses));
  return total.To(dtype);
}

// This rank's logits [d0, ..., dk, C] as rows [d0 * ... * dk, C]: the
// target's local elements, which are laid out like the leading dims, count
// the rows (also where this rank holds no class).
absl::StatusOr<Tensor> AsRows(const Tensor& logits, const Tensor& target) {
  return logits.Reshape({target.numel(), logits.shape().back()});
}

// CrossEntropyKernel over CUDA logits, with nothing read on the host: the
// targets move to the logits' device and are range-checked there, deferred
// (dtensor/tensor/index_checks.h: a bad target is reported by the next read
// on this thread, at the latest the loss's); the count stays a device
// scalar, all-reduced there with the loss sum for a mean.
absl::StatusOr<OpLocals> CrossEntropyOnDevice(const KernelContext& ctx,
                                              absl::Span<const Tensor> inputs) {
  const DTensorSpec& spec = *ctx.input(0);
  const int64_t rank = spec.ndim();
  const double ignore_index = static_cast<double>(ctx.args().Get(kIgnoreIndex));
  Tensor logits = inputs[0];
  DT_ASSIGN_OR_RETURN(Tensor targets, inputs[1].To(logits.device()));
  DT_ASSIGN_OR_RETURN(targets, targets.To(DType::kI64));
  // Ignored targets are checked as class 0.
  DT_ASSIGN_OR_RETURN(const Tensor counted, dtensor::Ne(targets, ignore_index));
  DT_ASSIGN_OR_RETURN(
      const Tensor checked,
      dtensor::Where(counted, targets, Tensor::Scalar(0, DType::kI64)));
  DT_RETURN_IF_ERROR(
      CheckIndicesInRange(checked, spec.shape()[rank - 1], kCrossEntropy));
  DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, spec));
  DT_ASSIGN_OR_RETURN(logits, AsRows(logits, inputs[1]));
  const LossGroups groups = LossGroupsOf(spec.sharding());
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> class_group,
                      ClassGroup(ctx, groups));
  DT_ASSIGN_OR_RETURN(const Tensor row_targets,
                      targets.Reshape({logits.size(0)}));
  DT_ASSIGN_OR_RETURN(const Tensor rows,
                      RowResultsOnDevice(ctx, logits, row_targets,
                                         block.offset[rank - 1], class_group));
  const Reduction reduction = ReductionOf(ctx.args());
  DT_ASSIGN_OR_RETURN(const Tensor ones, counted.To(DType::kI64));
  DT_ASSIGN_OR_RETURN(Tensor count, dtensor::Sum(ones));
  const Shape& target_shape = inputs[1].shape();
  DT_ASSIGN_OR_RETURN(Tensor loss, rows.Select(0, 0));
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(loss, loss.Reshape(target_shape));
  } else {
    DT_ASSIGN_OR_RETURN(loss, dtensor::Sum(loss));
  }
  if (reduction == Reduction::kMean) {
    DT_ASSIGN_OR_RETURN(std::tie(loss, count),
                        MeanOf(ctx, groups, loss, count));
  }
  DT_ASSIGN_OR_RETURN(loss, loss.To(spec.dtype()));
  DT_ASSIGN_OR_RETURN(Tensor log_sum_exp, rows.Select(0, 1));
  DT_ASSIGN_OR_RETURN(log_sum_exp, log_sum_exp.Reshape(target_shape));
  DT_ASSIGN_OR_RETURN(log_sum_exp,
                      log_sum_exp.To(ComputeDTypeOf(spec.dtype())));
  return OpLocals{std::move(loss), std::move(count), std::move(log_sum_exp)};
}

// Outputs: the loss (complete for a mean); the count of non-ignored targets
// (global for a mean, this rank's otherwise: Partial(sum) over the batch
// dims); the rows' log-sum-exp.
absl::StatusOr<OpLocals> CrossEntropyKernel(const KernelContext& ctx,
                                            absl::Span<const Tensor> inputs) {
  if (cuda::OnCuda(inputs[0])) return CrossEntropyOnDevice(ctx, inputs);
  const DTensorSpec& spec = *ctx.input(0);
  const int64_t rank = spec.ndim();
  const int64_t classes = spec.shape()[rank - 1];
  const int64_t ignore_index = ctx.args().Get(kIgnoreIndex);
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> targets,
                      ReadIndices(inputs[1], kCrossEntropy, "target"));
  // Checked before any collective, so that every rank sharing these targets
  // fails alike.
  for (int64_t t : targets) {
    if (t != ignore_index) {
      DT_RETURN_IF_ERROR(CheckIndexInRange(t, classes, kCrossEntropy));
    }
  }
  DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, spec));
  DT_ASSIGN_OR_RETURN(const Tensor logits, AsRows(inputs[0], inputs[1]));
  const DType compute = ComputeDTypeOf(spec.dtype());
  const LossGroups groups = LossGroupsOf(spec.sharding());
  DT_ASSIGN_OR_RETURN(
      const Tensor rows,
      RowResultsOnHost(ctx, logits, targets, block.offset[rank - 1], groups));
  const Reduction reduction = ReductionOf(ctx.args());
  int64_t count =
      std::count_if(targets.begin(), targets.end(),
                    [ignore_index](int64_t t) { return t != ignore_index; });
  const Shape& target_shape = inputs[1].shape();
  DT_ASSIGN_OR_RETURN(const Tensor losses, rows.Select(0, 0));
  Tensor count_tensor = Tensor::Scalar(count, DType::kI64);
  Tensor loss;
  if (reduction == Reduction::kMean) {
    DT_ASSIGN_OR_RETURN(const Tensor total, TotalLoss(losses));
    DT_ASSIGN_OR_RETURN(std::tie(loss, count_tensor),
                        MeanOf(ctx, groups, total, count_tensor));
    DT_ASSIGN_OR_RETURN(loss, loss.To(spec.dtype()));
  } else {
    DT_ASSIGN_OR_RETURN(
        loss, ReducedLoss(losses, reduction, target_shape, spec.dtype()));
  }
  DT_ASSIGN_OR_RETURN(Tensor log_sum_exp, rows.Select(0, 1));
  DT_ASSIGN_OR_RETURN(log_sum_exp, log_sum_exp.Reshape(target_shape));
  DT_ASSIGN_OR_RETURN(log_sum_exp, log_sum_exp.To(compute));
  return OpLocals{std::move(loss), std::move(count_tensor),
                  std::move(log_sum_exp)};
}

// The fused cross_entropy_backward (vocab_backward_ops.cc) with the
// forward's log-sum-exp and, for a mean, its count: laid out like the rows
// and complete over the classes, they need no communication (class-sharded
// logits stay sharded).
absl::StatusOr<InputGrads> CrossEntropyGrad(const BackwardCall& call) {
  const Reduction reduction = ReductionOf(call.args);
  DT_ASSIGN_OR_RETURN(
      DTensor dlogits,
      CrossEntropyBackward(
          call.inputs[0], call.inputs[1], call.outputs[2], call.grad_outputs[0],
          reduction == Reduction::kMean ? call.outputs[1] : DTensor(),
          reduction, call.args.Get(kIgnoreIndex)));
  return InputGrads{std::move(dlogits), DTensor()};
}

// cross_entropy, or with `loss_parallel` its LossParallelScope variant.
OpDef MakeCrossEntropy(bool loss_parallel) {
  OpDef def = NamedOpDef(
      loss_parallel ? "cross_entropy_loss_parallel" : kCrossEntropy,
      loss_parallel
          ? "cross_entropy keeping class-sharded logits sharded"
          : "cross entropy of logits [..., C] against targets [...] (loss "
            "parallel on sharded C)",
      kCrossEntropyArgs);
  def.num_inputs = 2;
  def.num_outputs = 3;
  def.num_saved_outputs = 2;
  def.infer = [](absl::Span<const DTensorSpec* const> inputs,
                 const OpArgs& args) {
    return CrossEntropyMetas(kCrossEntropy, inputs, args);
  };
  def.strategies = [loss_parallel](const StrategyContext& ctx) {
    return CrossEntropyStrategies(ctx, loss_parallel);
  };
  def.kernel = CrossEntropyKernel;
  def.backward = CrossEntropyGrad;
  return def;
}

const OpDef& CrossEntropyDef() {
  return StaticOpDef<MakeCrossEntropy, /*loss_parallel=*/false>();
}

// Not listed in VocabOps: only CrossEntropy under a LossParallelScope calls
// it.
const OpDef& CrossEntropyLossParallelDef() {
  return StaticOpDef<MakeCrossEntropy, /*loss_parallel=*/true>();
}

// The LossParallelScopes living on this thread.
thread_local int loss_parallel_depth = 0;

// Whether some mesh dim shards the class (last) dim of `logits` (false for
// what is no valid logits: dispatch reports those).
bool ShardsClasses(const DTensor& logits) {
  const int64_t rank = logits.defined() ? logits.spec().ndim() : 0;
  return rank >= 1 && !MeshDimsOf(logits.sharding(), rank - 1).empty();
}

}  // namespace

absl::StatusOr<DTensor> CrossEntropy(const DTensor& logits,
                                     const DTensor& target, Reduction reduction,
                                     int64_t ignore_index) {
  const DTensor* in[] = {&logits, &target};
  OpArgs args;
  args.AddInt(static_cast<int64_t>(reduction)).AddInt(ignore_index);
  DT_ASSIGN_OR_RETURN(
      OpOutputs outputs,
      Dispatch(LossParallelScope::Active() && ShardsClasses(logits)
                   ? CrossEntropyLossParallelDef()
                   : CrossEntropyDef(),
               in, args));
  return std::move(outputs[0]);
}

LossParallelScope::LossParallelScope() { ++loss_parallel_depth; }
LossParallelScope::~LossParallelScope() { --loss_parallel_depth; }
bool LossParallelScope::Active() { return loss_parallel_depth > 0; }

std::vector<const OpDef*> VocabOps() {
  return {&CrossEntropyDef(), &CrossEntropyBackwardDef()};
}

}  // namespace ops
}  // namespace dtensor
