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

bool SameScaledChunks(int64_t a, int64_t p, int64_t b, int64_t q,
                      absl::Span<const int64_t> nesting,
                      absl::Span<const int64_t> mesh_shape) {
  if (nesting.empty()) return a * p == b * q;
  const int64_t n = mesh_shape[nesting[0]];
  // The first index of each run: where either split leaves its full chunks
  // or its remainder.
  const int64_t full_a = a == 0 ? 0 : a / ChunkOf(a, n, 0).size;
  const int64_t full_b = b == 0 ? 0 : b / ChunkOf(b, n, 0).size;
  for (int64_t start : {int64_t{0}, full_a, full_a + 1, full_b, full_b + 1}) {
    if (start >= n) continue;
    if (!SameScaledChunks(ChunkOf(a, n, start).size, p,
                          ChunkOf(b, n, start).size, q, nesting.subspan(1),
                          mesh_shape)) {
      return false;
    }
  }
  return true;
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
