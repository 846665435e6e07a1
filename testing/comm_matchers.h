#ifndef DTENSOR_DTENSOR_TESTING_COMM_MATCHERS_H_
#define DTENSOR_DTENSOR_TESTING_COMM_MATCHERS_H_

// GoogleTest matchers of the collectives a CommCounter recorded: assert the
// exact communication of a call, as PyTorch's tests do with CommDebugMode.
//
//   CommCounter counter;
//   {
//     CommCounter::Scope scope(counter);
//     ASSERT_OK_AND_ASSIGN(DTensor y, ops::Matmul(x, w));
//   }
//   EXPECT_THAT(counter, IssuedCollectives({{CommKind::kAllReduce, 1}}));
//   EXPECT_THAT(counter, IssuedCollectiveSequence({CommKind::kAllGather,
//                                                  CommKind::kAllReduce}));
//   EXPECT_THAT(counter, IssuedNoCollectives());
//   EXPECT_THAT(counter, ReceivedBytes(testing::Le(4096)));
//
// Local steps (CommKind::kLocal: slicing a replicated tensor) move no data and
// are never counted as collectives. A failure lists the steps recorded, with
// their mesh dims and transitions.

#include <cstdint>
#include <map>
#include <vector>

#include "dtensor/comm_counter.h"
#include "dtensor/redistribute/cost_model.h"
#include "gmock/gmock.h"

namespace dtensor {
namespace testing_util {

// Exactly `counts` collectives of each kind listed and none of any other kind.
// Errors: a count for CommKind::kLocal or a negative count is a test failure
// where the matcher is built, with a message naming the entry, and the
// matcher never matches.
::testing::Matcher<const CommCounter&> IssuedCollectives(
    std::map<CommKind, int64_t> counts);

// The collectives, local steps skipped, are exactly `kinds`, in this order.
// Errors: a CommKind::kLocal in `kinds` is a test failure, as above.
::testing::Matcher<const CommCounter&> IssuedCollectiveSequence(
    std::vector<CommKind> kinds);

// No collective at all (local steps allowed).
::testing::Matcher<const CommCounter&> IssuedNoCollectives();

// The bytes this rank received over all steps (CommCounter::total_bytes)
// match `bytes`.
::testing::Matcher<const CommCounter&> ReceivedBytes(
    ::testing::Matcher<double> bytes);

}  // namespace testing_util
}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_TESTING_COMM_MATCHERS_H_
