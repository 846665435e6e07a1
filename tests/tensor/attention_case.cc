#include "tests/tensor/attention_case.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::testing {

std::string AttentionCase::Name() const {
  return absl::StrCat(std::string(DTypeName(dtype)), causal ? " causal" : "",
                      " lq ", lq, " lk ", lk, " e ", e);
}

bool AttentionCase::Sees(int64_t query, int64_t key) const {
  return !causal || key <= query + (lk - lq);
}

double AttentionCase::Scale() const {
  return 1.0 / std::sqrt(static_cast<double>(e));
}

AttentionOperands DrawAttentionOperands(const AttentionCase& c,
                                        std::mt19937& rng) {
  AttentionOperands o;
  o.q = RandomTensor({kAttentionKvHeads, kAttentionGroup, c.lq, c.e}, c.dtype,
                     Layout::kContiguous, rng);
  o.k = RandomTensor({kAttentionKvHeads, 1, c.lk, c.e}, c.dtype,
                     Layout::kContiguous, rng);
  o.v = RandomTensor({kAttentionKvHeads, 1, c.lk, c.e}, c.dtype,
                     Layout::kContiguous, rng);
  o.dout = RandomTensor({kAttentionKvHeads, kAttentionGroup, c.lq, c.e},
                        c.dtype, Layout::kContiguous, rng);
  return o;
}

std::vector<AttentionCase> TensorCoreAttentionCases(
    const std::vector<std::pair<int64_t, int64_t>>& lengths) {
  std::vector<AttentionCase> cases;
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    for (const bool causal : {false, true}) {
      for (const int64_t e : {16, 64, 80, 128}) {
        for (const auto& [lq, lk] : lengths) {
          cases.push_back({dtype, causal, lq, lk, e});
        }
      }
    }
  }
  return cases;
}

}  // namespace dtensor::testing
