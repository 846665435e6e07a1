#ifndef DTENSOR_TOOLS_SHARD_PICTURE_H_
#define DTENSOR_TOOLS_SHARD_PICTURE_H_

#include <string>

#include "absl/status/statusor.h"
#include "dtensor/dtensor_spec.h"

namespace dtensor {

// Draws which ranks hold which block of a 1-D or 2-D tensor, in the manner of
// PyTorch's visualize_sharding: a grid of boxes, one per distinct non-empty
// block, each labelled with the ranks holding it. Rows are ranges of tensor
// dim 0 and columns ranges of dim 1 ("a:b" = [a, b)); a 1-D tensor is one row
// of boxes over dim 0. Ranks holding empty blocks are listed below the grid.
// InvalidArgument for tensors of other ranks.
absl::StatusOr<std::string> DrawShardPicture(const DTensorSpec& spec);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_SHARD_PICTURE_H_
