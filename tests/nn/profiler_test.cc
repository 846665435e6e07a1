// The profiler on real ops and in-process ranks: the table's rows (op names,
// calls, phases) of a small training step counted by hand, the Chrome trace
// with one track per rank, a rank that waits for a sleeping peer named as
// imbalanced, and nothing recorded without an active scope.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profile_summary.h"
#include "dtensor/base/profile_trace.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/optim_sgd.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dtensor {
namespace {

using nn::GradientTape;
using Rows = std::map<std::pair<std::string, std::string>, int64_t>;

constexpr int64_t kRanks = 2;

// One step of a tiny data-parallel model on `mesh` (x [4, 8] in S(0), w
// [8, 8] replicated), profiled into `profiler`: loss = sum(x @ w), dw by the
// tape, one SGD update. Distributing the inputs stays outside the step.
// Null `profiler`: nothing profiles. Rank `straggler` sleeps 80 ms at the
// start of the step.
absl::Status ModelStep(const std::shared_ptr<Runtime>& runtime,
                       const DeviceMesh& mesh, Profiler* profiler,
                       int64_t straggler = -1) {
  DT_ASSIGN_OR_RETURN(Tensor x_full, Tensor::Full({4, 8}, 0.5, DType::kF32));
  DT_ASSIGN_OR_RETURN(Tensor w_full, Tensor::Full({8, 8}, 0.25, DType::kF32));
  DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, x_full, mesh,
                                                     {Placement::Shard(0)}));
  DT_ASSIGN_OR_RETURN(DTensor w, DTensor::Distribute(runtime, w_full, mesh,
                                                     {Placement::Replicate()}));
  DT_ASSIGN_OR_RETURN(auto sgd, nn::Sgd::Create({w}, nn::SgdOptions{}));
  std::optional<Profiler::Scope> scope;
  std::optional<Profiler::StepScope> step;
  if (profiler != nullptr) {
    scope.emplace(*profiler);
    step.emplace(*profiler);
  }
  if (runtime->rank() == straggler) {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
  }
  GradientTape tape;
  DTensor loss;
  {
    GradientTape::Scope tape_scope(tape);
    DT_ASSIGN_OR_RETURN(DTensor h, ops::Mm(x, w));
    DT_ASSIGN_OR_RETURN(loss, ops::Sum(h));
  }
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(loss, {w}));
  return sgd->Step(grads);
}

// Runs ModelStep on each in-process rank with a profiler of its own; returns
// the profilers by rank.
std::vector<std::unique_ptr<Profiler>> ProfileRanks(int64_t straggler = -1) {
  std::vector<std::unique_ptr<Profiler>> profilers;
  for (int64_t r = 0; r < kRanks; ++r) {
    profilers.push_back(std::make_unique<Profiler>(r));
  }
  const absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create({kRanks});
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  LocalCluster cluster(kRanks);
  const absl::Status status = cluster.Run([&](ProcessGroups& groups) {
    return ModelStep(Runtime::ForRank(groups), *mesh,
                     profilers[groups.rank()].get(), straggler);
  });
  EXPECT_TRUE(status.ok()) << status;
  return profilers;
}

// (name, phase) -> calls, collectives suffixed " (wait)".
Rows RowsOf(const ProfileSummary& summary) {
  Rows rows;
  for (const ProfileRow& row : summary.rows) {
    const std::string name =
        row.collective ? absl::StrCat(row.name, " (wait)") : row.name;
    rows[{name, std::string(ProfilePhaseName(row.phase))}] += row.calls;
  }
  return rows;
}

