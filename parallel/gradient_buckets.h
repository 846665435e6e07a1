#ifndef DTENSOR_PARALLEL_GRADIENT_BUCKETS_H_
#define DTENSOR_PARALLEL_GRADIENT_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/collectives/work.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/placement.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
namespace parallel {

// Data-parallel gradient synchronization in buckets, overlapped with the
// backward pass (like DistributedDataParallel's reducer):
//
//   GradientBuckets buckets(params, 25 << 20);
//   nn::GradientOptions options;
//   options.keep_propagated_shardings = true;
//   options.on_gradient_ready = buckets.ReadyCallback();
//   options.after_gradients_ready = buckets.GroupReadyCallback();
//   options.release_handed_over = true;
//   DT_RETURN_IF_ERROR(tape.Gradient(loss, params, options).status());
//   DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, buckets.Finish());
//
// Each gradient that backward hands over Partial along mesh dims where its
// parameter is Replicate (a data-parallel weight's gradient) is copied into
// the open bucket of its mesh dims, reduce op and dtype, in the order backward
// produces them; a bucket that reaches `bucket_bytes` starts one asynchronous
// all-reduce of its flat buffer at once, so that communication overlaps the
// rest of the backward pass (the step's first bucket of each set of mesh dims
// closes earlier, at `first_bucket_bytes`). Finish() starts the last, partly
// filled buckets, waits for every bucket and returns each parameter's gradient
// in its parameter's sharding. Every rank gets the gradients in the same order
// (SPMD), so the ranks' buckets match. Each all-reduce is counted (CommCounter)
// as one all_reduce over the bucket's bytes, shared out to the CommOwner each
// gradient was handed over under (the module that used the parameter), so
// that `dtensor explain` attributes it per module; under a metadata-only
// runtime only the counting happens. The results equal the unbucketed
// redistribution's elementwise: the same reduction of the same values.
//
// FSDP: a gradient Partial on the one mesh dim where its parameter is Shard
// (dim 0's innermost split), laid out as the parameter elsewhere, goes to a
// reduce-scatter bucket instead: the bucket packs each rank's rows of every
// gradient rank by rank, so that one asynchronous reduce-scatter leaves each
// rank its parameters' blocks (uneven blocks as they are). Such a bucket
// holds one FSDP group's gradients (those handed over together, under the
// group's module): it starts at GroupReadyCallback (backward handed the
// group over), when a gradient of another owner comes, or at its size limit.
//
// Gradients of other shardings (a parameter sharded by TP, complete
// gradients, Partial over several dims where one shards the parameter) are
// redistributed to their parameter's sharding when handed over.
//
// Gradient accumulation: AccumulateWithoutSync(grads) adds a micro-batch's
// gradients (taken without the callback) locally; the next synchronized
// step adds them before bucketing, so only the last micro-batch communicates.
class GradientBuckets {
 public:
  // `params` in the order of Gradient()'s sources; `bucket_bytes` > 0. The
  // first bucket of each set of mesh dims in a step closes at
  // min(`first_bucket_bytes`, `bucket_bytes`) instead (DDP's
  // first_bucket_bytes), so that one all-reduce starts early in backward
  // even when the whole model fits one bucket.
  // With `reduce_dtype` (mixed precision's, dtensor/parallel/
  // mixed_precision_policy.h), the bucketed gradients are cast to it (each
  // rank's terms rounded once) before their collective and back to their
  // parameter's dtype after, so that the collective moves and sums that
  // dtype; the gradients no bucket takes are reduced in their own dtype.
  GradientBuckets(std::vector<DTensor> params, int64_t bucket_bytes,
                  int64_t first_bucket_bytes = kFirstBucketBytes,
                  std::optional<DType> reduce_dtype = std::nullopt);

