#include "dtensor/dtensor.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/functional.h"
#include "dtensor/redistribute/executor.h"

namespace dtensor {
namespace {

absl::Status CheckRuntime(const std::shared_ptr<Runtime>& runtime) {
  if (runtime == nullptr) {
    return absl::InvalidArgumentError("DTensor needs a runtime, got null");
  }
  return absl::OkStatus();
}

// The mesh position of every mesh dim of `mesh`: 0, 1, ..., ndim-1.
std::vector<int64_t> AllMeshDims(const DeviceMesh& mesh) {
  std::vector<int64_t> dims(mesh.ndim());
  for (int64_t m = 0; m < mesh.ndim(); ++m) dims[m] = m;
  return dims;
}

// Every rank's local shape, rows ordered row-major over the mesh: one small
// all-gather over the whole mesh.
absl::StatusOr<std::vector<Shape>> GatherLocalShapes(ProcessGroups& groups,
                                                     const DeviceMesh& mesh,
                                                     const Shape& local_shape) {
  DT_ASSIGN_OR_RETURN(auto comm, groups.ForMeshDims(mesh, AllMeshDims(mesh)));
  const int64_t rank = static_cast<int64_t>(local_shape.size());
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> flat,
                      AllGatherValues(*comm, local_shape));
  std::vector<Shape> shapes;
  for (size_t i = 0; i + rank <= flat.size() && rank > 0; i += rank) {
    shapes.emplace_back(flat.begin() + i, flat.begin() + i + rank);
  }
  if (rank == 0) shapes.assign(comm->size(), Shape{});
  return shapes;
}

// Row-major position of `coord` in a mesh of `mesh_shape`.
int64_t RowMajorIndex(absl::Span<const int64_t> mesh_shape,
                      absl::Span<const int64_t> coord) {
  int64_t index = 0;
  for (size_t m = 0; m < mesh_shape.size(); ++m) {
    index = index * mesh_shape[m] + coord[m];
  }
  return index;
}

// The global shape implied by every rank's local shape: along each sharded
// tensor dim, the sum of the extents held by the group of mesh dims sharding
// it (their nested chunks tile the dim).
Shape GlobalShapeFromLocals(const Sharding& sharding, const DeviceMesh& mesh,
                            absl::Span<const int64_t> coord,
                            const std::vector<Shape>& locals) {
  const std::vector<int64_t> mesh_shape = mesh.shape();
  Shape global = locals[RowMajorIndex(mesh_shape, coord)];
  for (int64_t d = 0; d < sharding.tensor_rank(); ++d) {
    const MeshDimList dims = sharding.MeshDimsSharding(d);
    if (dims.empty()) continue;
    int64_t group_size = 1;
    for (int64_t m : dims) group_size *= mesh_shape[m];
    global[d] = 0;
    for (int64_t member = 0; member < group_size; ++member) {
      std::vector<int64_t> member_coord(coord.begin(), coord.end());
      int64_t rest = member;
      for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
        member_coord[dims[i]] = rest % mesh_shape[dims[i]];
        rest /= mesh_shape[dims[i]];
      }
      global[d] += locals[RowMajorIndex(mesh_shape, member_coord)][d];
    }
  }
  return global;
}

