// Rule (a) of the cost rule (docs/ops.md) on real ops, like with like: a
// strategy that redistributes an input with a collective is charged for
// reading its outputs whole, Partial and Shard alike, when a Partial of the
// call is charged, and ties go to the one that spends less now. Both sides:
// the cheaper choice taken (a P x P product all-reduces one factor and stays
// Partial), and the cases where the old choice stays right (max of a
// Partial, large products, relu of a Partial, softmax over a sharded dim, a
// summed cross entropy of small class-sharded logits); and a mean cross
// entropy over batch-sharded logits is complete after one all-reduce. Bytes
// are the bytes a rank receives, derived by hand for f32 on 4 ranks: an
// all-reduce of B bytes 2 (n-1)/n B, a reduce-scatter (n-1)/n B, an
// all-gather of a block of b bytes (n-1) b.
#include <vector>

#include "dtensor/comm_counter.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/nn_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::MetaOutcome;
using testing_util::RunOnMeta;
using In = std::vector<DTensor>;

constexpr double kAllReduce8x8 = 2.0 * 3 / 4 * 8 * 8 * 4;  // 384
constexpr double kReduceScatter8x8 = 3.0 / 4 * 8 * 8 * 4;  // 192

// mm of two P(sum) 8x8 on 4 ranks. Read whole, each way pays 768 bytes:
// all-reduce one (384) and complete the P(sum) product (384), or
// reduce-scatter one (192), all-reduce the other (384) and gather the S(0)
// product (192); the first spends 384 now and 1 collective, and nothing more
// when a linear op reads it.
TEST(PropagationChargeTest, PartialProductsAllReduceOneFactor) {
  for (const char* partial : {"P(sum)", "P(avg)"}) {
    MetaOutcome o =
        RunOnMeta({4}, {{{8, 8}, partial}, {{8, 8}, partial}},
                  [](const In& in) { return ops::Mm(in[0], in[1]); });
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, partial);
    EXPECT_EQ(o.comms.total_collectives(), 1) << o.comms.Summary();
    EXPECT_EQ(o.comms.count(CommKind::kAllReduce), 1);
    EXPECT_DOUBLE_EQ(o.comms.total_bytes(), kAllReduce8x8);
  }
  // mul: all-reduce one (384) + complete (384) = 768 read whole, against
  // reduce-scattering both (2 x 192) and gathering the S(0) product (192):
  // 576 bytes but 3 collectives, whose latency (6.6 us each) outweighs the
  // 192 bytes at this size.
  MetaOutcome o =
      RunOnMeta({4}, {{{8, 8}, "P(sum)"}, {{8, 8}, "P(sum)"}},
                [](const In& in) { return ops::Mul(in[0], in[1]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_EQ(o.comms.total_collectives(), 1) << o.comms.Summary();
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), kAllReduce8x8);
}

TEST(PropagationChargeTest, TheOldChoiceStandsWhereItIsCheaper) {
  // A large P x P product: reduce-scattering both factors (2 x 3 MiB) and
  // gathering the product (3 MiB) beats two all-reduces (2 x 6 MiB).
  const double mib = 1 << 20;
  MetaOutcome o =
      RunOnMeta({4}, {{{1024, 1024}, "P(sum)"}, {{1024, 1024}, "P(sum)"}},
                [](const In& in) { return ops::Mul(in[0], in[1]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_EQ(o.comms.count(CommKind::kReduceScatter), 2) << o.comms.Summary();
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), 2 * 3.0 / 4 * 4 * mib);
  // A max over a P(sum): one all-reduce to R (384), not a reduce-scatter
  // (192) leaving a P(max) that a second collective completes.
  o = RunOnMeta({4}, {{{8, 8}, "P(sum)"}},
                [](const In& in) { return ops::Amax(in[0]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.comms.total_collectives(), 1) << o.comms.Summary();
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), kAllReduce8x8);
  // No strategy leaves a Partial: relu of a P(sum) reduce-scatters it (192),
  // softmax over a sharded dim moves its shards (one all-to-all), as before.
  o = RunOnMeta({4}, {{{8, 8}, "P(sum)"}},
                [](const In& in) { return ops::Relu(in[0]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), kReduceScatter8x8);
  o = RunOnMeta({4}, {{{8, 6}, "S(1)"}},
                [](const In& in) { return ops::Softmax(in[0], 1); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_EQ(o.comms.count(CommKind::kAllToAll), 1) << o.comms.Summary();
  // A summed cross entropy of small class-sharded logits (8 x 16) gathers
  // them (3 x 128 bytes) and returns R, rather than an all-to-all onto the
  // rows that leaves a P(sum) loss.
  o = RunOnMeta({4}, {{{8, 16}, "S(1)"}, {{8}, "R", DType::kI64}},
                [](const In& in) {
                  return ops::CrossEntropy(in[0], in[1], Reduction::kSum);
                });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.comms.count(CommKind::kAllGather), 1) << o.comms.Summary();
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), 3 * 128);
}

// Mean cross entropy of int64 targets [N] against logits of `shape`.
MetaOutcome MeanCrossEntropyOnMeta(const Shape& shape, const char* logits,
                                   const char* target) {
  return RunOnMeta({4}, {{shape, logits}, {{shape[0]}, target, DType::kI64}},
                   [](const In& in) {
                     return ops::CrossEntropy(in[0], in[1], Reduction::kMean);
                   });
}

// A mean over batch-sharded logits on 4 ranks: one all-reduce of the loss
// sum and count (16 bytes: 2 (n-1)/n x 16 = 24 received) leaves the loss
// complete, where a P(sum) loss would cost a second all-reduce to read and
// gathering the logits moves them all. A replicated target is sliced
// locally. Tiny logits (8 x 16 f32) are still gathered: by the cost model an
// all-gather of 128 bytes per rank (6.6 + 3 x 0.6 us + 384 B / 87.7 kB/us =
// 8.404 us) beats the all-reduce's 2 (n-1) steps (6.6 + 6 x 0.6 = 10.2 us).
TEST(PropagationChargeTest, BatchShardedMeanAllReducesSumAndCountOnce) {
  for (const char* target : {"S(0)", "R"}) {
    MetaOutcome o = MeanCrossEntropyOnMeta({1024, 1000}, "S(0)", target);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "R") << target;
    EXPECT_EQ(o.comms.total_collectives(), 1) << target;
    EXPECT_EQ(o.comms.count(CommKind::kAllReduce), 1) << target;
    EXPECT_DOUBLE_EQ(o.comms.total_bytes(), 2.0 * 3 / 4 * 16) << target;
  }
  MetaOutcome o = MeanCrossEntropyOnMeta({8, 16}, "S(0)", "R");
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.comms.count(CommKind::kAllGather), 1);
  EXPECT_EQ(o.comms.total_collectives(), 1);
  EXPECT_DOUBLE_EQ(o.comms.total_bytes(), 3 * 2 * 16 * 4);
}

}  // namespace
}  // namespace dtensor
