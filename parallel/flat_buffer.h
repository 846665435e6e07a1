#ifndef DTENSOR_PARALLEL_FLAT_BUFFER_H_
#define DTENSOR_PARALLEL_FLAT_BUFFER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace parallel {

// The flat buffers of the data-parallel collectives that move several
// tensors at once (GradientBuckets' all-reduces and reduce-scatters, FSDP's
// all-gathers): tensors back to back, or, where each rank of a mesh dim
// holds some rows of each tensor (FSDP's sharding, InnermostRowSplitAt), rank
// by rank: rank 0's rows of every tensor in order, then rank 1's, ...
// Requires: `flat` is 1-D, of the tensors' dtype, and large enough.

// `tensors` back to back into `flat`.
absl::Status PackInOrder(absl::Span<const Tensor> tensors, Tensor& flat);

// rows[k][r] are the rows of tensors[k] that rank r holds: those rows into
// `flat` rank by rank. Returns each rank's element count (a reduce-scatter's
// sizes).
absl::StatusOr<std::vector<int64_t>> PackRowsByRank(
    absl::Span<const Tensor> tensors,
    absl::Span<const std::vector<ChunkRange>> rows, Tensor& flat);

// The inverse: `flat` laid out rank by rank (an all-gather of each rank's
// rows) copied into the rows of `tensors` (allocated by the caller).
absl::Status UnpackRowsByRank(const Tensor& flat,
                              absl::Span<const std::vector<ChunkRange>> rows,
                              absl::Span<const Tensor> tensors);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_FLAT_BUFFER_H_
