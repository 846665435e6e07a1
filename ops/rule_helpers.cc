#include "dtensor/ops/rule_helpers.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "dtensor/base/debug_check.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace ops {

std::vector<int> IdentityLoops(int64_t rank,
                               absl::Span<const int64_t> blocked) {
  std::vector<int> loops(rank);
  std::iota(loops.begin(), loops.end(), 0);
  for (int64_t d : blocked) {
    DT_DCHECK(d >= 0 && d < rank);
    loops[d] = kNoLoop;
  }
  return loops;
}

absl::StatusOr<Tensor> ShapeProbe(const Shape& shape, DType dtype) {
  return Tensor::Scalar(0, dtype).Expand(shape);
}

InferFn InferByShapeProbe(absl::string_view op, LocalFn fn) {
  return [op, fn = std::move(fn)](
             absl::Span<const DTensorSpec* const> inputs,
             const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    std::vector<Tensor> probes(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr) continue;
      absl::StatusOr<Tensor> probe =
          ShapeProbe(inputs[i]->shape(), inputs[i]->dtype());
      if (!probe.ok()) return WithOpName(op, probe.status());
      probes[i] = *std::move(probe);
    }
    absl::StatusOr<Tensor> out = fn(probes, args);
    if (!out.ok()) return WithOpName(op, out.status());
    return std::vector<TensorMeta>{{out->shape(), out->dtype()}};
  };
}

InferFn SameShapeInfer(absl::string_view op, LocalFn fn,
                       ShapeCheck check_shapes) {
  return [op, fn = std::move(fn), check_shapes = std::move(check_shapes)](
             absl::Span<const DTensorSpec* const> inputs,
             const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(op, fn, inputs, args));
    if (check_shapes) DT_RETURN_IF_ERROR(check_shapes(op, inputs, args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), dtype}};
  };
}

ChunkRange NestedChunk(int64_t extent, absl::Span<const int64_t> nesting,
                       absl::Span<const int64_t> mesh_shape,
                       absl::Span<const int64_t> coord) {
  DT_DCHECK(coord.size() == mesh_shape.size());
  ChunkRange range{0, extent};
  for (int64_t m : nesting) {
    DT_DCHECK(m >= 0 && m < static_cast<int64_t>(mesh_shape.size()));
    const ChunkRange piece = ChunkOf(range.size, mesh_shape[m], coord[m]);
    range = {range.offset + piece.offset, piece.size};
  }
  return range;
}

std::vector<std::vector<int64_t>> CoordinatesAlong(
    absl::Span<const int64_t> mesh_shape, absl::Span<const int64_t> mesh_dims) {
  for (int64_t m : mesh_dims) {
    DT_DCHECK(m >= 0 && m < static_cast<int64_t>(mesh_shape.size()));
  }
  std::vector<std::vector<int64_t>> coords;
  std::vector<int64_t> coord(mesh_shape.size(), 0);
  while (true) {
    coords.push_back(coord);
    // Next coordinate, the last of `mesh_dims` fastest.
    int64_t k = static_cast<int64_t>(mesh_dims.size()) - 1;
    for (; k >= 0; --k) {
      const int64_t m = mesh_dims[k];
      if (++coord[m] < mesh_shape[m]) break;
      coord[m] = 0;
    }
    if (k < 0) break;
  }
  return coords;
}

absl::StatusOr<ShardBlock> BlockOfRank(const KernelContext& ctx,
                                       const DTensorSpec& spec) {
  return spec.BlockOf(ctx.runtime().rank());
}

std::vector<int64_t> MeshDimsOf(const Sharding& sharding, int64_t tensor_dim) {
  const MeshDimList dims = sharding.MeshDimsSharding(tensor_dim);
  std::vector<int64_t> sorted(dims.begin(), dims.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace ops
}  // namespace dtensor
