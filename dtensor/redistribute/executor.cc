#include "dtensor/redistribute/executor.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/comm_counter.h"
#include "dtensor/shard_geometry.h"

namespace dtensor {
namespace {

// This rank's view of one redistribution: where it sits in the mesh.
class StepRunner {
 public:
  StepRunner(const DeviceMesh& mesh, std::vector<int64_t> coord,
             absl::Span<const int64_t> global_shape, ProcessGroups& groups)
      : mesh_(mesh),
        mesh_shape_(mesh.shape()),
        coord_(std::move(coord)),
        global_shape_(global_shape),
        groups_(groups) {}

  absl::StatusOr<Tensor> Run(const RedistributeStep& step, const Tensor& local);

 private:
  absl::StatusOr<Tensor> Local(const RedistributeStep& step,
                               const Tensor& local);
  absl::StatusOr<Tensor> AllGather(const RedistributeStep& step,
                                   const Tensor& local);
  absl::StatusOr<Tensor> AllToAll(const RedistributeStep& step,
                                  const Tensor& local);
  absl::StatusOr<Tensor> AllReduce(const RedistributeStep& step,
                                   const Tensor& local);
  absl::StatusOr<Tensor> ReduceScatter(const RedistributeStep& step,
                                       const Tensor& local);
  absl::StatusOr<Tensor> Permute(const RedistributeStep& step,
                                 const Tensor& local);

  // The mesh coordinate of member `member` of the group along `mesh_dims`
  // that contains this rank (members ordered row-major over `mesh_dims`).
  std::vector<int64_t> MemberCoord(absl::Span<const int64_t> mesh_dims,
                                   int64_t member) const;
  int64_t GroupSize(absl::Span<const int64_t> mesh_dims) const;
  // This rank's position in its group along `mesh_dims`.
  int64_t MemberIndex(absl::Span<const int64_t> mesh_dims) const;
  absl::StatusOr<ShardBlock> BlockAt(const Sharding& sharding,
                                     absl::Span<const int64_t> coord) const {
    return ShardBlockAt(sharding, mesh_shape_, global_shape_, coord);
  }
  // Sizes along tensor dim `d` of the blocks the members of the group along
  // `mesh_dims` hold under `sharding`.
  absl::StatusOr<std::vector<int64_t>> MemberSizes(
      const Sharding& sharding, absl::Span<const int64_t> mesh_dims,
      int64_t d) const;
  absl::StatusOr<std::shared_ptr<Communicator>> Group(
      absl::Span<const int64_t> mesh_dims) {
    return groups_.ForMeshDims(mesh_, mesh_dims);
  }

