// ops::LossParallelScope: cross_entropy under the scope keeps class-sharded
// logits sharded (no gather, no all-to-all of the logits) where the cost model
// alone would move them, and computes the same loss as plain loops in double
// on random meshes and layouts.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOnRandomShardings;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

TEST(LossParallelScopeTest, ScopesNestPerThread) {
  EXPECT_FALSE(ops::LossParallelScope::Active());
  {
    ops::LossParallelScope outer;
    EXPECT_TRUE(ops::LossParallelScope::Active());
    {
      ops::LossParallelScope inner;
      EXPECT_TRUE(ops::LossParallelScope::Active());
    }
    EXPECT_TRUE(ops::LossParallelScope::Active());
  }
  EXPECT_FALSE(ops::LossParallelScope::Active());
}

MetaOutcome ScopedCrossEntropyOnMeta(const Shape& logits_shape,
                                     const std::string& logits,
                                     const std::string& target) {
  return RunOnMeta(
      {2, 2},
      {{logits_shape, logits}, {{logits_shape[0]}, target, DType::kI64}},
      [](const In& in) {
        ops::LossParallelScope loss_parallel;
        return ops::CrossEntropy(in[0], in[1]);
      });
}

// 8 rows of 4096 classes on dp=2 x tp=2: gathering the vocab-sharded logits
// (64 KiB per rank) is what the cost model picks without the scope
// (docs/comm_counts.md); under it, the kernel all-reduces the row max and the
// (sum of exp, target logit) over tp and the loss sum with the count over
// dp (one all-reduce, leaving the mean complete), nothing else.
TEST(LossParallelScopeTest, ClassShardedLogitsAreNeverMoved) {
  for (const char* logits : {"S(0),S(1)", "R,S(1)"}) {
    const char* target = std::string(logits) == "R,S(1)" ? "R,R" : "S(0),R";
    const MetaOutcome o = ScopedCrossEntropyOnMeta({8, 4096}, logits, target);
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.comms.count(CommKind::kAllGather), 0) << logits;
    EXPECT_EQ(o.comms.count(CommKind::kAllToAll), 0) << logits;
    const int64_t count_all_reduce = std::string(target) == "S(0),R" ? 1 : 0;
    EXPECT_EQ(o.comms.count(CommKind::kAllReduce), 2 + count_all_reduce)
        << logits;
    EXPECT_EQ(o.comms.total_collectives(), 2 + count_all_reduce) << logits;
    EXPECT_EQ(o.sharding, "R,R") << logits;
  }
}

// Mean cross entropy with ignore_index, in double loops: logits [N, C] (or
// [C] with a 0-d target).
absl::StatusOr<Tensor> ReferenceLoss(const Tensor& logits, const Tensor& target,
                                     int64_t ignore_index) {
  DT_ASSIGN_OR_RETURN(Tensor x, logits.To(DType::kF64));
  DT_ASSIGN_OR_RETURN(Tensor t, target.To(DType::kI64));
  x = x.Contiguous();
  t = t.Contiguous();
  const int64_t c = x.shape().back();
  const int64_t n = x.dim() == 2 ? x.size(0) : 1;
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = t.data<int64_t>()[i];
    if (label == ignore_index) continue;
    const double* row = x.data<double>() + i * c;
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j]);
    total += std::log(sum) - row[label];
    ++count;
  }
  return Tensor::Scalar(count == 0 ? std::nan("") : total / count,
                        logits.dtype());
}

// Random calls with a quarter of the targets ignored; many land on layouts
// that shard the classes, where the scope restricts the strategies.
OpCall ScopedCrossEntropyCall(std::mt19937& rng) {
  const bool batched = rng() % 4 != 0;
  const int64_t n = 1 + rng() % 7;
  const int64_t classes = 1 + rng() % 9;
  const int64_t ignore_index = -100;
  std::vector<int64_t> targets(batched ? n : 1);
  for (int64_t& v : targets) {
    v = rng() % 4 == 0 ? ignore_index : static_cast<int64_t>(rng() % classes);
  }
  OpCall c;
  c.op = "cross_entropy";
  c.description = absl::StrCat("cross_entropy under LossParallelScope, ",
                               classes, " classes");
  c.inputs = {
      RandomTensor(batched ? Shape{n, classes} : Shape{classes},
                   rng() % 3 == 0 ? DType::kF64 : DType::kF32, -3, 3, rng),
      *Tensor::FromVector(targets, batched ? Shape{n} : Shape{})};
  c.args.AddInt(static_cast<int64_t>(Reduction::kMean)).AddInt(ignore_index);
  c.call = OneOutput([](const In& in) {
    ops::LossParallelScope loss_parallel;
    return ops::CrossEntropy(in[0], in[1]);
  });
  c.reference = OneReference([ignore_index](const Full& in) {
    return ReferenceLoss(in[0], in[1], ignore_index);
  });
  return c;
}

TEST(LossParallelScopePropertyTest, MatchesPlainLoopsOnRandomShardings) {
  const absl::Status status = CheckOnRandomShardings(
      31, 5, 10, ScopedCrossEntropyCall, /*rtol=*/1e-4, /*atol=*/1e-4);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
