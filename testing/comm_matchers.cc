#include "dtensor/testing/comm_matchers.h"

#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace testing_util {
namespace {

using ::testing::MatchResultListener;

// "all_gather on mesh dims [0] (S(0),R -> R,R)".
std::string DescribeEvent(const CommCounter::Event& event) {
  return absl::StrCat(CommKindName(event.kind), " on mesh dims [",
                      absl::StrJoin(event.mesh_dims, ","), "] (", event.label,
                      ")");
}

// The recorded collectives, local steps skipped.
std::vector<CommKind> CollectiveKinds(const CommCounter& counter) {
  std::vector<CommKind> kinds;
  for (const CommCounter::Event& event : counter.events()) {
    if (event.kind != CommKind::kLocal) kinds.push_back(event.kind);
  }
  return kinds;
}

void ExplainSteps(const CommCounter& counter, MatchResultListener* listener) {
  if (counter.events().empty()) {
    *listener << "which recorded no step";
    return;
  }
  *listener << "which recorded: ";
  for (size_t i = 0; i < counter.events().size(); ++i) {
    *listener << (i == 0 ? "" : "; ") << DescribeEvent(counter.events()[i]);
  }
}

std::string JoinKinds(const std::vector<CommKind>& kinds) {
  return absl::StrJoin(kinds, ", ", [](std::string* out, CommKind kind) {
    absl::StrAppend(out, CommKindName(kind));
  });
}

// Why a matcher argument cannot describe a communication, or "" when it can.
// Local steps are never counted as collectives, so an expectation that names
// CommKind::kLocal (or a negative count) could never match.
std::string BadCountsError(const std::map<CommKind, int64_t>& counts) {
  for (const auto& [kind, count] : counts) {
    if (kind == CommKind::kLocal) {
      return absl::StrCat("IssuedCollectives was given a count (", count,
                          ") for ", CommKindName(kind),
                          ": local steps are never counted as collectives");
    }
    if (count < 0) {
      return absl::StrCat("IssuedCollectives was given a negative count (",
                          count, ") for ", CommKindName(kind));
    }
  }
  return "";
}

std::string BadSequenceError(const std::vector<CommKind>& kinds) {
  for (CommKind kind : kinds) {
    if (kind == CommKind::kLocal) {
      return absl::StrCat("IssuedCollectiveSequence was given ",
                          CommKindName(kind),
                          ": local steps are never counted as collectives");
    }
  }
  return "";
}

// A matcher built from a bad argument fails the test where it is built (so
// that not even Not(...) of it passes) and never matches.
void ReportBadArgument(const std::string& error) {
  if (!error.empty()) ADD_FAILURE() << "bad matcher argument: " << error;
}

class CollectiveCountsMatcher
    : public ::testing::MatcherInterface<const CommCounter&> {
 public:
  explicit CollectiveCountsMatcher(std::map<CommKind, int64_t> counts)
      : counts_(std::move(counts)), error_(BadCountsError(counts_)) {}

  bool MatchAndExplain(const CommCounter& counter,
                       MatchResultListener* listener) const override {
    if (!error_.empty()) {
      *listener << "which cannot be checked: " << error_;
      return false;
    }
    std::map<CommKind, int64_t> actual;
    for (CommKind kind : CollectiveKinds(counter)) ++actual[kind];
    std::map<CommKind, int64_t> expected;
    for (const auto& [kind, count] : counts_) {
      if (count != 0) expected[kind] = count;
    }
    ExplainSteps(counter, listener);
    return actual == expected;
  }

  void DescribeTo(std::ostream* os) const override {
    *os << "issued exactly " << Counts() << " and no other collective";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "did not issue exactly " << Counts();
  }

 private:
  std::string Counts() const {
    if (counts_.empty()) return "no collective";
    return absl::StrJoin(counts_, ", ", [](std::string* out, const auto& kv) {
      absl::StrAppend(out, kv.second, " ", CommKindName(kv.first));
    });
  }

  std::map<CommKind, int64_t> counts_;
  std::string error_;  // BadCountsError(counts_)
};

class CollectiveSequenceMatcher
    : public ::testing::MatcherInterface<const CommCounter&> {
 public:
  explicit CollectiveSequenceMatcher(std::vector<CommKind> kinds)
      : kinds_(std::move(kinds)), error_(BadSequenceError(kinds_)) {}

  bool MatchAndExplain(const CommCounter& counter,
                       MatchResultListener* listener) const override {
    if (!error_.empty()) {
      *listener << "which cannot be checked: " << error_;
      return false;
    }
    ExplainSteps(counter, listener);
    return CollectiveKinds(counter) == kinds_;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "issued the collectives [" << JoinKinds(kinds_) << "] in order";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "did not issue the collectives [" << JoinKinds(kinds_)
        << "] in order";
  }

 private:
  std::vector<CommKind> kinds_;
  std::string error_;  // BadSequenceError(kinds_)
};

class ReceivedBytesMatcher
    : public ::testing::MatcherInterface<const CommCounter&> {
 public:
  explicit ReceivedBytesMatcher(::testing::Matcher<double> bytes)
      : bytes_(std::move(bytes)) {}

  bool MatchAndExplain(const CommCounter& counter,
                       MatchResultListener* listener) const override {
    *listener << "which received " << counter.total_bytes() << " bytes, ";
    ExplainSteps(counter, listener);
    return bytes_.Matches(counter.total_bytes());
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "received a number of bytes that ";
    bytes_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "received a number of bytes that ";
    bytes_.DescribeNegationTo(os);
  }

 private:
  ::testing::Matcher<double> bytes_;
};

}  // namespace

::testing::Matcher<const CommCounter&> IssuedCollectives(
    std::map<CommKind, int64_t> counts) {
  ReportBadArgument(BadCountsError(counts));
  return ::testing::MakeMatcher(new CollectiveCountsMatcher(std::move(counts)));
}

::testing::Matcher<const CommCounter&> IssuedCollectiveSequence(
    std::vector<CommKind> kinds) {
  ReportBadArgument(BadSequenceError(kinds));
  return ::testing::MakeMatcher(
      new CollectiveSequenceMatcher(std::move(kinds)));
}

::testing::Matcher<const CommCounter&> IssuedNoCollectives() {
  return IssuedCollectives({});
}

::testing::Matcher<const CommCounter&> ReceivedBytes(
    ::testing::Matcher<double> bytes) {
  return ::testing::MakeMatcher(new ReceivedBytesMatcher(std::move(bytes)));
}

}  // namespace testing_util
}  // namespace dtensor
