#ifndef DTENSOR_OPS_VIEW_OPS_H_
#define DTENSOR_OPS_VIEW_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Shape ops on DTensors, with the tensor layer's semantics
// (dtensor/tensor/tensor.h); locally they are views where the tensor layer's
// are. Errors: what the tensor layer's view functions report for the global
// shapes.
// Every Partial passes through all of them (they move elements, never
// combine them). Dims map as follows:
//
//   transpose, permute  every dim keeps its shards, moved with the dim.
//   expand              a dim that keeps its size keeps its shards; an
//                       expanded size-1 dim and a new leading dim are never
//                       sharded.
//   view, reshape, flatten, unflatten, squeeze, unsqueeze
//                       (reshapes: view and reshape are the same op here,
//                       since a DTensor has no global strides.) The non-1
//                       dims fall into groups whose sizes multiply alike
//                       ([6, 4] -> [24]: one group; [2, 3, 4] -> [6, 4]: two).
//                       In a group only the outermost dim may be sharded; its
//                       shards move to the group's outermost output dim, with
//                       the same mesh dims in the same nesting order, and only
//                       where every rank's block is then the same run of
//                       elements (always for a 1:1 group; for a merge or split
//                       when the chunks align, e.g. [8, 3] S(0) -> [24] S(0)
//                       on 2 ranks, but not [5, 3] S(0) -> [15] or
//                       [12] S(0) -> [3, 4] on 4 ranks, which the uneven
//                       chunk rule would shift). Otherwise that dim is
//                       gathered (or moved to another dim) first. Size-1 dims
//                       (squeezed, unsqueezed) are never sharded.
//
// Registry names and arguments: view, reshape ("shape", ints, one -1
// allowed); flatten ("start_dim" 0, "end_dim" -1); unflatten ("dim", int;
// "sizes", ints); transpose ("dim0", "dim1"); permute ("dims", ints); squeeze
// ("dims", ints, empty = every size-1 dim; a listed dim not of size 1 stays);
// unsqueeze ("dim", int); expand ("shape", ints, -1 keeps a size).

absl::StatusOr<DTensor> View(const DTensor& x, absl::Span<const int64_t> shape);
absl::StatusOr<DTensor> Reshape(const DTensor& x,
                                absl::Span<const int64_t> shape);
absl::StatusOr<DTensor> Flatten(const DTensor& x, int64_t start_dim = 0,
                                int64_t end_dim = -1);
// Splits `dim` into `sizes` (one -1 allowed), like torch.unflatten.
absl::StatusOr<DTensor> Unflatten(const DTensor& x, int64_t dim,
                                  absl::Span<const int64_t> sizes);
absl::StatusOr<DTensor> Transpose(const DTensor& x, int64_t dim0, int64_t dim1);
absl::StatusOr<DTensor> Permute(const DTensor& x,
                                absl::Span<const int64_t> dims);
// Removes every size-1 dim, or those of `dims` that have size 1.
absl::StatusOr<DTensor> Squeeze(const DTensor& x,
                                absl::Span<const int64_t> dims = {});
absl::StatusOr<DTensor> Unsqueeze(const DTensor& x, int64_t dim);
absl::StatusOr<DTensor> Expand(const DTensor& x,
                               absl::Span<const int64_t> shape);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> ViewOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_VIEW_OPS_H_
