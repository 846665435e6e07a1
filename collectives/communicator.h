#ifndef DTENSOR_COLLECTIVES_COMMUNICATOR_H_
#define DTENSOR_COLLECTIVES_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dtensor/collectives/collective_call.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/collectives/work.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// A communicator over a group of ranks: the collectives of one rank of the
// group. Backend-neutral: every call is checked here and reaches its backend
// (in-process, Gloo, NCCL) as one CollectiveCall through the protected
// Start method.
//
// Ranks in arguments (root, src, dst, permute pairs) are group ranks, 0 to
// size() - 1; group_ranks() maps them to global ranks. Every rank of the group
// must make the same collective calls in the same order (point-to-point calls
// pair up in order per (src, dst)); one thread at a time may call a
// communicator. Tensors must live on device(). Dims may be negative.
//
// Outputs are passed in: the caller allocates them
// (dtensor/collectives/functional.h has forms that allocate and learn unknown
// sizes from the peers). Inputs are read as strided views; in-place ops write
// through views. An output must not overlap its input.
//
// "Pieces" are the parts of a tensor along one dim, one per group rank in
// group order; their sizes may differ, zero included. An empty `sizes` means
// equal pieces.
//
// Every collective returns a Work to wait on (Issue; the XAsync methods):
// inputs and outputs belong to the call until Wait() returns. The blocking
// forms (Run; the methods without Async) are that Work waited on at once,
// which lets a backend run the call on the calling thread. A call whose
// peers do not all arrive within its deadline fails with DeadlineExceeded
// naming the op, the group and the missing ranks; a peer that failed or
// exited gives Unavailable. After a deadline error the communicator is broken:
// its later calls fail too. Argument errors found on this rank alone return at
// once without involving the peers.
//
// Requires: every rank of the group makes the same calls in the same order;
//   one thread at a time calls a communicator.
// Errors: (every collective) InvalidArgument for what this rank alone shows
//   wrong (a group rank out of range, a dim out of range, a tensor not on
//   device(), mismatched shapes, dtypes or piece sizes, an output
//   overlapping its input); DeadlineExceeded naming the missing ranks;
//   Unavailable when a peer failed or exited, or the communicator is broken.
class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  // This rank's position in the group.
  int64_t rank() const { return rank_; }
  int64_t size() const { return static_cast<int64_t>(group_ranks_.size()); }
  // The global ranks of the group, in group order.
  const std::vector<int64_t>& group_ranks() const { return group_ranks_; }
  int64_t global_rank() const { return group_ranks_[rank_]; }
  const CommunicatorOptions& options() const { return options_; }
  // "group [0, 2, 4]" (global ranks).
  std::string GroupName() const;
  // Where the tensors passed to this communicator must live.
  virtual Device device() const = 0;

  // ---- Any call. ----

  // Starts the call `args` describes (the methods below document each);
  // argument errors come back as an already finished Work.
  std::shared_ptr<Work> Issue(CollectiveArgs args,
                              const CollectiveOptions& options = {});
  // The same call, waited for.
  absl::Status Run(CollectiveArgs args, const CollectiveOptions& options = {});

  // ---- Collectives. ----

  // In place: every rank's `tensor` becomes the elementwise reduction of all
  // ranks' tensors (same shape and dtype everywhere). Every rank gets the
  // same bits.
  absl::Status AllReduce(const Tensor& tensor, ReduceOp op,
                         const CollectiveOptions& options = {});
  std::shared_ptr<Work> AllReduceAsync(const Tensor& tensor, ReduceOp op,
                                       const CollectiveOptions& options = {});

  // `output` becomes the concatenation along `dim` of every rank's `input`.
  // `sizes[r]` is rank r's input size along `dim` (empty: all equal to this
  // rank's); the other dims agree. `output` has size sum(sizes) along `dim`.
  absl::Status AllGather(const Tensor& input, const Tensor& output, int64_t dim,
                         absl::Span<const int64_t> sizes = {},
                         const CollectiveOptions& options = {});
  std::shared_ptr<Work> AllGatherAsync(const Tensor& input,
                                       const Tensor& output, int64_t dim,
                                       absl::Span<const int64_t> sizes = {},
                                       const CollectiveOptions& options = {});

  // Rank r's `output` becomes the reduction over ranks of piece r of `input`
  // along `dim` (pieces of `sizes`, the same on every rank; empty: equal
  // pieces, which must divide the dim). Inputs have equal shapes.
  absl::Status ReduceScatter(const Tensor& input, const Tensor& output,
                             int64_t dim, ReduceOp op,
                             absl::Span<const int64_t> sizes = {},
                             const CollectiveOptions& options = {});
  std::shared_ptr<Work> ReduceScatterAsync(
      const Tensor& input, const Tensor& output, int64_t dim, ReduceOp op,
      absl::Span<const int64_t> sizes = {},
      const CollectiveOptions& options = {});

  // Splits `input` along `split_dim` into pieces of `send_sizes` and sends
  // piece r to rank r; `output` becomes the received pieces concatenated
  // along `concat_dim` in source-rank order, piece r of size `recv_sizes[r]`
  // along `concat_dim` (empty: equal pieces). Dims other than the two keep
  // their sizes. Rank i's send_sizes[j] is rank j's recv_sizes[i] when the
  // dims are equal.
  absl::Status AllToAll(const Tensor& input, const Tensor& output,
                        int64_t split_dim, int64_t concat_dim,
                        absl::Span<const int64_t> send_sizes = {},
                        absl::Span<const int64_t> recv_sizes = {},
                        const CollectiveOptions& options = {});
  std::shared_ptr<Work> AllToAllAsync(const Tensor& input, const Tensor& output,
                                      int64_t split_dim, int64_t concat_dim,
                                      absl::Span<const int64_t> send_sizes = {},
                                      absl::Span<const int64_t> recv_sizes = {},
                                      const CollectiveOptions& options = {});

  // In place: every rank's `tensor` becomes the root's (same shape and dtype
  // everywhere).
  absl::Status Broadcast(const Tensor& tensor, int64_t root,
                         const CollectiveOptions& options = {});
  std::shared_ptr<Work> BroadcastAsync(const Tensor& tensor, int64_t root,
                                       const CollectiveOptions& options = {});

  // Rank r's `output` becomes piece r along `dim` of the root's `input`
  // (pieces of `sizes`, the same on every rank; empty: all equal to this
  // rank's output size). `input` is read on the root only (elsewhere it may
  // be undefined).
  absl::Status Scatter(const Tensor& input, const Tensor& output, int64_t dim,
                       int64_t root, absl::Span<const int64_t> sizes = {},
                       const CollectiveOptions& options = {});
  std::shared_ptr<Work> ScatterAsync(const Tensor& input, const Tensor& output,
                                     int64_t dim, int64_t root,
                                     absl::Span<const int64_t> sizes = {},
                                     const CollectiveOptions& options = {});

  // The root's `output` becomes the concatenation along `dim` of every
  // rank's `input` (`sizes` as in AllGather). `output` is written on the root
  // only (elsewhere it may be undefined).
  absl::Status Gather(const Tensor& input, const Tensor& output, int64_t dim,
                      int64_t root, absl::Span<const int64_t> sizes = {},
                      const CollectiveOptions& options = {});
  std::shared_ptr<Work> GatherAsync(const Tensor& input, const Tensor& output,
                                    int64_t dim, int64_t root,
                                    absl::Span<const int64_t> sizes = {},
                                    const CollectiveOptions& options = {});

  // Each pair's dst's `output` becomes its src's `input`. A rank is the src
  // of at most one pair and the dst of at most one; a rank that sends passes
  // `input`, one that receives passes `output` (shapes and dtypes match per
  // pair), others may pass undefined tensors. Every rank passes the same
  // pairs.
  absl::Status Permute(const Tensor& input, const Tensor& output,
                       absl::Span<const PermutePair> pairs,
                       const CollectiveOptions& options = {});
  std::shared_ptr<Work> PermuteAsync(const Tensor& input, const Tensor& output,
                                     absl::Span<const PermutePair> pairs,
                                     const CollectiveOptions& options = {});

  // Returns once every rank of the group has called it.
  absl::Status Barrier(const CollectiveOptions& options = {});
  std::shared_ptr<Work> BarrierAsync(const CollectiveOptions& options = {});

  // ---- Point to point. ----

  // Sends `tensor` to rank `dst`, which must Recv it into a tensor of the
  // same shape and dtype. Returns when the receiver has it.
  absl::Status Send(const Tensor& tensor, int64_t dst,
                    const CollectiveOptions& options = {});
  std::shared_ptr<Work> SendAsync(const Tensor& tensor, int64_t dst,
                                  const CollectiveOptions& options = {});
  // Receives into `tensor` what rank `src` sends.
  absl::Status Recv(const Tensor& tensor, int64_t src,
                    const CollectiveOptions& options = {});
  std::shared_ptr<Work> RecvAsync(const Tensor& tensor, int64_t src,
                                  const CollectiveOptions& options = {});

 protected:
  // Requires: `group_ranks` are distinct global ranks and `rank` an index
  //   into them (backends check before constructing; debug-checked here).
  Communicator(std::vector<int64_t> group_ranks, int64_t rank,
               CommunicatorOptions options);

  // The backend's one entry: starts `call`, whose arguments are checked on
  // this rank (call_checks.h). What only the peers know (their shapes, their
  // sizes) is the backend's to check or trust. Returns a Work that finishes
  // within call.deadline.
  virtual std::shared_ptr<Work> Start(const CollectiveCall& call) = 0;

  // The call as messages name it: "all_reduce #3 on group [0, 1]",
  // "send on group [0, 1]".
  std::string Describe(const CollectiveCall& call) const;

 private:
  // Checks `args`, numbers the call, resolves its deadline and signs it; an
  // argument error comes back as the status.
  absl::StatusOr<CollectiveCall> NewCall(CollectiveArgs args,
                                         const CollectiveOptions& options,
                                         bool blocking);
  // Issue and Run: starts the checked call (`blocking`: Run's).
  std::shared_ptr<Work> Submit(CollectiveArgs args,
                               const CollectiveOptions& options, bool blocking);

  std::vector<int64_t> group_ranks_;
  int64_t rank_;
  CommunicatorOptions options_;
  int64_t next_sequence_ = 0;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_COMMUNICATOR_H_
