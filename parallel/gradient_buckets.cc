#include "dtensor/parallel/gradient_buckets.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/comm_counter.h"
#include "dtensor/comm_owner.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/autograd_accumulate.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/parallel/flat_buffer.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/runtime.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace parallel {

// Gradients of one mesh, reduction and dtype, reduced by one collective (an
// all-reduce, or a reduce-scatter for FSDP's).
struct GradientBuckets::Bucket {
  DeviceMesh mesh;
  Reduction reduction;
  DType dtype;
  // The bytes at which the bucket starts its collective.
  int64_t limit = 0;
  // The parameters' indices, their gradients' local values (until Start;
  // none under a metadata-only runtime), the local shapes of the results
  // (the parameters' blocks) and owners (the CommOwner their gradient was
  // handed over under), in order.
  std::vector<size_t> indices;
  std::vector<Tensor> locals;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const void*> owners;
  // The bytes given (the gradients' local blocks), in all and each.
  int64_t bytes = 0;
  std::vector<int64_t> given_bytes;
  // A reduce-scatter bucket: per gradient, the rows of its local block that
  // each rank of the mesh dim keeps.
  std::vector<RowChunks> rows;
  // Set by Start: the flat buffer the results land in (no data under a
  // metadata-only runtime), a reduce-scatter's input (alive until the
  // collective ends), and the handle.
  bool started = false;
  Tensor flat;
  Tensor scatter_input;
  std::shared_ptr<Work> work;
};

GradientBuckets::GradientBuckets(std::vector<DTensor> params,
                                 int64_t bucket_bytes,
                                 int64_t first_bucket_bytes,
                                 std::optional<DType> reduce_dtype)
    : params_(std::move(params)),
      bucket_bytes_(bucket_bytes),
      first_bucket_bytes_(std::min(first_bucket_bytes, bucket_bytes)),
      reduce_dtype_(reduce_dtype),
      unbucketed_(params_.size()),
      accumulated_(params_.size()),
      given_(params_.size()) {}

GradientBuckets::~GradientBuckets() {
  // Collectives still running own their buffers until they finish.
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    if (bucket->work != nullptr) bucket->work->Wait().IgnoreError();
  }
}

GradientBuckets::Reduction GradientBuckets::ScatterOf(
    size_t index, const DTensor& grad) const {
  const DTensor& param = params_[index];
  Reduction reduction;
  for (int64_t m = 0; m < grad.sharding().mesh_ndim(); ++m) {
    const Placement p = grad.sharding().placement(m);
    if (!p.is_partial()) continue;
    if (!reduction.mesh_dims.empty() ||
        !param.sharding().placement(m).is_shard() ||
        (p.reduce_op() != ReduceOp::kSum && p.reduce_op() != ReduceOp::kAvg)) {
      return Reduction();
    }
    reduction.mesh_dims = {m};
    reduction.op = p.reduce_op();
  }
  if (reduction.mesh_dims.empty() ||
      grad.sharding().WithReplicated(reduction.mesh_dims) !=
          param.sharding().WithReplicated(reduction.mesh_dims)) {
    return Reduction();
  }
  reduction.scatter = true;
  return reduction;
}

GradientBuckets::Reduction GradientBuckets::ReductionOf(
    size_t index, const DTensor& grad) const {
  const DTensor& param = params_[index];
  Reduction reduction;
  if (grad.mesh() != param.mesh() || grad.dtype() != param.dtype()) {
    return reduction;
  }
  if (grad.sharding().WithoutPartials() != param.sharding()) {
    return ScatterOf(index, grad);
  }
  for (int64_t m = 0; m < grad.sharding().mesh_ndim(); ++m) {
    const Placement p = grad.sharding().placement(m);
    if (!p.is_partial()) continue;
    const ReduceOp op = p.reduce_op();
    if ((op != ReduceOp::kSum && op != ReduceOp::kAvg) ||
        (!reduction.mesh_dims.empty() && op != reduction.op)) {
      return Reduction();
    }
    reduction.op = op;
    reduction.mesh_dims.push_back(m);
  }
  return reduction;
}

GradientBuckets::Bucket& GradientBuckets::OpenBucket(const Reduction& reduction,
                                                     DType dtype,
                                                     const DeviceMesh& mesh) {
  bool first = true;
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    if (bucket->dtype == dtype && bucket->reduction.op == reduction.op &&
        bucket->reduction.mesh_dims == reduction.mesh_dims &&
        bucket->reduction.scatter == reduction.scatter &&
        bucket->mesh == mesh) {
      if (!bucket->started) return *bucket;
      first = false;
    }
  }
  buckets_.push_back(std::make_unique<Bucket>(Bucket{
      mesh, reduction, dtype, first ? first_bucket_bytes_ : bucket_bytes_}));
  return *buckets_.back();
}

