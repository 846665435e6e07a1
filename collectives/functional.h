#ifndef DTENSOR_COLLECTIVES_FUNCTIONAL_H_
#define DTENSOR_COLLECTIVES_FUNCTIONAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Collectives that allocate their result (on comm.device()) and learn from
// the peers what this rank is not told: piece sizes, and for a receiver the
// shape and dtype it gets. They learn with small i64 collectives on `comm`
// before the data moves, so all ranks must call the same function (in debug
// mode a mix-up is reported as mismatched calls). Backend-neutral.
// Semantics as the Communicator methods of the same name.

// Small i64 metadata (sizes, shapes, dtype codes) through a tensor on
// comm.device(). AllGatherValues: every rank's `values` (as many on each),
// concatenated in group order. BroadcastValues: the root's `values` on every
// rank (every rank passes as many; only the root's are read). Errors: the
// collective's; values that do not come back from the device.
absl::StatusOr<std::vector<int64_t>> AllGatherValues(
    Communicator& comm, const std::vector<int64_t>& values,
    const CollectiveOptions& options = {});
absl::StatusOr<std::vector<int64_t>> BroadcastValues(
    Communicator& comm, const std::vector<int64_t>& values, int64_t root,
    const CollectiveOptions& options = {});

// AllReduce of `tensor` in place wherever it lives: through a copy on
// comm.device() when it is elsewhere (small host values, such as counts and
// status flags, over a GPU communicator).
absl::Status AllReduceAnywhere(Communicator& comm, const Tensor& tensor,
                               ReduceOp op);

// The concatenation along `dim` of every rank's `input`; sizes along `dim`
// may differ per rank: `sizes` when given, else learned from the peers.
absl::StatusOr<Tensor> AllGather(Communicator& comm, const Tensor& input,
                                 int64_t dim,
                                 absl::Span<const int64_t> sizes = {},
                                 const CollectiveOptions& options = {});

// This rank's piece along `dim` of the reduction of every rank's `input`
// (pieces of `sizes`; empty: equal pieces).
absl::StatusOr<Tensor> ReduceScatter(Communicator& comm, const Tensor& input,
                                     int64_t dim, ReduceOp op,
                                     absl::Span<const int64_t> sizes = {},
                                     const CollectiveOptions& options = {});

// Sends piece r along `split_dim` (pieces of `split_sizes`; empty: equal) to
// rank r and returns the received pieces concatenated along `concat_dim`.
absl::StatusOr<Tensor> AllToAll(Communicator& comm, const Tensor& input,
                                int64_t split_dim, int64_t concat_dim,
                                absl::Span<const int64_t> split_sizes = {},
                                const CollectiveOptions& options = {});

// This rank's piece along `dim` of the root's `input` (pieces of the root's
// `sizes`; empty: equal). Only the root's `input` and `sizes` are read.
absl::StatusOr<Tensor> Scatter(Communicator& comm, const Tensor& input,
                               int64_t dim, int64_t root,
                               absl::Span<const int64_t> sizes = {},
                               const CollectiveOptions& options = {});

// On the root, the concatenation along `dim` of every rank's `input`; an
// undefined Tensor elsewhere.
absl::StatusOr<Tensor> Gather(Communicator& comm, const Tensor& input,
                              int64_t dim, int64_t root,
                              const CollectiveOptions& options = {});

// On each pair's dst, what its src sent (`input` of the src); an undefined
// Tensor on ranks that receive nothing.
absl::StatusOr<Tensor> Permute(Communicator& comm, const Tensor& input,
                               absl::Span<const PermutePair> pairs,
                               const CollectiveOptions& options = {});

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_FUNCTIONAL_H_