  const DeviceMesh& mesh_;
  std::vector<int64_t> mesh_shape_;
  std::vector<int64_t> coord_;
  absl::Span<const int64_t> global_shape_;
  ProcessGroups& groups_;
};

std::vector<int64_t> StepRunner::MemberCoord(
    absl::Span<const int64_t> mesh_dims, int64_t member) const {
  std::vector<int64_t> coord = coord_;
  for (int64_t i = static_cast<int64_t>(mesh_dims.size()) - 1; i >= 0; --i) {
    const int64_t size = mesh_shape_[mesh_dims[i]];
    coord[mesh_dims[i]] = member % size;
    member /= size;
  }
  return coord;
}

int64_t StepRunner::GroupSize(absl::Span<const int64_t> mesh_dims) const {
  int64_t size = 1;
  for (int64_t m : mesh_dims) size *= mesh_shape_[m];
  return size;
}

int64_t StepRunner::MemberIndex(absl::Span<const int64_t> mesh_dims) const {
  int64_t index = 0;
  for (int64_t m : mesh_dims) index = index * mesh_shape_[m] + coord_[m];
  return index;
}

absl::StatusOr<std::vector<int64_t>> StepRunner::MemberSizes(
    const Sharding& sharding, absl::Span<const int64_t> mesh_dims,
    int64_t d) const {
  std::vector<int64_t> sizes;
  const int64_t n = GroupSize(mesh_dims);
  sizes.reserve(n);
  for (int64_t member = 0; member < n; ++member) {
    DT_ASSIGN_OR_RETURN(ShardBlock block,
                        BlockAt(sharding, MemberCoord(mesh_dims, member)));
    sizes.push_back(block.shape[d]);
  }
  return sizes;
}

absl::StatusOr<Tensor> StepRunner::Local(const RedistributeStep& step,
                                         const Tensor& local) {
  // Replicate -> Partial(sum) keeps the value on one rank of the mesh dim and
  // zeros elsewhere; the other ops keep it everywhere.
  for (int64_t m = 0; m < step.after.mesh_ndim(); ++m) {
    const Placement& after = step.after.placement(m);
    if (after.is_partial() && !step.before.placement(m).is_partial() &&
        after.reduce_op() == ReduceOp::kSum && coord_[m] != 0) {
      DT_ASSIGN_OR_RETURN(
          Tensor zeros,
          Tensor::Zeros(local.shape(), local.dtype(), local.device()));
      return zeros;
    }
  }
  // Otherwise the new block lies inside the old one: a view of it.
  DT_ASSIGN_OR_RETURN(ShardBlock before, BlockAt(step.before, coord_));
  DT_ASSIGN_OR_RETURN(ShardBlock after, BlockAt(step.after, coord_));
  Tensor result = local;
  for (int64_t d = 0; d < static_cast<int64_t>(after.shape.size()); ++d) {
    if (after.shape[d] == before.shape[d]) continue;
    const int64_t start =
        after.shape[d] == 0 ? 0 : after.offset[d] - before.offset[d];
    DT_ASSIGN_OR_RETURN(result, result.Narrow(d, start, after.shape[d]));
  }
  return result;
}

absl::StatusOr<Tensor> StepRunner::AllGather(const RedistributeStep& step,
                                             const Tensor& local) {
  const int64_t d = step.tensor_dims[0];
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                      MemberSizes(step.before, step.mesh_dims, d));
  Shape shape = local.shape();
  shape[d] = 0;
  for (int64_t size : sizes) shape[d] += size;
  DT_ASSIGN_OR_RETURN(Tensor output,
                      Tensor::Empty(shape, local.dtype(), local.device()));
  DT_ASSIGN_OR_RETURN(auto comm, Group(step.mesh_dims));
  DT_RETURN_IF_ERROR(comm->AllGather(local, output, d, sizes));
  return output;
}

absl::StatusOr<Tensor> StepRunner::AllToAll(const RedistributeStep& step,
                                            const Tensor& local) {
  const int64_t from = step.tensor_dims[0];
  const int64_t to = step.tensor_dims[1];
  // The group is ordered as the moved mesh dims nest on `from`, so received
  // pieces concatenate in place. They may nest in another order on `to`:
  // the piece for each member is then cut from wherever its block lies.
  const int64_t n = GroupSize(step.mesh_dims);
  DT_ASSIGN_OR_RETURN(ShardBlock mine, BlockAt(step.before, coord_));
  std::vector<Tensor> pieces;
  std::vector<int64_t> send_sizes;
  bool in_order = true;
  int64_t next_offset = mine.offset[to];
  for (int64_t member = 0; member < n; ++member) {
    DT_ASSIGN_OR_RETURN(
        ShardBlock block,
        BlockAt(step.after, MemberCoord(step.mesh_dims, member)));
    const int64_t size = block.shape[to];
    send_sizes.push_back(size);
    if (size == 0) continue;
    in_order &= block.offset[to] == next_offset;
    next_offset = block.offset[to] + size;
    DT_ASSIGN_OR_RETURN(
        Tensor piece,
        local.Narrow(to, block.offset[to] - mine.offset[to], size));
    pieces.push_back(std::move(piece));
  }
  Tensor input = local;
  if (!in_order) {
    DT_ASSIGN_OR_RETURN(input, Cat(pieces, to));
  }
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> recv_sizes,
                      MemberSizes(step.before, step.mesh_dims, from));
  Shape shape = local.shape();
  shape[to] = send_sizes[MemberIndex(step.mesh_dims)];
  shape[from] = 0;
  for (int64_t size : recv_sizes) shape[from] += size;
  DT_ASSIGN_OR_RETURN(Tensor output,
                      Tensor::Empty(shape, local.dtype(), local.device()));
  DT_ASSIGN_OR_RETURN(auto comm, Group(step.mesh_dims));
  DT_RETURN_IF_ERROR(comm->AllToAll(input, output, /*split_dim=*/to,
                                    /*concat_dim=*/from, send_sizes,
                                    recv_sizes));
  return output;
}

absl::StatusOr<Tensor> StepRunner::AllReduce(const RedistributeStep& step,
                                             const Tensor& local) {
  const ReduceOp op = step.before.placement(step.mesh_dims[0]).reduce_op();
  Tensor output = local.Clone();
  DT_ASSIGN_OR_RETURN(auto comm, Group(step.mesh_dims));
  DT_RETURN_IF_ERROR(comm->AllReduce(output, op));
  return output;
}

absl::StatusOr<Tensor> StepRunner::ReduceScatter(const RedistributeStep& step,
                                                 const Tensor& local) {
  const int64_t d = step.tensor_dims[0];
  const ReduceOp op = step.before.placement(step.mesh_dims[0]).reduce_op();
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                      MemberSizes(step.after, step.mesh_dims, d));
  Shape shape = local.shape();
  shape[d] = sizes[MemberIndex(step.mesh_dims)];
  DT_ASSIGN_OR_RETURN(Tensor output,
                      Tensor::Empty(shape, local.dtype(), local.device()));
  DT_ASSIGN_OR_RETURN(auto comm, Group(step.mesh_dims));
  DT_RETURN_IF_ERROR(comm->ReduceScatter(local, output, d, op, sizes));
  return output;
}

