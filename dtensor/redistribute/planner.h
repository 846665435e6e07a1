#ifndef DTENSOR_DTENSOR_REDISTRIBUTE_PLANNER_H_
#define DTENSOR_DTENSOR_REDISTRIBUTE_PLANNER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/plan.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

// Whether `from` can be redistributed to `to` for a tensor of `global_shape`
// on a mesh of `mesh_shape`. Errors name the offending value: shardings for
// another mesh rank or tensor rank than the shapes, a mesh size < 1, a
// negative tensor size, a mesh dim going from Shard to Partial, or from
// Partial(op1) to Partial(op2) (a Partial target must come from Replicate or
// the same Partial, as in PyTorch).
absl::Status CheckRedistribution(const Sharding& from, const Sharding& to,
                                 absl::Span<const int64_t> mesh_shape,
                                 absl::Span<const int64_t> global_shape);

// The cheapest sequence of steps from `from` to `to` under `cost_model`,
// found by an exact shortest-path search (A* with a consistent lower bound)
// over shardings. Meshes of at most 8 dims and tensors of rank at most 31 (the
// search packs a sharding into 64 bits); larger ones get an InvalidArgument
// error naming both. The moves:
//   - all-gather of the innermost mesh dim(s) of a tensor dim;
//   - all-to-all moving the innermost mesh dim(s) of one tensor dim to the
//     innermost position of another, landing in any order;
//   - all-reduce of Partial mesh dim(s) with one op;
//   - reduce-scatter of Partial mesh dim(s) into the innermost position of a
//     tensor dim;
//   - collective permute to any sharding holding the same blocks (same Partial
//     mesh dims, every tensor dim split into the same blocks): reordering the
//     nesting of a tensor dim, moving shards between mesh dims or tensor dims
//     of equal block size; it runs over the mesh dims whose role changes;
//   - local: slicing a Replicate mesh dim into the innermost shard of a tensor
//     dim; Replicate -> Partial(op) with sum or an op that a Partial mesh dim
//     of the sharding or of `to` has (so that one reduction covers more mesh
//     dims); and any step over a group of one rank.
// Several mesh dims move in one step over their flattened group where one
// collective serves. Local bytes are those of the largest (padded) shard.
// Ties go to fewer steps.
absl::StatusOr<RedistributePlan> PlanRedistribution(
    const Sharding& from, const Sharding& to,
    absl::Span<const int64_t> mesh_shape,
    absl::Span<const int64_t> global_shape, DType dtype,
    const CostModel& cost_model);

// Bytes of the largest local shard of a tensor laid out by `sharding`: every
// tensor dim's extent divided, rounding up, by each mesh dim sharding it.
double PaddedLocalBytes(const Sharding& sharding,
                        absl::Span<const int64_t> mesh_shape,
                        absl::Span<const int64_t> global_shape, DType dtype);

// PlanRedistribution with a cache keyed by (mesh shape, from, to, shape,
// dtype, cost model). Thread-safe; plans are shared, never copied. One
// planner serves any number of meshes and ranks. The cache holds at most
// `capacity` plans: adding one to a full cache first empties it (plans already
// handed out stay valid).
class RedistributePlanner {
 public:
  // The capacity of the shared planner's cache.
  static constexpr size_t kDefaultCapacity = 4096;

  // A capacity of 0 is taken as 1.
  explicit RedistributePlanner(size_t capacity = kDefaultCapacity)
      : capacity_(std::max<size_t>(capacity, 1)) {}

  // The planner shared by the whole process.
  static RedistributePlanner& Shared();

  absl::StatusOr<std::shared_ptr<const RedistributePlan>> Plan(
      const Sharding& from, const Sharding& to,
      absl::Span<const int64_t> mesh_shape,
      absl::Span<const int64_t> global_shape, DType dtype,
      const CostModel& cost_model) const;

  // Forgets every cached plan (plans already handed out stay valid).
  void Clear();
  // The number of cached plans, at most capacity().
  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  // A plan for Plan to cache: PlanRedistribution's, or on a mesh with size-1
  // dims the cached plan on the mesh without them, lifted.
  absl::StatusOr<RedistributePlan> PlanCached(
      const Sharding& from, const Sharding& to,
      absl::Span<const int64_t> mesh_shape,
      absl::Span<const int64_t> global_shape, DType dtype,
      const CostModel& cost_model) const;

  struct Key {
    Sharding from;
    Sharding to;
    std::vector<int64_t> mesh_shape;
    std::vector<int64_t> global_shape;
    DType dtype;
    CostModel cost_model;

    friend bool operator==(const Key& a, const Key& b) {
      return a.from == b.from && a.to == b.to && a.dtype == b.dtype &&
             a.mesh_shape == b.mesh_shape && a.global_shape == b.global_shape &&
             a.cost_model == b.cost_model;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.from, key.to, key.mesh_shape,
                        key.global_shape, key.dtype, key.cost_model);
    }
  };

  const size_t capacity_;
  mutable Mutex mu_;
  mutable absl::flat_hash_map<Key, std::shared_ptr<const RedistributePlan>>
      cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_REDISTRIBUTE_PLANNER_H_
