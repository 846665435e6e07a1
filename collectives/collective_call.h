#ifndef DTENSOR_COLLECTIVES_COLLECTIVE_CALL_H_
#define DTENSOR_COLLECTIVES_COLLECTIVE_CALL_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dtensor/collectives/call_signature.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// One transfer of a collective permute: group rank `src` sends, `dst`
// receives.
struct PermutePair {
  int64_t src;
  int64_t dst;
};

// The arguments of each collective, as values. The meaning of each field is
// documented on the Communicator method of the same name. Once checked by
// CheckCollectiveArgs, dims are normalized (0 to ndim - 1) and piece sizes
// are complete (one per group rank); tensors a rank does not use (scatter's
// input off the root, gather's output off the root, permute's input or
// output on a rank that does not send or receive) are undefined.
struct AllReduceArgs {
  Tensor tensor;
  ReduceOp op = ReduceOp::kSum;
};
struct AllGatherArgs {
  Tensor input;
  Tensor output;
  int64_t dim = 0;
  std::vector<int64_t> sizes;
};
struct ReduceScatterArgs {
  Tensor input;
  Tensor output;
  int64_t dim = 0;
  ReduceOp op = ReduceOp::kSum;
  std::vector<int64_t> sizes;
};
struct AllToAllArgs {
  Tensor input;
  Tensor output;
  int64_t split_dim = 0;
  int64_t concat_dim = 0;
  std::vector<int64_t> send_sizes;
  std::vector<int64_t> recv_sizes;
};
struct BroadcastArgs {
  Tensor tensor;
  int64_t root = 0;
};
// Scatter and gather take the same arguments (the root's pieces along `dim`)
// and differ in direction; `Direction` makes them two types.
template <typename Direction>
struct RootedPiecesArgs {
  Tensor input;
  Tensor output;
  int64_t dim = 0;
  int64_t root = 0;
  std::vector<int64_t> sizes;
};
using ScatterArgs = RootedPiecesArgs<struct ScatterDirection>;
using GatherArgs = RootedPiecesArgs<struct GatherDirection>;
struct PermuteArgs {
  Tensor input;
  Tensor output;
  std::vector<PermutePair> pairs;
};
struct BarrierArgs {};
struct SendArgs {
  Tensor tensor;
  int64_t dst = 0;
};
struct RecvArgs {
  Tensor tensor;
  int64_t src = 0;
};

// Any one call. Adding a collective: an Args struct here, its name in
// CollectiveOpName, its checks and signature in call_checks.cc, a
// Communicator method, and a case in each backend's Start.
using CollectiveArgs =
    std::variant<AllReduceArgs, AllGatherArgs, ReduceScatterArgs, AllToAllArgs,
                 BroadcastArgs, ScatterArgs, GatherArgs, PermuteArgs,
                 BarrierArgs, SendArgs, RecvArgs>;

// "all_reduce", "all_gather", ..., "send", "recv" (a string literal).
absl::string_view CollectiveOpName(const CollectiveArgs& args);

// Send and recv pair up per (src, dst) and are not numbered; every other
// call is a collective of the whole group.
bool IsPointToPoint(const CollectiveArgs& args);

// One checked call on its way to a backend: its arguments and what running
// it needs besides them.
struct CollectiveCall {
  CollectiveArgs args;
  // CollectiveOpName(args).
  absl::string_view op;
  // The call's number among its communicator's collectives (0, 1, ...); -1
  // for send and recv.
  int64_t sequence = -1;
  // How long the call may wait for its peers once it starts.
  absl::Duration deadline;
  // The caller waits for the call right away (the synchronous form): a
  // backend may run it on the calling thread.
  bool blocking = false;
  // In debug mode, what the backend checks against the peers' calls.
  std::optional<CallSignature> signature;
};

// Where `rank` sends and from where it receives in a permute over `pairs`.
struct PermutePeers {
  std::optional<int64_t> to;
  std::optional<int64_t> from;
};
PermutePeers PermutePeersOf(const std::vector<PermutePair>& pairs,
                            int64_t rank);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_COLLECTIVE_CALL_H_