  // DistributedDataParallel's default first bucket: 1 MiB.
  static constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // The gradient of params[index], final: adds it to the open buckets (or,
  // when no bucket takes it, redistributes it to its parameter's sharding at
  // once). Errors: an index out of range or given twice in a step, a shape
  // mismatch, the redistribution's, the copy's or a collective start's
  // errors.
  absl::Status Add(size_t index, const DTensor& grad);
  // Add, as a GradientOptions::on_gradient_ready; valid while this lives.
  std::function<absl::Status(size_t, const DTensor&)> ReadyCallback() {
    return
        [this](size_t index, const DTensor& grad) { return Add(index, grad); };
  }
  // Starts the open reduce-scatter buckets: the gradients backward handed
  // over together (an FSDP group's, final at once) are in. Errors: Start's.
  absl::Status StartGroups();
  // StartGroups, as a GradientOptions::after_gradients_ready; valid while
  // this lives.
  std::function<absl::Status()> GroupReadyCallback() {
    return [this] { return StartGroups(); };
  }
  // Starts the buckets still open, waits for every all-reduce and returns
  // the parameters' gradients in their shardings (zeros where none was given),
  // then resets for the next step. Errors: the collectives' errors (naming
  // the bucket).
  absl::StatusOr<std::vector<DTensor>> Finish();
  // After a failed backward pass: waits for the all-reduces already started
  // (peers may be inside them, and they own their buffers) but starts none of
  // the open buckets, then drops this step's gradients and resets. Ranks that
  // failed at different points of backward hold open buckets of different
  // contents, so starting them would pair mismatched all-reduces. The
  // micro-batch gradients accumulated for this step are dropped too (some
  // were already added to the dropped buckets). Errors: the started
  // all-reduces' errors.
  absl::Status Abandon();
  // Adds `grads` (one per parameter, undefined: none) to the gradients kept
  // for the next synchronized step, without communication. Errors: a count
  // mismatch, the additions' errors.
  absl::Status AccumulateWithoutSync(absl::Span<const DTensor> grads);

  // The collectives (all-reduces, reduce-scatters) started since
  // construction (for tests and tables).
  int64_t num_collectives() const { return num_collectives_; }

 private:
  struct Bucket;
  // The mesh dims to reduce `grad` over for params_[index], with their op;
  // empty when the gradient is not a data-parallel Partial of its parameter.
  struct Reduction {
    std::vector<int64_t> mesh_dims;
    ReduceOp op = ReduceOp::kSum;
    // A reduce-scatter over its one mesh dim, where the parameter is Shard
    // (FSDP) rather than Replicate.
    bool scatter = false;
  };
  Reduction ReductionOf(size_t index, const DTensor& grad) const;
  // The reduce-scatter reduction of an FSDP parameter's gradient: Partial
  // (sum or avg) on one mesh dim where the parameter is Shard, laid out
  // as the parameter elsewhere; empty otherwise.
  Reduction ScatterOf(size_t index, const DTensor& grad) const;
  // The open bucket for `reduction`, dtype and mesh, made if none (with
  // the first bucket's limit when it is the step's first of its kind).
  Bucket& OpenBucket(const Reduction& reduction, DType dtype,
                     const DeviceMesh& mesh);
  // Records the bucket's collective (CommCounter), its bytes shared out to
  // the owners of its parameters' gradients.
  void Count(const Bucket& bucket) const;
  // A gradient no bucket takes, brought to its parameter's sharding at once
  // (in backward, under the CommOwner it was handed over under).
  absl::Status KeepUnbucketed(size_t index, DTensor grad);
  // Copies the bucket's gradients into one buffer and starts its all-reduce
  // or reduce-scatter.
  absl::Status Start(Bucket& bucket);
  // Waits for the bucket and writes its parameters' gradients into result.
  absl::Status Complete(Bucket& bucket, std::vector<DTensor>& result);

  std::vector<DTensor> params_;
  int64_t bucket_bytes_;
  int64_t first_bucket_bytes_;
  std::optional<DType> reduce_dtype_;
  // By parameter: the gradient of this step that needs no bucket, and the
  // accumulated gradients of earlier micro-batches.
  std::vector<DTensor> unbucketed_;
  std::vector<DTensor> accumulated_;
  std::vector<bool> given_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  int64_t num_collectives_ = 0;
};

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_GRADIENT_BUCKETS_H_