absl::StatusOr<Tensor> StepRunner::Permute(const RedistributeStep& step,
                                           const Tensor& local) {
  // Every member works out the same transfers: each member needing a
  // non-empty block it does not hold gets it from a member holding it (under
  // the old sharding) that sends nothing else yet.
  const int64_t n = GroupSize(step.mesh_dims);
  std::vector<ShardBlock> old_blocks, new_blocks;
  for (int64_t member = 0; member < n; ++member) {
    const std::vector<int64_t> coord = MemberCoord(step.mesh_dims, member);
    DT_ASSIGN_OR_RETURN(ShardBlock old_block, BlockAt(step.before, coord));
    DT_ASSIGN_OR_RETURN(ShardBlock new_block, BlockAt(step.after, coord));
    old_blocks.push_back(std::move(old_block));
    new_blocks.push_back(std::move(new_block));
  }
  std::vector<bool> sending(n, false);
  std::vector<PermutePair> pairs;
  for (int64_t dst = 0; dst < n; ++dst) {
    if (new_blocks[dst].empty() || new_blocks[dst] == old_blocks[dst]) continue;
    int64_t src = 0;
    while (src < n && (sending[src] || old_blocks[src] != new_blocks[dst])) {
      ++src;
    }
    if (src == n) {
      return absl::InternalError(absl::StrCat(
          "permute ", step.before.ToString(), " -> ", step.after.ToString(),
          ": no free holder of the block of group member ", dst));
    }
    sending[src] = true;
    pairs.push_back(PermutePair{src, dst});
  }
  const int64_t me = MemberIndex(step.mesh_dims);
  const ShardBlock& mine = new_blocks[me];
  const bool receives = !mine.empty() && mine != old_blocks[me];
  Tensor output = local;
  if (receives || mine.empty()) {
    DT_ASSIGN_OR_RETURN(
        output, Tensor::Empty(mine.shape, local.dtype(), local.device()));
  }
  if (pairs.empty()) return output;
  DT_ASSIGN_OR_RETURN(auto comm, Group(step.mesh_dims));
  DT_RETURN_IF_ERROR(comm->Permute(sending[me] ? local : Tensor(),
                                   receives ? output : Tensor(), pairs));
  return output;
}

absl::StatusOr<Tensor> StepRunner::Run(const RedistributeStep& step,
                                       const Tensor& local) {
  switch (step.kind) {
    case CommKind::kLocal:
      return Local(step, local);
    case CommKind::kAllGather:
      return AllGather(step, local);
    case CommKind::kAllToAll:
      return AllToAll(step, local);
    case CommKind::kAllReduce:
      return AllReduce(step, local);
    case CommKind::kReduceScatter:
      return ReduceScatter(step, local);
    case CommKind::kPermute:
      return Permute(step, local);
  }
  return absl::InternalError("unknown redistribution step kind");
}

CommCounter::Event EventOf(const RedistributeStep& step) {
  CommCounter::Event event;
  event.kind = step.kind;
  event.mesh_dims = step.mesh_dims;
  event.bytes = step.bytes_per_rank;
  event.estimated_us = step.cost_us;
  event.label =
      absl::StrCat(step.before.ToString(), " -> ", step.after.ToString());
  return event;
}

double NowUs() {
  return absl::ToDoubleMicroseconds(absl::Now() - absl::UnixEpoch());
}

}  // namespace

absl::StatusOr<Tensor> ExecuteRedistribution(
    const RedistributePlan& plan, const Tensor& local, const DeviceMesh& mesh,
    absl::Span<const int64_t> global_shape, ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      mesh.CoordinateOf(groups.rank()));
  StepRunner runner(mesh, std::move(coord), global_shape, groups);
  Tensor current = local;
  for (const RedistributeStep& step : plan.steps) {
    CommCounter::Event event = EventOf(step);
    event.start_us = NowUs();
    absl::StatusOr<Tensor> next = runner.Run(step, current);
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          absl::StrCat("redistribution step ", step.ToString(),
                                       ": ", next.status().message()));
    }
    event.duration_us = NowUs() - event.start_us;
    CommCounter::RecordOnThread(event);
    current = *std::move(next);
  }
  return current;
}

void RecordRedistribution(const RedistributePlan& plan) {
  for (const RedistributeStep& step : plan.steps) {
    CommCounter::RecordOnThread(EventOf(step));
  }
}

}  // namespace dtensor
