#ifndef DTENSOR_TESTS_TENSOR_ATTENTION_CASE_H_
#define DTENSOR_TESTS_TENSOR_ATTENTION_CASE_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/tensor/tensor.h"

// The problems the tensor-core attention tests (the host warp emulations of
// the forward and backward, and the kernels on a device) run: grouped-query
// heads, q [kAttentionKvHeads, kAttentionGroup, lq, e] and k, v
// [kAttentionKvHeads, 1, lk, e], so that query entry x (row-major over the
// first two dims) reads kv head x / kAttentionGroup.
namespace dtensor::testing {

inline constexpr int64_t kAttentionKvHeads = 2;
inline constexpr int64_t kAttentionGroup = 2;
inline constexpr int64_t kAttentionEntries =
    kAttentionKvHeads * kAttentionGroup;

struct AttentionCase {
  DType dtype;
  bool causal;
  int64_t lq;
  int64_t lk;
  int64_t e;

  // "bf16 causal lq 37 lk 1 e 64", for failure messages.
  std::string Name() const;

  // Whether query row `query` sees key `key`: every key without causal,
  // bottom-right aligned with it (key <= query + lk - lq).
  bool Sees(int64_t query, int64_t key) const;

  // The attention's scale, 1 / sqrt(e).
  double Scale() const;
};

// A case's operands, contiguous, uniform in [-1, 1) rounded to its dtype:
// q and dout [kAttentionKvHeads, kAttentionGroup, lq, e], k and v
// [kAttentionKvHeads, 1, lk, e] (broadcast over the group).
struct AttentionOperands {
  Tensor q, k, v, dout;
};

AttentionOperands DrawAttentionOperands(const AttentionCase& c,
                                        std::mt19937& rng);

// Every case over bf16 and f16, causal and not, head dims 16, 64, 80 and
// 128, and `lengths` ((lq, lk) pairs), nested in that order (the first the
// outermost).
std::vector<AttentionCase> TensorCoreAttentionCases(
    const std::vector<std::pair<int64_t, int64_t>>& lengths);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_ATTENTION_CASE_H_
