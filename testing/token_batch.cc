#include "dtensor/testing/token_batch.h"

#include <utility>
#include <vector>

#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace testing {

absl::StatusOr<TokenBatch> UniformTokenBatch(Generator& generator,
                                             int64_t vocab_size, int64_t batch,
                                             int64_t seq) {
  std::vector<int64_t> tokens(batch * seq);
  std::vector<int64_t> targets(batch * seq);
  for (int64_t i = 0; i < batch * seq; ++i) {
    tokens[i] = generator.NextU32() % vocab_size;
    targets[i] = generator.NextU32() % vocab_size;
  }
  TokenBatch result;
  DT_ASSIGN_OR_RETURN(result.tokens, Tensor::FromVector(tokens, {batch, seq}));
  DT_ASSIGN_OR_RETURN(result.targets,
                      Tensor::FromVector(targets, {batch, seq}));
  return result;
}

}  // namespace testing
}  // namespace dtensor
