#ifndef DTENSOR_OPS_RING_ATTENTION_INTERNAL_H_
#define DTENSOR_OPS_RING_ATTENTION_INTERNAL_H_

// What RingAttention and its backward (ring_attention.cc,
// ring_attention_backward.cc) share: the ring's geometry and its transfers.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/ring_attention.h"
#include "dtensor/redistribute/cost_model.h"

namespace dtensor {
namespace ops {
namespace internal {

// What the ranks of one ring share, and this rank's place in it.
struct Ring {
  RingAttentionOptions options;
  int64_t cp = 1;
  int64_t member = 0;
  // Global sequence lengths of the queries and the keys.
  int64_t lq = 0;
  int64_t lk = 0;
  double scale = 1.0;
  // The sequence dim of every operand.
  int64_t seq = 0;
  std::shared_ptr<Communicator> comm;
  // Member i sends to member i + 1.
  std::vector<PermutePair> next;
  std::optional<CostModel> cost_model;  // Set by RingOf.
  std::vector<int64_t> mesh_shape;

  std::vector<SequenceSegment> QuerySegments() const {
    return SegmentsOf(lq, cp, member, options.order);
  }
  // The key segments of the block that member `holder` owns.
  std::vector<SequenceSegment> KeySegments(int64_t holder) const {
    return SegmentsOf(lk, cp, holder, options.order);
  }
  // The member whose block this rank holds at ring step `step`.
  int64_t HolderAt(int64_t step) const {
    return ((member - step) % cp + cp) % cp;
  }
};

// The ring of q, k, v after checking their meshes, placements and lengths.
absl::StatusOr<Ring> RingOf(const DTensor& q, const DTensor& k,
                            const DTensor& v,
                            const RingAttentionOptions& options);

// A block in flight: the tensor it lands in and the call's handle.
struct Transfer {
  Tensor received;
  std::shared_ptr<Work> work;
};

// Records a transfer of a block of `shape` and `dtype` to the next member
// (CommCounter) under `what`, without moving data.
void CountTransfer(const Ring& ring, const Shape& shape, DType dtype,
                   const char* what);

// Starts sending `send` to the next member and receiving the previous
// member's into a new tensor of `shape`; the collective is counted
// (CommCounter) under `what`.
absl::StatusOr<Transfer> StartTransfer(const Ring& ring, const Tensor& send,
                                       Shape shape, const char* what);

// The key and value blocks in flight to the next member.
struct KeyValueTransfer {
  Transfer keys;
  Transfer values;
};

// Starts passing `keys` and `values` (the block held at ring step `step`)
// on, unless `step` is the last (then nothing is in flight).
absl::StatusOr<KeyValueTransfer> PassKeysAndValues(const Ring& ring,
                                                   int64_t step,
                                                   const Tensor& keys,
                                                   const Tensor& values);

// Waits for `t` and moves the received blocks into keys and values (nothing
// when nothing was in flight).
absl::Status Receive(KeyValueTransfer& t, Tensor& keys, Tensor& values);

// The shape of the block that member `holder` owns of a tensor whose local
// shard (a k or v shard, or its gradient) has shape `local` here.
Shape BlockShape(const Ring& ring, const Shape& local, int64_t holder);

// The shape of this rank's shard of `t`, with or without data.
absl::StatusOr<Shape> LocalShape(const DTensor& t);

// Rows [begin, end) of `t`'s sequence dim (a view).
absl::StatusOr<Tensor> Rows(const Ring& ring, const Tensor& t, int64_t begin,
                            int64_t end);

}  // namespace internal
}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_RING_ATTENTION_INTERNAL_H_
