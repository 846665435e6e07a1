// The tiled attention (dtensor/tensor/attention.h) makes no [Lq, Lk] matrix:
// with Lq = Lk = 16384 the f32 scores of one head alone would take 1 GiB, yet
// the forward and the backward together raise the process's peak resident
// memory (getrusage's ru_maxrss) by far less. One head of dim 2 keeps the
// arithmetic, and the run time, small.
#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/nn_functional.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

int64_t PeakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux.
}

bool AllFinite(const Tensor& t) {
  const std::vector<float> host_values = t.ToVector<float>().value();
  for (const float x : host_values) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

TEST(AttentionMemoryTest, LongSequencesMakeNoScoreMatrix) {
  constexpr int64_t kSeq = 16384;
  constexpr int64_t kScoreBytes = kSeq * kSeq * sizeof(float);
  Generator generator(1);
  const auto random = [&generator](const Shape& shape) {
    return Tensor::Uniform(shape, -1, 1, generator).value();
  };
  const Tensor q = random({1, kSeq, 2});
  const Tensor k = random({1, kSeq, 2});
  const Tensor v = random({1, kSeq, 2});
  const Tensor grad = random({1, kSeq, 2});
  const int64_t before = PeakResidentBytes();
  absl::StatusOr<Tensor> out = ScaledDotProductAttention(q, k, v, true);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<AttentionGrads> grads =
      ScaledDotProductAttentionBackward(q, k, v, *out, grad, true);
  ASSERT_TRUE(grads.ok()) << grads.status();
  const int64_t growth = PeakResidentBytes() - before;
  EXPECT_LT(growth, kScoreBytes / 16)
      << "peak resident memory grew by " << growth << " bytes";
  EXPECT_TRUE(AllFinite(*out));
  EXPECT_TRUE(AllFinite(grads->dq));
  EXPECT_TRUE(AllFinite(grads->dk));
  EXPECT_TRUE(AllFinite(grads->dv));
}

}  // namespace
}  // namespace dtensor
