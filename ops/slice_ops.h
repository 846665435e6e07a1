#ifndef DTENSOR_OPS_SLICE_OPS_H_
#define DTENSOR_OPS_SLICE_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Taking parts of a DTensor along one dim, with the tensor layer's semantics
// (Narrow, Slice, Split, Chunk in dtensor/tensor/tensor.h). The sliced dim is
// never sharded (a range of the chunk rule's pieces is not a chunking of the
// range), so a sharded one is gathered (or moved to another dim) first; every
// other dim keeps its shards, and any Partial passes through. Locally the
// parts are views.
// Errors: what the tensor layer's functions report for the global shapes.
//
// Split and Chunk lay the input out once (the sharding the first part's
// narrow would choose) and then take every part without communication.
//
// Registry names and arguments: narrow ("dim", "start", "length", ints);
// slice ("dim", "start", "end", "step", ints; step > 0, start and end
// clamped as in Python).

absl::StatusOr<DTensor> Narrow(const DTensor& x, int64_t dim, int64_t start,
                               int64_t length);
absl::StatusOr<DTensor> Slice(const DTensor& x, int64_t dim, int64_t start,
                              int64_t end, int64_t step = 1);
// Parts of `split_size` (the last may be smaller), or of explicit `sizes`.
absl::StatusOr<std::vector<DTensor>> Split(const DTensor& x, int64_t split_size,
                                           int64_t dim);
absl::StatusOr<std::vector<DTensor>> Split(const DTensor& x,
                                           absl::Span<const int64_t> sizes,
                                           int64_t dim);
// torch.chunk: parts of ceil(n / chunks), possibly fewer than `chunks`.
absl::StatusOr<std::vector<DTensor>> Chunk(const DTensor& x, int64_t chunks,
                                           int64_t dim);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> SliceOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_SLICE_OPS_H_
