#ifndef DTENSOR_OPS_RULE_HELPERS_H_
#define DTENSOR_OPS_RULE_HELPERS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/tensor.h"

// Small pieces shared by the sharding rules of the nn, vocab, view, join,
// slice, cast and random op families.
namespace dtensor {
namespace ops {

// The Partial ops an op commutes with: every one (views, selections), or the
// linear ones (sum and avg).
inline const std::vector<ReduceOp>& AnyReduceOps() {
  static const std::vector<ReduceOp>* ops = new std::vector<ReduceOp>{
      ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  return *ops;
}
inline const std::vector<ReduceOp>& LinearReduceOps() {
  static const std::vector<ReduceOp>* ops =
      new std::vector<ReduceOp>{ReduceOp::kSum, ReduceOp::kAvg};
  return *ops;
}

// Loop dims 0..rank-1, one per tensor dim, except that the dims in `blocked`
// iterate kNoLoop: they are never sharded.
// Requires: every entry of `blocked` is in [0, rank) (normalised).
std::vector<int> IdentityLoops(int64_t rank,
                               absl::Span<const int64_t> blocked = {});

// A tensor of `shape` and `dtype` whose elements all alias one stored
// element (zero strides): the tensor layer's view functions run on it to
// learn an output shape, or to report the error the real call would, without
// touching data however large the shape.
// Errors: those of Tensor::Expand for a `shape` with a negative extent.
absl::StatusOr<Tensor> ShapeProbe(const Shape& shape, DType dtype);

// An InferFn for an op whose local function only makes views (reshape,
// narrow, ...): it runs `fn` on shape probes of the inputs' global shapes and
// returns the result's shape and dtype (one output). Absent inputs (null
// specs) reach `fn` as undefined tensors.
// Errors: `fn`'s (the real call's error on those shapes), prefixed with `op`.
InferFn InferByShapeProbe(absl::string_view op, LocalFn fn);

// Rejects the shapes that a probe of size-1 tensors cannot check; errors
// name `op`.
using ShapeCheck = std::function<absl::Status(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args)>;

// An InferFn for an op whose output has the shape of input 0 and the dtype
// its local function gives (ProbeDType), after `check_shapes`.
InferFn SameShapeInfer(absl::string_view op, LocalFn fn,
                       ShapeCheck check_shapes = nullptr);

// The range of [0, extent) that the rank at `coord` (one entry per mesh dim)
// owns when the mesh dims `nesting` (outermost first) split it by the chunk
// rule, each chunking the range the previous one left.
// Requires: `coord` and `mesh_shape` have one entry per mesh dim, every entry
// of `nesting` is a mesh dim, and `coord` lies in the mesh.
ChunkRange NestedChunk(int64_t extent, absl::Span<const int64_t> nesting,
                       absl::Span<const int64_t> mesh_shape,
                       absl::Span<const int64_t> coord);

// Whether nested ChunkOf splits (outermost first, by the mesh dims
// `nesting`) of `a` rows of `p` elements each and of `b` rows of `q` elements
// each give every coordinate the same number of elements. Children of one
// split take at most three sizes (full chunks, a remainder, then empty ones),
// so the indices of one level fall into at most five runs of equal
// (a-size, b-size) pairs and one representative per run decides: time
// independent of the number of ranks (at most 5^nesting.size() steps).
// Requires: a, b >= 0; every entry of `nesting` is a mesh dim.
bool SameScaledChunks(int64_t a, int64_t p, int64_t b, int64_t q,
                      absl::Span<const int64_t> nesting,
                      absl::Span<const int64_t> mesh_shape);

// The block of the tensor `spec` describes that this kernel's rank holds.
// Errors: NotFound when spec's mesh does not contain the kernel's rank.
absl::StatusOr<ShardBlock> BlockOfRank(const KernelContext& ctx,
                                       const DTensorSpec& spec);

// The mesh dims sharding `tensor_dim` of `sharding`, ascending (empty when
// none does): the group a kernel reduces over when it combines the pieces of
// that dim.
// Requires: `tensor_dim` is normalised ([0, rank)).
std::vector<int64_t> MeshDimsOf(const Sharding& sharding, int64_t tensor_dim);

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_RULE_HELPERS_H_
