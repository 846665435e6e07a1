#ifndef DTENSOR_COLLECTIVES_INPROCESS_POSTING_H_
#define DTENSOR_COLLECTIVES_INPROCESS_POSTING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "dtensor/collectives/call_signature.h"
#include "dtensor/collectives/collective_call.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// What one rank publishes for a collective of the in-process backend: its
// arguments, with views of its tensors that the peers read in place. Shared
// (and so kept alive) until every rank is done with it. Each op uses the
// fields its arguments need.
struct Posting {
  absl::string_view op;  // A string literal: "all_reduce", ...
  int64_t sequence = 0;
  std::optional<CallSignature> signature;  // In debug mode.
  Tensor input;
  Tensor output;
  int64_t dim = 0;         // all_gather, reduce_scatter, scatter, gather;
                           // the split dim of all_to_all.
  int64_t concat_dim = 0;  // all_to_all.
  ReduceOp reduce = ReduceOp::kSum;
  int64_t root = 0;
  std::vector<int64_t> sizes;       // Piece sizes; all_to_all's send sizes.
  std::vector<int64_t> recv_sizes;  // all_to_all.
  std::vector<PermutePair> pairs;
};

// Every rank's posting for one collective, in group order.
using Postings = std::vector<std::shared_ptr<const Posting>>;

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_POSTING_H_