absl::Status GradientBuckets::KeepUnbucketed(size_t index, DTensor grad) {
  const Sharding& sharding = params_[index].sharding();
  if (grad.sharding() != sharding) {
    nn::NoGrad not_recorded;
    DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(sharding));
  }
  unbucketed_[index] = std::move(grad);
  return absl::OkStatus();
}

absl::Status GradientBuckets::Add(size_t index, const DTensor& grad) {
  if (index >= params_.size() || given_[index]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradientBuckets: gradient ", index,
        index >= params_.size() ? " is out of range" : " was already given",
        " (", params_.size(), " parameters)"));
  }
  if (grad.shape() != params_[index].shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradientBuckets: gradient ", index, " has shape ",
                     ShapeToString(grad.shape()), ", its parameter ",
                     ShapeToString(params_[index].shape())));
  }
  given_[index] = true;
  DTensor sum = grad;
  if (accumulated_[index].defined()) {
    nn::NoGrad not_recorded;
    DT_ASSIGN_OR_RETURN(sum, ops::Add(accumulated_[index], grad));
    accumulated_[index] = DTensor();
  }
  const Reduction reduction = ReductionOf(index, sum);
  if (reduction.mesh_dims.empty()) return KeepUnbucketed(index, sum);
  DT_ASSIGN_OR_RETURN(ShardBlock block,
                      sum.spec().BlockOf(sum.runtime()->rank()));
  RowChunks rows;
  std::vector<int64_t> result_shape = block.shape;
  if (reduction.scatter) {
    const DTensor& param = params_[index];
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        param.mesh().CoordinateOf(param.runtime()->rank()));
    // Not FSDP's sharding (the same answer on every rank): redistributed alone.
    absl::StatusOr<InnermostRowSplit> split =
        InnermostRowSplitAt(param.sharding(), param.mesh().shape(),
                            param.shape(), coord, reduction.mesh_dims[0]);
    if (!split.ok()) return KeepUnbucketed(index, sum);
    rows = split->rows;
    result_shape[0] = rows.of(coord[reduction.mesh_dims[0]]).size;
  }
  const DType dtype = reduce_dtype_.value_or(sum.dtype());
  Tensor local = sum.ToLocal();
  if (local.defined() && local.dtype() != dtype) {
    DT_ASSIGN_OR_RETURN(local, local.To(dtype));
  }
  Bucket* open = &OpenBucket(reduction, dtype, sum.mesh());
  if (reduction.scatter && !open->owners.empty() &&
      open->owners.back() != CommOwner::Current()) {
    // The gradients of an FSDP group are handed over together, under the
    // group's module: the group's reduce-scatter starts when they are in.
    DT_RETURN_IF_ERROR(Start(*open));
    open = &OpenBucket(reduction, dtype, sum.mesh());
  }
  Bucket& bucket = *open;
  bucket.indices.push_back(index);
  bucket.locals.push_back(std::move(local));
  const int64_t bytes = block.numel() * ElementSize(dtype);
  bucket.bytes += bytes;
  bucket.given_bytes.push_back(bytes);
  bucket.shapes.push_back(std::move(result_shape));
  bucket.rows.push_back(rows);
  bucket.owners.push_back(CommOwner::Current());
  if (bucket.bytes >= bucket.limit) return Start(bucket);
  return absl::OkStatus();
}

void GradientBuckets::Count(const Bucket& bucket) const {
  int64_t group_size = 1;
  for (int64_t m : bucket.reduction.mesh_dims) {
    group_size *= bucket.mesh.shape()[m];
  }
  const CostModel model =
      params_[bucket.indices.front()].runtime()->CostModelFor(bucket.mesh);
  CommCounter::Event event = CommCounter::Estimated(
      model,
      bucket.reduction.scatter ? CommKind::kReduceScatter
                               : CommKind::kAllReduce,
      bucket.reduction.mesh_dims, bucket.mesh.shape(),
      static_cast<double>(bucket.bytes),
      absl::StrCat("gradient bucket of ", bucket.indices.size(), " tensors, ",
                   bucket.bytes, " bytes"));
  const auto cost_us = [&](double local_bytes) {
    return model.StepCostUs(event.kind, event.mesh_dims, bucket.mesh.shape(),
                            local_bytes);
  };
  // Each parameter's part is its owner's (adjacent parts of one owner
  // merged), so that reports can attribute the bucket per module.
  for (size_t k = 0; k < bucket.indices.size(); ++k) {
    const double local = static_cast<double>(bucket.given_bytes[k]);
    const double bytes =
        CostModel::ReceivedBytes(event.kind, group_size, local);
    const double us = cost_us(local) - cost_us(0);
    if (!event.shares.empty() &&
        event.shares.back().owner == bucket.owners[k]) {
      event.shares.back().bytes += bytes;
      event.shares.back().estimated_us += us;
    } else {
      event.shares.push_back({bucket.owners[k], bytes, us});
    }
  }
  CommCounter::RecordOnThread(event);
}