TEST(ProfilerTest, RowsOfAStepMatchAHandCount) {
  const auto profilers = ProfileRanks();
  // Counted from the definitions: forward mm and sum. Backward: sum's
  // gradient reshapes the seed to the kept dims and expands it
  // (reduction_ops.cc); mm's (MatmulBackward) swaps the last dims of w and
  // x (two transposes) and computes da = g @ w^T and db = x^T @ g (two
  // matmul calls: both, whatever needs a gradient); db contracts the rows
  // that x shards, so the tape completes its Partial for the replicated w
  // (one all_reduce). The optimizer updates the one parameter.
  const Rows want = {
      {{"mm", "forward"}, 1},
      {{"sum", "forward"}, 1},
      {{"reshape", "backward"}, 1},
      {{"expand", "backward"}, 1},
      {{"transpose", "backward"}, 2},
      {{"matmul", "backward"}, 2},
      {{"all_reduce (wait)", "backward"}, 1},
      {{"optimizer_update", "optimizer"}, 1},
  };
  for (const auto& profiler : profilers) {
    const ProfileSummary summary = Summarize(*profiler);
    EXPECT_EQ(RowsOf(summary), want) << FormatProfileTable(summary);
    EXPECT_EQ(summary.steps, 1);
    EXPECT_EQ(summary.host_syncs, 0);
    const std::string table = FormatProfileTable(summary);
    EXPECT_NE(table.find("mm [host]"), std::string::npos) << table;
    EXPECT_NE(table.find("FLOP/s"), std::string::npos) << table;
    EXPECT_NE(table.find("GB/s"), std::string::npos) << table;
    // The forward mm of the rank's [2, 8] rows: 2 * 2 * 8 * 8 flops.
    for (const ProfileRow& row : summary.rows) {
      if (row.name == "mm" && row.phase == ProfilePhase::kForward) {
        EXPECT_EQ(row.flops, 2.0 * 2 * 8 * 8);
      }
      if (row.name == "sum") {
        // Reads the [2, 8] f32 shard, writes one f32.
        EXPECT_EQ(row.bytes, 2 * 8 * 4 + 4);
      }
    }
  }
}

TEST(ProfilerTest, TraceHasOneTrackPerRankWithNestedPhases) {
  const auto profilers = ProfileRanks();
  std::vector<const Profiler*> ranks;
  for (const auto& p : profilers) ranks.push_back(p.get());
  const nlohmann::json trace =
      nlohmann::json::parse(ProfileTraceJson(ranks), nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<int64_t> tracks;
  std::map<int64_t, std::set<std::string>> phases;
  for (const auto& event : trace["traceEvents"]) {
    EXPECT_EQ(event["pid"], 0);
    tracks.insert(event["tid"].get<int64_t>());
    if (event["ph"] == "X" && event["cat"] == "phase") {
      phases[event["tid"].get<int64_t>()].insert(
          event["name"].get<std::string>());
    }
    if (event["ph"] == "X") {
      EXPECT_GE(event["dur"].get<double>(), 0);
    }
  }
  EXPECT_EQ(tracks, (std::set<int64_t>{0, 1}));
  for (int64_t r = 0; r < kRanks; ++r) {
    EXPECT_EQ(phases[r],
              (std::set<std::string>{"forward", "backward", "optimizer"}));
  }
}

TEST(ProfilerTest, NamesTheRankThatWaitsForASleepingPeer) {
  // Rank 1 sleeps at the start of the step, so rank 0 waits for it in the
  // backward's all_reduce.
  const auto profilers = ProfileRanks(/*straggler=*/1);
  std::vector<RankWait> waits;
  for (const auto& p : profilers) waits.push_back(RankWaitOf(Summarize(*p)));
  EXPECT_GE(waits[0].wait_us_per_step, 50e3);
  EXPECT_EQ(ImbalancedRanks(waits), std::vector<int64_t>{0});
  const std::string text = FormatRankWaits(waits);
  EXPECT_NE(text.find("imbalance: rank(s) 0 wait"), std::string::npos) << text;
  EXPECT_NE(text.find("than rank 1"), std::string::npos) << text;
}

TEST(ProfilerTest, RecordsNothingWithoutAnActiveScope) {
  // Active on the test's thread only: the ranks' threads have no scope, so
  // their ops, collectives and steps reach no profiler.
  Profiler other_thread(0);
  Profiler::Scope scope(other_thread);
  const absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create({kRanks});
  ASSERT_TRUE(mesh.ok());
  LocalCluster cluster(kRanks);
  const absl::Status status = cluster.Run([&](ProcessGroups& groups) {
    EXPECT_FALSE(Profiler::Active());
    return ModelStep(Runtime::ForRank(groups), *mesh, nullptr);
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(Profiler::Active());
  EXPECT_TRUE(other_thread.records().empty());
  EXPECT_TRUE(other_thread.steps().empty());
}

}  // namespace
}  // namespace dtensor
