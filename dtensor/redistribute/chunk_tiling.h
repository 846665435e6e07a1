#ifndef DTENSOR_DTENSOR_REDISTRIBUTE_CHUNK_TILING_H_
#define DTENSOR_DTENSOR_REDISTRIBUTE_CHUNK_TILING_H_

#include <cstdint>

#include "absl/types/span.h"

namespace dtensor {

// Whether nested torch.chunk splits (ChunkOf) of [0, extent) by the mesh dim
// sizes `a` and by `b` (outermost first, as a tensor dim's shard order) yield
// the same non-empty ranges. Both tile [0, extent) in order, so they do
// exactly when their sequences of non-empty chunk sizes agree.
//
// Closed form, independent of the number of chunks: a split of size s into n
// chunks is `f = s / ceil(s/n)` copies of the split of ceil(s/n), then the
// split of the remainder, so each sequence is a tree of at most 2^depth
// distinct nodes. Sizes of 1 split nothing and are dropped; equal size lists
// agree outright. Otherwise the sequences are compared by their lengths and
// two 61-bit polynomial fingerprints (copies by repeated squaring): unequal
// sequences of the same length agree on both only by a collision of
// probability below len / 2^60 per base, so a false "same" needs two
// sequences of billions of chunks (tests/dtensor/chunk_tiling_test.cc checks
// it against enumerating every chunk).
// Requires: extent >= 0, every size >= 1, at most 8 sizes each.
bool SameNonEmptyChunks(int64_t extent, absl::Span<const int64_t> a,
                        absl::Span<const int64_t> b);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_REDISTRIBUTE_CHUNK_TILING_H_
