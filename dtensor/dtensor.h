#ifndef DTENSOR_DTENSOR_DTENSOR_H_
#define DTENSOR_DTENSOR_DTENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/placement.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

class DTensor;

// Sees every DTensor::Redistribute on this thread that changed the sharding,
// after it succeeded, with its input and output (autograd's tape records
// redistributions through it: dtensor/nn/autograd.h).
using RedistributeObserver = void (*)(const DTensor& input,
                                      const DTensor& output);
// Installs `observer` for the calling thread (null: none); returns the one it
// replaces.
RedistributeObserver SetThreadRedistributeObserver(
    RedistributeObserver observer);

// Options of DTensor::FromLocal.
struct FromLocalOptions {
  // The global shape. Unset: learned from the peers' local shapes (one
  // small all-gather over the mesh); in metadata-only mode, inferred as if
  // every shard were as large as this one.
  std::optional<Shape> global_shape;
  // Nesting order of the shards (empty: default, left to right).
  ShardOrder order;
  // Verifies with the peers that every rank's local shape is the one the
  // sharding gives it (one small all-gather); an error names the first rank
  // that disagrees.
  bool run_check = false;
};

// A distributed tensor as one rank sees it: its local shard plus the global
// description (DTensorSpec). A value type: copies share the local tensor's
// storage, as Tensors do.
//
// All ranks of the mesh run the same DTensor code (SPMD); operations that
// communicate must be called by every rank of the mesh. In a metadata-only
// runtime a DTensor has no data (`ToLocal()` is undefined) and operations only
// compute shardings and record the communication they would do.
class DTensor {
 public:
  DTensor() = default;

  // Wraps this rank's shard `local` of a tensor laid out over `mesh` by
  // `placements`. Errors: a placement count other than mesh.ndim(), a shard
  // dim out of range, a local shape that differs from what the sharding gives
  // this rank, this rank not in `mesh`.
  static absl::StatusOr<DTensor> FromLocal(
      std::shared_ptr<Runtime> runtime, Tensor local, DeviceMesh mesh,
      absl::Span<const Placement> placements,
      const FromLocalOptions& options = {});

  // Lays `full` out over `mesh`, taking the data of rank `src_rank` (the
  // other ranks' `full` is ignored and may be undefined; shape and dtype come
  // from `src_rank` too): each rank receives only its block. Partial
  // placements follow Replicate -> Partial (sum: one rank of the mesh dim
  // keeps the value, the others hold zeros; avg, max, min: every rank keeps
  // it). Each block lands on the device of the mesh's communicators (the
  // host for Gloo and CPU in-process ranks, the rank's GPU for NCCL or
  // in-process ranks made on a GPU), wherever `full` lives.
  static absl::StatusOr<DTensor> Distribute(
      std::shared_ptr<Runtime> runtime, const Tensor& full, DeviceMesh mesh,
      absl::Span<const Placement> placements, const ShardOrder& order = {},
      int64_t src_rank = 0);

  // A metadata-only DTensor (no data) with `spec`.
  // Errors: a runtime that is not metadata-only (FailedPrecondition).
  static absl::StatusOr<DTensor> FromSpec(std::shared_ptr<Runtime> runtime,
                                          DTensorSpec spec);

  // Wraps `local` as this rank's shard of the tensor `spec` describes,
  // without the checks (and the cost) of FromLocal: the caller guarantees
  // that `runtime`'s rank is in the mesh and that `local` has the shape the
  // sharding gives it (undefined under a metadata-only runtime). For op
  // dispatch, which shares precomputed output specs between calls.
  static DTensor WrapUnchecked(std::shared_ptr<Runtime> runtime,
                               std::shared_ptr<const DTensorSpec> spec,
                               Tensor local) {
    return DTensor(std::move(runtime), std::move(spec), std::move(local));
  }

  bool defined() const { return runtime_ != nullptr; }
  // Which tensor this is: unique in the process to every DTensor made (by
  // FromLocal, Distribute, an op, a redistribution, ...) and shared by its
  // copies; 0 when undefined. Autograd keys gradients by it.
  uint64_t id() const { return id_; }
  const DTensorSpec& spec() const { return *spec_; }
  // The spec, shared: DTensors made from one another (op outputs, copies)
  // share one spec object, which caches keyed by specs compare by address.
  const std::shared_ptr<const DTensorSpec>& spec_ptr() const { return spec_; }
  const DeviceMesh& mesh() const { return spec_->mesh(); }
  const Sharding& sharding() const { return spec_->sharding(); }
  std::vector<Placement> placements() const { return spec_->placements(); }
  const Shape& shape() const { return spec_->shape(); }
  DType dtype() const { return spec_->dtype(); }
  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }

  // This rank's shard (undefined in metadata-only mode), as PyTorch's
  // DTensor.to_local(); FromLocal is the inverse.
  const Tensor& ToLocal() const { return local_; }
  // This rank's block of the global tensor (shape and offset).
  absl::StatusOr<ShardBlock> LocalBlock() const;

  // The same tensor laid out by `placements` (and `order`) on the same mesh,
  // by the cheapest plan of the runtime's planner. Errors: invalid placements,
  // Shard -> Partial, Partial(op1) -> Partial(op2).
  absl::StatusOr<DTensor> Redistribute(absl::Span<const Placement> placements,
                                       const ShardOrder& order = {}) const;
  absl::StatusOr<DTensor> Redistribute(const Sharding& target) const;

  // The whole tensor on every rank (a redistribution to all-Replicate).
  absl::StatusOr<Tensor> FullTensor() const;
  // The value of a one-element tensor (a loss) as a double, on every rank,
  // as PyTorch's tensor.item(): a Partial or sharded value is completed
  // first (a collective: every rank must call it). Errors: a tensor of more
  // than one element (naming its shape), metadata-only mode.
  absl::StatusOr<double> Item() const;

 private:
  DTensor(std::shared_ptr<Runtime> runtime,
          std::shared_ptr<const DTensorSpec> spec, Tensor local)
      : runtime_(std::move(runtime)),
        spec_(std::move(spec)),
        local_(std::move(local)),
        id_(NewId()) {}

  // A fresh id (ids are handed to each thread in blocks, so this is a
  // thread-local increment almost always).
  static uint64_t NewId();

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<const DTensorSpec> spec_;
  Tensor local_;
  uint64_t id_ = 0;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_DTENSOR_H_
