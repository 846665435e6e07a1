#include "dtensor/ops/backward_helpers.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/constant_cache.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace ops {

absl::StatusOr<DTensor> SumToShape(const DTensor& grad, const Shape& shape) {
  const Shape& from = grad.shape();
  if (from == shape) return grad;
  const int64_t lead =
      static_cast<int64_t>(from.size()) - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) dims.push_back(d);
  }
  DTensor summed = grad;
  if (!dims.empty()) {
    DT_ASSIGN_OR_RETURN(summed, Sum(grad, dims, /*keepdim=*/true));
  }
  if (summed.shape() == shape) return summed;
  return Reshape(summed, shape);
}

absl::StatusOr<DTensor> ScalarLike(const DTensor& like, double value) {
  return ScalarLike(like, value, like.dtype());
}

absl::StatusOr<DTensor> ScalarLike(const DTensor& like, double value,
                                   DType dtype) {
  DT_ASSIGN_OR_RETURN(
      Sharding sharding,
      Sharding::FromPlacements(std::vector<Placement>(like.mesh().ndim()), 0));
  return FullWithSharding(like, {}, sharding, value, dtype);
}

absl::StatusOr<DTensor> FullWithSharding(const DTensor& like,
                                         const Shape& shape,
                                         const Sharding& sharding, double value,
                                         DType dtype) {
  DT_DCHECK(value == 0 || sharding == sharding.WithoutPartials());
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(like.mesh(), sharding, shape, dtype));
  Tensor local;
  if (!like.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(like.runtime()->rank()));
    DT_ASSIGN_OR_RETURN(local, Tensor::Full(block.shape, value, dtype,
                                            like.ToLocal().device()));
  }
  return DTensor::WrapUnchecked(
      like.runtime(), std::make_shared<const DTensorSpec>(std::move(spec)),
      std::move(local));
}

absl::StatusOr<DTensor> FullLike(const DTensor& like, double value) {
  return FullWithSharding(like, like.shape(), like.sharding().WithoutPartials(),
                          value, like.dtype());
}

absl::StatusOr<DTensor> ReplicatedConstant(const DTensor& like,
                                           const Tensor& full) {
  DT_ASSIGN_OR_RETURN(
      DTensorSpec spec,
      DTensorSpec::Create(like.mesh(),
                          std::vector<Placement>(like.mesh().ndim()),
                          full.shape(), full.dtype()));
  return DTensor::WrapUnchecked(
      like.runtime(), std::make_shared<const DTensorSpec>(std::move(spec)),
      like.runtime()->metadata_only() ? Tensor() : full);
}

absl::StatusOr<DTensor> ArangeAlong(const DTensor& like, int64_t dim,
                                    DType dtype) {
  const Sharding& sharding = like.sharding();
  std::vector<Placement> placements(sharding.mesh_ndim());
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    if (sharding.placement(m) == Placement::Shard(dim)) {
      placements[m] = Placement::Shard(0);
    }
  }
  const MeshDimList nesting = sharding.MeshDimsSharding(dim);
  const ShardOrder order = {
      std::vector<int64_t>(nesting.begin(), nesting.end())};
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(like.mesh(), placements,
                                          {like.shape()[dim]}, dtype, order));
  Tensor local;
  if (!like.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(like.runtime()->rank()));
    // Cached on the device: the classes of a one-hot (cross_entropy_backward's
    // own backward) at every call.
    DT_ASSIGN_OR_RETURN(local, CachedArange(block.offset[0], block.shape[0],
                                            dtype, like.ToLocal().device()));
  }
  return DTensor::WrapUnchecked(
      like.runtime(), std::make_shared<const DTensorSpec>(std::move(spec)),
      std::move(local));
}

namespace {

// The mesh dims where `partial` is Partial(sum) and `complete` Replicate,
// when their shardings differ only there (so that partial's sharding is that of
// their sum); empty otherwise.
absl::InlinedVector<int64_t, 4> CompletedDims(const Sharding& partial,
                                              const Sharding& complete) {
  absl::InlinedVector<int64_t, 4> dims;
  if (partial.WithoutPartials() != complete.WithoutPartials()) return dims;
  for (int64_t m = 0; m < partial.mesh_ndim(); ++m) {
    const Placement p = partial.placement(m);
    const Placement c = complete.placement(m);
    if (p == c) continue;
    if (p != Placement::Partial(ReduceOp::kSum) || !c.is_replicate()) {
      return {};
    }
    dims.push_back(m);
  }
  return dims;
}

}  // namespace

bool CanAddCompleteToPartial(const DTensor& partial, const DTensor& complete) {
  return partial.mesh() == complete.mesh() &&
         !CompletedDims(partial.sharding(), complete.sharding()).empty();
}

absl::StatusOr<DTensor> AddCompleteToPartial(const DTensor& partial,
                                             const DTensor& complete) {
  if (!CanAddCompleteToPartial(partial, complete)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddCompleteToPartial: ", complete.spec().ToString(),
                     " is not a complete term of ", partial.spec().ToString()));
  }
  const absl::InlinedVector<int64_t, 4> dims =
      CompletedDims(partial.sharding(), complete.sharding());
  const Runtime& runtime = *partial.runtime();
  Tensor local;
  if (!runtime.metadata_only()) {
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                        partial.mesh().CoordinateOf(runtime.rank()));
    const bool first =
        std::all_of(dims.begin(), dims.end(),
                    [&coord](int64_t m) { return coord[m] == 0; });
    if (first) {
      DT_ASSIGN_OR_RETURN(local,
                          dtensor::Add(partial.ToLocal(), complete.ToLocal()));
    } else {
      local = partial.ToLocal();
    }
  }
  return DTensor::WrapUnchecked(partial.runtime(), partial.spec_ptr(),
                                std::move(local));
}

}  // namespace ops
}  // namespace dtensor
