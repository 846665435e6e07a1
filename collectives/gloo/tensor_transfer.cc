#include "dtensor/collectives/gloo/tensor_transfer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/collectives/argument_checks.h"

namespace dtensor {
namespace {

constexpr size_t kTextBytes = 120;

// What the sender announces, and what the receiver answers.
struct Header {
  uint64_t nbytes = 0;
  char text[kTextBytes] = {};
};
struct Ack {
  uint64_t accepted = 0;
  char text[kTextBytes] = {};
};

void PutText(char (&out)[kTextBytes], absl::string_view text) {
  std::memset(out, 0, kTextBytes);
  std::memcpy(out, text.data(), std::min(text.size(), kTextBytes - 1));
}

std::string GetText(const char (&in)[kTextBytes]) {
  return std::string(in, ::strnlen(in, kTextBytes));
}

absl::Status Mismatch(const TransferNames& names, absl::string_view sent,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(names.call, ": rank ", names.src_rank, " sends ", sent,
                   " but rank ", names.dst_rank, " receives into ", expected));
}

absl::Status Aborted(const TransferNames& names) {
  return absl::AbortedError(absl::StrCat(names.call, ": transfer aborted"));
}

using BufferPtr = std::unique_ptr<gloo::transport::UnboundBuffer>;

}  // namespace

std::chrono::milliseconds GlooTimeout(absl::Time deadline) {
  const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
  return std::chrono::milliseconds(std::max<int64_t>(left, 1));
}

// The buffers are declared after the memory they point into, so that they
// go first.
struct OutgoingTransfer::Wire {
  Header header;
  Ack ack;
  BufferPtr header_buffer;
  BufferPtr payload_buffer;
  BufferPtr ack_buffer;
};

OutgoingTransfer::OutgoingTransfer(gloo::Context& context, int dst,
                                   TransferSlots slots, const Tensor& tensor)
    : wire_(std::make_unique<Wire>()) {
  wire_->header.nbytes = tensor.nbytes();
  PutText(wire_->header.text, TensorText(tensor));
  wire_->ack_buffer = context.createUnboundBuffer(&wire_->ack, sizeof(Ack));
  wire_->ack_buffer->recv(dst, slots.ack);
  wire_->header_buffer =
      context.createUnboundBuffer(&wire_->header, sizeof(Header));
  wire_->header_buffer->send(dst, slots.header);
  if (tensor.nbytes() > 0) {
    wire_->payload_buffer =
        context.createUnboundBuffer(tensor.raw_data(), tensor.nbytes());
    wire_->payload_buffer->send(dst, slots.payload);
  }
}

OutgoingTransfer::~OutgoingTransfer() = default;

absl::Status OutgoingTransfer::Finish(absl::Time deadline,
                                      const TransferNames& names) {
  if (!wire_->header_buffer->waitSend(GlooTimeout(deadline))) {
    return Aborted(names);
  }
  if (wire_->payload_buffer != nullptr &&
      !wire_->payload_buffer->waitSend(GlooTimeout(deadline))) {
    return Aborted(names);
  }
  if (!wire_->ack_buffer->waitRecv(GlooTimeout(deadline))) {
    return Aborted(names);
  }
  if (wire_->ack.accepted != 0) return absl::OkStatus();
  return Mismatch(names, GetText(wire_->header.text), GetText(wire_->ack.text));
}

struct IncomingTransfer::Wire {
  gloo::Context& context;
  int src;
  TransferSlots slots;
  Tensor tensor;
  Header header;
  Ack ack;
  std::vector<char> scratch;
  BufferPtr header_buffer;
  BufferPtr payload_buffer;
  BufferPtr ack_buffer;
};

IncomingTransfer::IncomingTransfer(gloo::Context& context, int src,
                                   TransferSlots slots, const Tensor& tensor)
    : wire_(new Wire{context, src, slots, tensor}) {
  wire_->header_buffer =
      context.createUnboundBuffer(&wire_->header, sizeof(Header));
  wire_->header_buffer->recv(src, slots.header);
}

IncomingTransfer::~IncomingTransfer() = default;

absl::Status IncomingTransfer::Finish(absl::Time deadline,
                                      const TransferNames& names) {
  Wire& wire = *wire_;
  if (!wire.header_buffer->waitRecv(GlooTimeout(deadline))) {
    return Aborted(names);
  }
  const std::string expected = TensorText(wire.tensor);
  const std::string sent = GetText(wire.header.text);
  const bool accepted =
      wire.header.nbytes == wire.tensor.nbytes() && sent == expected;
  if (wire.header.nbytes > 0) {
    // A mismatched payload is drained into scratch memory of its own size.
    void* target = wire.tensor.raw_data();
    if (!accepted) {
      wire.scratch.resize(wire.header.nbytes);
      target = wire.scratch.data();
    }
    wire.payload_buffer =
        wire.context.createUnboundBuffer(target, wire.header.nbytes);
    wire.payload_buffer->recv(wire.src, wire.slots.payload);
    if (!wire.payload_buffer->waitRecv(GlooTimeout(deadline))) {
      return Aborted(names);
    }
  }
  wire.ack.accepted = accepted ? 1 : 0;
  PutText(wire.ack.text, expected);
  wire.ack_buffer = wire.context.createUnboundBuffer(&wire.ack, sizeof(Ack));
  wire.ack_buffer->send(wire.src, wire.slots.ack);
  if (!wire.ack_buffer->waitSend(GlooTimeout(deadline))) return Aborted(names);
  return accepted ? absl::OkStatus() : Mismatch(names, sent, expected);
}

}  // namespace dtensor