// The first rank whose local shape is not the one `spec` gives it.
absl::Status CheckLocalShapes(const DTensorSpec& spec,
                              const std::vector<Shape>& locals) {
  const std::vector<int64_t> ranks = spec.mesh().Ranks();
  for (size_t i = 0; i < ranks.size(); ++i) {
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(ranks[i]));
    if (block.shape != locals[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", ranks[i], " holds a local shape [",
          absl::StrJoin(locals[i], ", "), "] but ", spec.ToString(),
          " gives it [", absl::StrJoin(block.shape, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

// Replicate -> Partial on every Partial mesh dim of `sharding`: for sum, only
// the rank at coordinate 0 of the mesh dim keeps `block`.
absl::StatusOr<Tensor> ApplyPartials(const Sharding& sharding,
                                     absl::Span<const int64_t> coord,
                                     Tensor block) {
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    if (p.is_partial() && p.reduce_op() == ReduceOp::kSum && coord[m] != 0) {
      return Tensor::Zeros(block.shape(), block.dtype(), block.device());
    }
  }
  return block;
}

// The view of `full` covering `block`.
absl::StatusOr<Tensor> BlockView(const Tensor& full, const ShardBlock& block) {
  Tensor view = full;
  for (int64_t d = 0; d < static_cast<int64_t>(block.shape.size()); ++d) {
    DT_ASSIGN_OR_RETURN(view, view.Narrow(d, block.offset[d], block.shape[d]));
  }
  return view;
}

// More dims than any tensor has: a larger broadcast rank is corrupt data.
constexpr int64_t kMaxHeaderRank = int64_t{1} << 16;

// Broadcasts `full`'s dtype and shape from group rank `root` of `comm`.
absl::StatusOr<std::pair<DType, Shape>> BroadcastHeader(Communicator& comm,
                                                        int64_t root,
                                                        const Tensor& full) {
  const bool is_root = comm.rank() == root;
  if (is_root && !full.defined()) {
    return absl::InvalidArgumentError(
        "Distribute: the source rank passed an undefined tensor");
  }
  DT_ASSIGN_OR_RETURN(
      const std::vector<int64_t> header,
      BroadcastValues(comm,
                      {is_root ? static_cast<int64_t>(full.dtype()) : 0,
                       is_root ? full.dim() : 0},
                      root));
  if (header[1] < 0 || header[1] > kMaxHeaderRank) {
    return absl::InternalError(
        "Distribute: received an invalid header from the source rank");
  }
  DT_ASSIGN_OR_RETURN(
      Shape shape,
      BroadcastValues(comm, is_root ? full.shape() : Shape(header[1], 0),
                      root));
  return std::make_pair(static_cast<DType>(header[0]), std::move(shape));
}

thread_local RedistributeObserver redistribute_observer = nullptr;

}  // namespace

RedistributeObserver SetThreadRedistributeObserver(
    RedistributeObserver observer) {
  RedistributeObserver previous = redistribute_observer;
  redistribute_observer = observer;
  return previous;
}

uint64_t DTensor::NewId() {
  constexpr uint64_t kBlock = 1 << 16;
  static std::atomic<uint64_t> next_block{1};
  thread_local uint64_t next = 0;
  thread_local uint64_t end = 0;
  if (next == end) {
    next = next_block.fetch_add(kBlock, std::memory_order_relaxed);
    end = next + kBlock;
  }
  return next++;
}

absl::StatusOr<DTensor> DTensor::FromLocal(
    std::shared_ptr<Runtime> runtime, Tensor local, DeviceMesh mesh,
    absl::Span<const Placement> placements, const FromLocalOptions& options) {
  DT_RETURN_IF_ERROR(CheckRuntime(runtime));
  if (!local.defined() && !runtime->metadata_only()) {
    return absl::InvalidArgumentError(
        "FromLocal: the local tensor is undefined");
  }
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      mesh.CoordinateOf(runtime->rank()));
  DT_ASSIGN_OR_RETURN(
      Sharding sharding,
      Sharding::FromPlacements(placements, local.dim(), options.order));
  std::vector<Shape> locals;
  const bool gather = !runtime->metadata_only() &&
                      (options.run_check || !options.global_shape.has_value());
  if (gather) {
    DT_ASSIGN_OR_RETURN(
        locals, GatherLocalShapes(*runtime->groups(), mesh, local.shape()));
  }
  Shape global;
  if (options.global_shape.has_value()) {
    global = *options.global_shape;
  } else if (gather) {
    global = GlobalShapeFromLocals(sharding, mesh, coord, locals);
  } else {
    global = local.shape();
    const std::vector<int64_t> mesh_shape = mesh.shape();
    for (int64_t d = 0; d < sharding.tensor_rank(); ++d) {
      for (int64_t m : sharding.MeshDimsSharding(d)) global[d] *= mesh_shape[m];
    }
  }
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(std::move(mesh), sharding,
                                          std::move(global), local.dtype()));
  if (options.run_check) {
    DT_RETURN_IF_ERROR(CheckLocalShapes(spec, locals));
  }
  DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime->rank()));
  if (block.shape != local.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local shape ", ShapeToString(local.shape()), " of rank ",
        runtime->rank(), " is not the ", ShapeToString(block.shape), " that ",
        spec.ToString(), " gives it"));
  }
  return DTensor(std::move(runtime),
                 std::make_shared<const DTensorSpec>(std::move(spec)),
                 std::move(local));
}

