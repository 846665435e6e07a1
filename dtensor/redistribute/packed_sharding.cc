#include "dtensor/redistribute/packed_sharding.h"

#include <vector>

#include "dtensor/base/debug_check.h"

namespace dtensor {

PackedSharding PackedSharding::Pack(const Sharding& sharding) {
  DT_DCHECK(Fits(sharding.mesh_ndim(), sharding.tensor_rank()));
  PackedSharding packed;
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    if (p.is_partial()) {
      packed = packed.WithCode(m, PartialCode(p.reduce_op()));
    } else if (p.is_shard()) {
      packed =
          packed.WithCode(m, ShardCode(p.dim(), sharding.nesting_position(m)));
    }
  }
  return packed;
}

Sharding PackedSharding::Unpack(int64_t mesh_ndim, int64_t tensor_rank) const {
  std::vector<Placement> placements(mesh_ndim);
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    if (is_partial(m)) placements[m] = Placement::Partial(reduce_op(m));
    if (is_shard(m)) placements[m] = Placement::Shard(shard_dim(m));
  }
  const ShardOrders orders(*this, mesh_ndim, tensor_rank);
  ShardOrder order(tensor_rank);
  for (int64_t d = 0; d < tensor_rank; ++d) {
    order[d].assign(orders.of(d).begin(), orders.of(d).end());
  }
  // The packed sharding is valid by construction: it came from Pack and the
  // planner's edits, which keep positions compact.
  return *Sharding::FromPlacements(placements, tensor_rank, order);
}

ShardOrders::ShardOrders(PackedSharding packed, int64_t mesh_ndim,
                         int64_t tensor_rank) {
  for (int64_t d = 0; d < tensor_rank; ++d) count_[d] = 0;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    if (!packed.is_shard(m)) continue;
    const int64_t d = packed.shard_dim(m);
    dims_[d][packed.position(m)] = m;
    ++count_[d];
  }
}

}  // namespace dtensor
