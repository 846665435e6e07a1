#ifndef DTENSOR_NN_RING_ATTENTION_H_
#define DTENSOR_NN_RING_ATTENTION_H_

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/ring_attention.h"

namespace dtensor {
namespace nn {

// ops::RingAttention (dtensor/ops/ring_attention.h) as autograd sees it: the
// call is recorded on the gradient tapes of this thread, and its backward is
// ops::RingAttentionBackward (the key/value blocks travel the ring again with
// their gradients). Returns the attention's output.
// Errors: those of ops::RingAttention.
absl::StatusOr<DTensor> RingAttention(const DTensor& q, const DTensor& k,
                                      const DTensor& v,
                                      const ops::RingAttentionOptions& options);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_RING_ATTENTION_H_
