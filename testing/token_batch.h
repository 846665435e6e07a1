#ifndef DTENSOR_TESTING_TOKEN_BATCH_H_
#define DTENSOR_TESTING_TOKEN_BATCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace testing {

// One language-model batch: token ids and next-token targets, both int64
// [batch, seq].
struct TokenBatch {
  Tensor tokens;
  Tensor targets;
};

// A batch whose tokens and targets are uniform in [0, vocab_size), drawn
// from `generator` alternately (token, target, token, ...) in row-major
// order, so that the same generator state gives the same batch everywhere.
// Requires: vocab_size, batch and seq positive.
// Errors: what Tensor::FromVector reports.
absl::StatusOr<TokenBatch> UniformTokenBatch(Generator& generator,
                                             int64_t vocab_size, int64_t batch,
                                             int64_t seq);

}  // namespace testing
}  // namespace dtensor

#endif  // DTENSOR_TESTING_TOKEN_BATCH_H_
