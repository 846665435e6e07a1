#include "dtensor/collectives/gloo/chain_all_reduce.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "dtensor/collectives/gloo/tensor_transfer.h"
#include "dtensor/collectives/reduce_kernel.h"
#include "gloo/transport/unbound_buffer.h"

namespace dtensor {
namespace {

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

// The bytes of partial results a chunk carries: large enough that a message
// costs far more in transfer than in latency, small enough that the chain
// fills quickly (a 3-rank chain of 1 MiB gradients runs in 4 chunks).
constexpr int64_t kChunkBytes = int64_t{1} << 18;

// The flattened tensor's chunks: [begin(c), begin(c) + length(c)).
struct Chunks {
  int64_t count;
  int64_t per_chunk;
  int64_t num() const { return (count + per_chunk - 1) / per_chunk; }
  int64_t begin(int64_t c) const { return c * per_chunk; }
  int64_t length(int64_t c) const {
    return std::min(per_chunk, count - begin(c));
  }
};

}  // namespace

void ChainAllReduce(gloo::Context& context, DType dtype, ReduceOp op,
                    void* data, int64_t count, uint64_t partial_slot,
                    uint64_t result_slot, absl::Time deadline) {
  const int me = context.rank;
  const int n = context.size;
  const bool last = me == n - 1;
  const int64_t size = static_cast<int64_t>(ElementSize(dtype));
  const int64_t acc_size =
      static_cast<int64_t>(ElementSize(AccumulatorDType(dtype)));
  const Chunks chunks{count, std::max<int64_t>(1, kChunkBytes / acc_size)};
  std::vector<uint8_t> acc(count * acc_size);
  uint8_t* const out = static_cast<uint8_t*>(data);
  auto buffer = [&](uint8_t* base, int64_t element_size, int64_t c) {
    return context.createUnboundBuffer(base + chunks.begin(c) * element_size,
                                       chunks.length(c) * element_size);
  };
  // Every receive of a partial result is posted up front; Gloo matches the
  // messages of one peer and slot in order.
  std::vector<Buffer> partials(chunks.num());
  std::vector<Buffer> results(chunks.num());
  std::vector<Buffer> sends;
  for (int64_t c = 0; c < chunks.num() && me > 0; ++c) {
    partials[c] = buffer(acc.data(), acc_size, c);
    partials[c]->recv(me - 1, partial_slot);
  }
  for (int64_t c = 0; c < chunks.num(); ++c) {
    if (me > 0) partials[c]->waitRecv(GlooTimeout(deadline));
    const int64_t at = chunks.begin(c);
    uint8_t* const mine = out + at * size;
    if (last) {
      FinishAccumulated(dtype, op, acc.data() + at * acc_size, mine, n, mine,
                        chunks.length(c));
      sends.push_back(buffer(out, size, c));
      sends.back()->send(0, result_slot);
      continue;
    }
    AccumulateInto(dtype, op, me == 0, mine, acc.data() + at * acc_size,
                   chunks.length(c));
    sends.push_back(buffer(acc.data(), acc_size, c));
    sends.back()->send(me + 1, partial_slot);
    // This rank's elements of chunk c are read: the result may land there.
    results[c] = buffer(out, size, c);
    results[c]->recv(me == 0 ? n - 1 : me - 1, result_slot);
  }
  for (int64_t c = 0; c < chunks.num() && !last; ++c) {
    results[c]->waitRecv(GlooTimeout(deadline));
    if (me + 1 < n - 1) results[c]->send(me + 1, result_slot);
  }
  for (const Buffer& sent : sends) sent->waitSend(GlooTimeout(deadline));
  for (int64_t c = 0; c < chunks.num() && me + 1 < n - 1; ++c) {
    results[c]->waitSend(GlooTimeout(deadline));
  }
}

}  // namespace dtensor