absl::Status GradientBuckets::Start(Bucket& bucket) {
  bucket.started = true;
  ++num_collectives_;
  Count(bucket);
  const DTensor& first = params_[bucket.indices.front()];
  if (first.runtime()->metadata_only()) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> comm,
                      first.runtime()->groups()->ForMeshDims(
                          bucket.mesh, bucket.reduction.mesh_dims));
  // On the gradients' device (the communicator's).
  const Device device = bucket.locals.front().device();
  const int64_t numel =
      bucket.bytes / static_cast<int64_t>(ElementSize(bucket.dtype));
  DT_ASSIGN_OR_RETURN(Tensor input,
                      Tensor::Empty({numel}, bucket.dtype, device));
  if (!bucket.reduction.scatter) {
    DT_RETURN_IF_ERROR(PackInOrder(bucket.locals, input));
    bucket.locals.clear();
    bucket.flat = std::move(input);
    bucket.work = comm->AllReduceAsync(bucket.flat, bucket.reduction.op);
    return absl::OkStatus();
  }
  std::vector<std::vector<ChunkRange>> rows;
  for (const RowChunks& chunks : bucket.rows) rows.push_back(chunks.All());
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                      PackRowsByRank(bucket.locals, rows, input));
  bucket.locals.clear();
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      first.mesh().CoordinateOf(first.runtime()->rank()));
  const int64_t me = coord[bucket.reduction.mesh_dims[0]];
  DT_ASSIGN_OR_RETURN(bucket.flat,
                      Tensor::Empty({sizes[me]}, bucket.dtype, device));
  bucket.scatter_input = std::move(input);
  bucket.work = comm->ReduceScatterAsync(bucket.scatter_input, bucket.flat, 0,
                                         bucket.reduction.op, sizes);
  return absl::OkStatus();
}

absl::Status GradientBuckets::Complete(Bucket& bucket,
                                       std::vector<DTensor>& result) {
  if (bucket.work != nullptr) {
    absl::Status done = bucket.work->Wait();
    if (!done.ok()) {
      return absl::Status(
          done.code(),
          absl::StrCat("gradient bucket of parameters ", bucket.indices.front(),
                       "..", bucket.indices.back(), ": ", done.message()));
    }
  }
  int64_t offset = 0;
  for (size_t k = 0; k < bucket.indices.size(); ++k) {
    const DTensor& param = params_[bucket.indices[k]];
    Tensor local;
    if (bucket.flat.defined()) {
      const int64_t n = NumElements(bucket.shapes[k]);
      DT_ASSIGN_OR_RETURN(local, bucket.flat.Narrow(0, offset, n));
      DT_ASSIGN_OR_RETURN(local, local.View(bucket.shapes[k]));
      offset += n;
      if (local.dtype() != param.dtype()) {
        DT_ASSIGN_OR_RETURN(local, local.To(param.dtype()));
      }
    }
    result[bucket.indices[k]] =
        DTensor::WrapUnchecked(param.runtime(), param.spec_ptr(), local);
  }
  return absl::OkStatus();
}

absl::Status GradientBuckets::StartGroups() {
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    if (bucket->reduction.scatter && !bucket->started) {
      DT_RETURN_IF_ERROR(Start(*bucket));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DTensor>> GradientBuckets::Finish() {
  std::vector<DTensor> result(params_.size());
  absl::Status status;
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    if (!bucket->started) status.Update(Start(*bucket));
  }
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    status.Update(Complete(*bucket, result));
  }
  buckets_.clear();
  std::fill(given_.begin(), given_.end(), false);
  DT_RETURN_IF_ERROR(status);
  nn::NoGrad not_recorded;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (result[i].defined()) continue;
    const DTensor& param = params_[i];
    DTensor grad = std::exchange(unbucketed_[i], DTensor());
    if (!grad.defined()) grad = std::exchange(accumulated_[i], DTensor());
    if (!grad.defined()) {
      DT_ASSIGN_OR_RETURN(grad, ops::FullLike(param, 0));
    }
    if (grad.sharding() != param.sharding()) {
      DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(param.sharding()));
    }
    result[i] = std::move(grad);
  }
  return result;
}

absl::Status GradientBuckets::Abandon() {
  absl::Status status;
  for (const std::unique_ptr<Bucket>& bucket : buckets_) {
    if (bucket->work != nullptr) status.Update(bucket->work->Wait());
  }
  buckets_.clear();
  std::fill(given_.begin(), given_.end(), false);
  std::fill(unbucketed_.begin(), unbucketed_.end(), DTensor());
  std::fill(accumulated_.begin(), accumulated_.end(), DTensor());
  return status;
}

absl::Status GradientBuckets::AccumulateWithoutSync(
    absl::Span<const DTensor> grads) {
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradientBuckets: ", grads.size(), " gradients for ",
                     params_.size(), " parameters"));
  }
  return nn::AccumulateGradients(&accumulated_, grads);
}

}  // namespace parallel
}  // namespace dtensor
