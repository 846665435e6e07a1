#include "dtensor/testing/comm_matchers.h"

#include <string>
#include <vector>

#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/placement.h"
#include "dtensor/testing/op_checks.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using ::testing::DescribeMatcher;
using ::testing::Eq;
using ::testing::ExplainMatchResult;
using ::testing::HasSubstr;
using ::testing::Matcher;
using ::testing::Not;
using ::testing::StringMatchResultListener;
using testing_util::IssuedCollectives;
using testing_util::IssuedCollectiveSequence;
using testing_util::IssuedNoCollectives;
using testing_util::ReceivedBytes;

CommCounter::Event Step(CommKind kind, double bytes, std::string label) {
  CommCounter::Event event;
  event.kind = kind;
  event.mesh_dims = {0};
  event.bytes = bytes;
  event.label = std::move(label);
  return event;
}

// A counter holding `events`, recorded as DTensor code records them.
CommCounter Recorded(const std::vector<CommCounter::Event>& events) {
  CommCounter counter;
  CommCounter::Scope scope(counter);
  for (const CommCounter::Event& event : events) {
    CommCounter::RecordOnThread(event);
  }
  return counter;
}

std::string Explain(const Matcher<const CommCounter&>& matcher,
                    const CommCounter& counter) {
  StringMatchResultListener listener;
  ExplainMatchResult(matcher, counter, &listener);
  return listener.str();
}

TEST(CommMatchersTest, CountsByKindExactly) {
  const CommCounter counter =
      Recorded({Step(CommKind::kAllGather, 96, "S(0) -> R"),
                Step(CommKind::kLocal, 0, "R -> S(1)"),
                Step(CommKind::kAllReduce, 32, "P -> R"),
                Step(CommKind::kAllGather, 16, "S(1) -> R")});
  EXPECT_THAT(counter, IssuedCollectives({{CommKind::kAllGather, 2},
                                          {CommKind::kAllReduce, 1}}));
  // A count of zero is the same as leaving the kind out.
  EXPECT_THAT(counter, IssuedCollectives({{CommKind::kAllGather, 2},
                                          {CommKind::kAllReduce, 1},
                                          {CommKind::kAllToAll, 0}}));
  EXPECT_THAT(counter, Not(IssuedCollectives({{CommKind::kAllGather, 2}})));
  EXPECT_THAT(counter, Not(IssuedCollectives({{CommKind::kAllGather, 1},
                                              {CommKind::kAllReduce, 1}})));
  EXPECT_THAT(counter, Not(IssuedNoCollectives()));
}

TEST(CommMatchersTest, LocalStepsAreNotCollectives) {
  const CommCounter counter =
      Recorded({Step(CommKind::kLocal, 0, "R -> S(0)")});
  EXPECT_THAT(counter, IssuedNoCollectives());
  EXPECT_THAT(counter, IssuedCollectiveSequence({}));
  EXPECT_THAT(CommCounter(), IssuedNoCollectives());
}

TEST(CommMatchersTest, SequenceIsOrdered) {
  const CommCounter counter =
      Recorded({Step(CommKind::kReduceScatter, 8, "P -> S(0)"),
                Step(CommKind::kLocal, 0, "R -> S(1)"),
                Step(CommKind::kAllGather, 8, "S(0) -> R")});
  EXPECT_THAT(counter, IssuedCollectiveSequence(
                           {CommKind::kReduceScatter, CommKind::kAllGather}));
  EXPECT_THAT(counter, Not(IssuedCollectiveSequence(
                           {CommKind::kAllGather, CommKind::kReduceScatter})));
  EXPECT_THAT(counter,
              Not(IssuedCollectiveSequence({CommKind::kReduceScatter})));
}

TEST(CommMatchersTest, BytesAreTheTotalReceived) {
  const CommCounter counter =
      Recorded({Step(CommKind::kAllGather, 96, "S(0) -> R"),
                Step(CommKind::kAllReduce, 32, "P -> R")});
  EXPECT_THAT(counter, ReceivedBytes(Eq(128.0)));
  EXPECT_THAT(counter, Not(ReceivedBytes(Eq(96.0))));
}

TEST(CommMatchersTest, FailuresListTheRecordedSteps) {
  const CommCounter counter =
      Recorded({Step(CommKind::kAllToAll, 48, "S(0) -> S(1)")});
  const Matcher<const CommCounter&> matcher =
      IssuedCollectives({{CommKind::kAllGather, 1}});
  EXPECT_EQ(DescribeMatcher<const CommCounter&>(matcher),
            "issued exactly 1 all_gather and no other collective");
  EXPECT_THAT(Explain(matcher, counter),
              HasSubstr("all_to_all on mesh dims [0] (S(0) -> S(1))"));
  EXPECT_THAT(Explain(IssuedNoCollectives(), CommCounter()),
              HasSubstr("no step"));
}

// A matcher argument that names local steps can never describe a
// communication: it fails the test where it is built, even under Not(), and
// its explanation says why, instead of aborting or silently never matching.
TEST(CommMatchersTest, BadArgumentsAreTestFailuresThatSayWhy) {
  const CommCounter counter =
      Recorded({Step(CommKind::kLocal, 0, "R -> S(0)")});
  EXPECT_NONFATAL_FAILURE(
      EXPECT_THAT(counter, Not(IssuedCollectives({{CommKind::kLocal, 1}}))),
      "count (1) for local");
  EXPECT_NONFATAL_FAILURE(IssuedCollectives({{CommKind::kAllGather, -1}}),
                          "negative count (-1) for all_gather");
  EXPECT_NONFATAL_FAILURE(IssuedCollectiveSequence({CommKind::kLocal}),
                          "IssuedCollectiveSequence was given local");
  std::string explanation;
  EXPECT_NONFATAL_FAILURE(
      explanation =
          Explain(IssuedCollectives({{CommKind::kLocal, 1}}), counter),
      "bad matcher argument");
  EXPECT_THAT(explanation, HasSubstr("cannot be checked"));
}

// On a real redistribution: S(0) -> R of an 8x6 f32 tensor over 4 ranks is
// one all-gather in which each rank receives the other 3/4 of 192 bytes.
TEST(CommMatchersTest, MatchesTheCollectivesOfARedistribution) {
  const testing_util::MetaOutcome outcome = testing_util::RunOnMeta(
      {4}, {{{8, 6}, "S(0)"}}, [](const std::vector<DTensor>& in) {
        return in[0].Redistribute({Placement::Replicate()});
      });
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.sharding, "R");
  EXPECT_THAT(outcome.comms, IssuedCollectives({{CommKind::kAllGather, 1}}));
  EXPECT_THAT(outcome.comms, ReceivedBytes(Eq(144.0)));
}

// The example of docs/testing.md: a row-wise linear on 1024 ranks gives a
// Partial(sum) output with no collective; reading it is one all-reduce.
TEST(CommMatchersTest, RowwiseLinearOnAThousandRanks) {
  using testing_util::In;
  testing_util::MetaOutcome o = testing_util::RunOnMeta(
      {1024}, {{{8, 4096}, "S(1)"}, {{4096, 4096}, "S(0)"}},
      [](const In& in) { return ops::Matmul(in[0], in[1]); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());

  o = testing_util::RunOnMeta(
      {1024}, {{{8, 4096}, "P(sum)"}}, [](const In& in) {
        return in[0].Redistribute({Placement::Replicate()});
      });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_THAT(o.comms, IssuedCollectives({{CommKind::kAllReduce, 1}}));
}

}  // namespace
}  // namespace dtensor