absl::StatusOr<DTensor> DTensor::Distribute(
    std::shared_ptr<Runtime> runtime, const Tensor& full, DeviceMesh mesh,
    absl::Span<const Placement> placements, const ShardOrder& order,
    int64_t src_rank) {
  DT_RETURN_IF_ERROR(CheckRuntime(runtime));
  if (runtime->metadata_only()) {
    return absl::FailedPreconditionError(
        "Distribute moves data; a metadata-only runtime has none (use "
        "FromSpec)");
  }
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      mesh.CoordinateOf(runtime->rank()));
  if (!mesh.Contains(src_rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source rank ", src_rank, " is not in mesh ", mesh.ToString()));
  }
  DT_ASSIGN_OR_RETURN(auto comm,
                      runtime->groups()->ForMeshDims(mesh, AllMeshDims(mesh)));
  const std::vector<int64_t>& members = comm->group_ranks();
  const int64_t root =
      std::find(members.begin(), members.end(), src_rank) - members.begin();
  DT_ASSIGN_OR_RETURN(auto header, BroadcastHeader(*comm, root, full));
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(std::move(mesh), placements,
                                          header.second, header.first, order));
  Tensor local;
  if (comm->rank() == root) {
    for (int64_t member = 0; member < comm->size(); ++member) {
      DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(members[member]));
      DT_ASSIGN_OR_RETURN(Tensor view, BlockView(full, block));
      DT_ASSIGN_OR_RETURN(Tensor on_device,
                          view.Contiguous().To(comm->device()));
      if (member == root) {
        local = on_device.storage() == full.storage() ? on_device.Clone()
                                                      : std::move(on_device);
      } else {
        DT_RETURN_IF_ERROR(comm->Send(on_device, member));
      }
    }
  } else {
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime->rank()));
    DT_ASSIGN_OR_RETURN(
        local, Tensor::Empty(block.shape, spec.dtype(), comm->device()));
    DT_RETURN_IF_ERROR(comm->Recv(local, root));
  }
  DT_ASSIGN_OR_RETURN(local, ApplyPartials(spec.sharding(), coord, local));
  return DTensor(std::move(runtime),
                 std::make_shared<const DTensorSpec>(std::move(spec)),
                 std::move(local));
}

absl::StatusOr<DTensor> DTensor::FromSpec(std::shared_ptr<Runtime> runtime,
                                          DTensorSpec spec) {
  DT_RETURN_IF_ERROR(CheckRuntime(runtime));
  if (!runtime->metadata_only()) {
    return absl::FailedPreconditionError(
        "FromSpec makes a DTensor without data: it needs a metadata-only "
        "runtime");
  }
  DT_RETURN_IF_ERROR(spec.BlockOf(runtime->rank()).status());
  return DTensor(std::move(runtime),
                 std::make_shared<const DTensorSpec>(std::move(spec)),
                 Tensor());
}

absl::StatusOr<ShardBlock> DTensor::LocalBlock() const {
  return spec_->BlockOf(runtime_->rank());
}

absl::StatusOr<DTensor> DTensor::Redistribute(
    absl::Span<const Placement> placements, const ShardOrder& order) const {
  DT_ASSIGN_OR_RETURN(Sharding target, Sharding::FromPlacements(
                                           placements, spec_->ndim(), order));
  return Redistribute(target);
}

absl::StatusOr<DTensor> DTensor::Redistribute(const Sharding& target) const {
  if (target == sharding()) return *this;
  const std::vector<int64_t> mesh_shape = mesh().shape();
  DT_ASSIGN_OR_RETURN(
      std::shared_ptr<const RedistributePlan> plan,
      runtime_->planner().Plan(sharding(), target, mesh_shape, shape(), dtype(),
                               runtime_->CostModelFor(mesh())));
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(mesh(), target, shape(), dtype()));
  Tensor local;
  if (runtime_->metadata_only()) {
    RecordRedistribution(*plan);
  } else {
    DT_ASSIGN_OR_RETURN(local,
                        ExecuteRedistribution(*plan, local_, mesh(), shape(),
                                              *runtime_->groups()));
  }
  DTensor out(runtime_, std::make_shared<const DTensorSpec>(std::move(spec)),
              std::move(local));
  if (redistribute_observer != nullptr) redistribute_observer(*this, out);
  return out;
}

absl::StatusOr<Tensor> DTensor::FullTensor() const {
  std::vector<Placement> replicated(mesh().ndim(), Placement::Replicate());
  DT_ASSIGN_OR_RETURN(DTensor full, Redistribute(replicated));
  return full.ToLocal();
}

absl::StatusOr<double> DTensor::Item() const {
  if (NumElements(shape()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DTensor::Item: shape ", ShapeToString(shape()),
                     " has ", NumElements(shape()), " elements, not 1"));
  }
  DT_ASSIGN_OR_RETURN(const Tensor full, FullTensor());
  return full.Item();
}

}  // namespace dtensor
