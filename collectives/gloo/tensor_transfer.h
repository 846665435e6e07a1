#ifndef DTENSOR_COLLECTIVES_GLOO_TENSOR_TRANSFER_H_
#define DTENSOR_COLLECTIVES_GLOO_TENSOR_TRANSFER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dtensor/tensor/tensor.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"

namespace dtensor {

// One tensor sent from one rank to another over a Gloo context (send/recv
// and permute). Gloo aborts the receiving process when a message is longer
// than the buffer posted for it, so the shapes are checked first: the
// sender sends a header (byte count and "f32[4, 8]") and the payload, the
// receiver checks the header and receives the payload (into a scratch buffer
// when the shapes differ, so that Gloo never gets more bytes than it
// expects), then acknowledges. On a mismatch both sides fail with the same
// InvalidArgument, and the channel stays usable.
//
// Gloo sends the payload only once the receiver has posted a buffer for it,
// so posting it with the header costs no extra round trip; the
// acknowledgement makes a send complete when the receiver has the data.
//
// The constructors and Finish methods throw Gloo's exceptions (a timeout, a
// lost peer); the caller turns them into statuses.

// The Gloo slots of one transfer's three messages.
struct TransferSlots {
  uint64_t header;
  uint64_t payload;
  uint64_t ack;
};

// Who sends to whom, for error messages: "<call>: rank 0 sends f32[4] but
// rank 1 receives into f32[8]" (global ranks).
struct TransferNames {
  std::string call;
  int64_t src_rank;
  int64_t dst_rank;
};

class OutgoingTransfer {
 public:
  // Posts the header and the payload of contiguous `tensor` (alive until
  // Finish returns) to group rank `dst`.
  OutgoingTransfer(gloo::Context& context, int dst, TransferSlots slots,
                   const Tensor& tensor);
  ~OutgoingTransfer();
  // Waits (until `deadline`) for the receiver's acknowledgement.
  absl::Status Finish(absl::Time deadline, const TransferNames& names);

 private:
  struct Wire;
  std::unique_ptr<Wire> wire_;
};

class IncomingTransfer {
 public:
  // Posts the receive of the header from group rank `src`; the payload goes
  // into contiguous `tensor` (alive until Finish returns).
  IncomingTransfer(gloo::Context& context, int src, TransferSlots slots,
                   const Tensor& tensor);
  ~IncomingTransfer();
  // Waits (until `deadline`) for the header, then the payload, and
  // acknowledges.
  absl::Status Finish(absl::Time deadline, const TransferNames& names);

 private:
  struct Wire;
  std::unique_ptr<Wire> wire_;
};

// What is left of `deadline` as a Gloo timeout: at least a millisecond, so
// that an expired deadline makes Gloo time out rather than wait forever.
std::chrono::milliseconds GlooTimeout(absl::Time deadline);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_TENSOR_TRANSFER_H_
