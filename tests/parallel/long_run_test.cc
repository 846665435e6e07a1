// Long runs do not grow: after the same training step, the process holds the
// same live tensor storage and the library's caches hold the same entries at
// step 10 and at step 60, on one rank and on dp=2,tp=2 in-process ranks
// (issue 29: a training job runs for days). Exact counts, not RSS: a leak of
// one tensor or one cache entry a step fails.
#include <cstdlib>
#include <map>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/tensor/large_buffer_cache.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/testing/training_soak.h"
#include "gtest/gtest.h"
#include "tools/explain_config.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace testing {

void PrintTo(const ProcessFootprint& f, std::ostream* os) {
  *os << "{storages " << f.live_storages << " (" << f.live_storage_bytes
      << " bytes), idle large buffers " << f.idle_large_buffer_bytes
      << " bytes, propagation cache " << f.propagation_entries << " ("
      << f.propagation_misses << " misses), planner " << f.planner_entries
      << ", rank 0: communicators " << f.rank0_communicators
      << ", counter events " << f.rank0_counter_events << "}";
}

namespace {

constexpr int64_t kEarly = 10;
constexpr int64_t kLate = 60;

// The footprints after steps kEarly and kLate of the tiny config (nn/configs/
// tiny.json) on `mesh` under the shipped plan `plan_name` (empty: no plan).
std::map<int64_t, ProcessFootprint> Soak(const std::string& mesh,
                                         const std::string& plan_name) {
  SoakOptions options;
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig("tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  options.config = *config;
  // A small batch: the footprint is the model's, the optimizer's and the
  // caches'; the activations come and go within the step.
  options.batch = 2;
  options.seq = 8;
  absl::StatusOr<DeviceMesh> parsed = ParseMeshFlag(mesh);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return {};
  options.mesh = *parsed;
  if (!plan_name.empty()) {
    const char* srcdir = std::getenv("TEST_SRCDIR");
    EXPECT_NE(srcdir, nullptr);
    if (srcdir == nullptr) return {};
    absl::StatusOr<parallel::Plan> plan = parallel::LoadPlanFile(
        absl::StrCat(srcdir, "/dtensor/parallel/plans/", plan_name, ".json"));
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return {};
    options.plan = *plan;
  }
  options.steps = kLate;
  options.sample_after = {kEarly, kLate};
  std::map<int64_t, ProcessFootprint> samples;
  const absl::Status status = RunTrainingSoak(
      options, [&](int64_t step, const ProcessFootprint& footprint) {
        samples[step] = footprint;
      });
  EXPECT_TRUE(status.ok()) << status;
  return samples;
}

// Whether the large-buffer cache's idle bytes are deterministic: on one
// rank they are; on several, the cache (shared by the rank threads) keeps
// the most buffers of a size that were ever in use at once, and an
// interleaving of the ranks not seen before can raise that by a buffer or
// two (measured: +0.26 MB over 180 MB between steps 20 and 40 of dp=2,tp=2 in
// bench/soak_bench): bounded by the cache's budget, not a leak.
enum class IdleBuffers { kExact, kWithinBudget };

void ExpectNoGrowth(const std::map<int64_t, ProcessFootprint>& samples,
                    IdleBuffers idle) {
  ASSERT_EQ(samples.size(), 2u);
  const ProcessFootprint& early = samples.at(kEarly);
  ProcessFootprint late = samples.at(kLate);
  // The footprint is not trivially equal: the model is alive and the caches
  // are in use.
  EXPECT_GT(early.live_storage_bytes, 0);
  EXPECT_GT(early.propagation_entries, 0);
  EXPECT_EQ(early.rank0_counter_events, 0);  // Keep::kTotals keeps none.
  if (idle == IdleBuffers::kWithinBudget) {
    EXPECT_LE(late.idle_large_buffer_bytes,
              static_cast<int64_t>(LargeBufferCache::Shared().budget_bytes()));
    late.idle_large_buffer_bytes = early.idle_large_buffer_bytes;
  }
  EXPECT_EQ(late, early);
  // The collectives counted grow by the same number each step.
  EXPECT_EQ(late.rank0_collectives * kEarly, early.rank0_collectives * kLate);
}

TEST(LongRunTest, OneRankHoldsTheSameAtStep10AndStep60) {
  ExpectNoGrowth(Soak("dp=1,tp=1", ""), IdleBuffers::kExact);
}

TEST(LongRunTest, DataAndTensorParallelHoldTheSameAtStep10AndStep60) {
  ExpectNoGrowth(Soak("dp=2,tp=2", "tp_dp"), IdleBuffers::kWithinBudget);
}

// The accounting the test relies on sees a storage come and go.
TEST(LongRunTest, StorageAccountingCountsLiveStorage) {
  const int64_t count = Storage::LiveCount();
  const int64_t bytes = Storage::LiveBytes();
  {
    auto storage = Storage::Allocate(1000, Device::CPU());
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ(Storage::LiveCount(), count + 1);
    EXPECT_EQ(Storage::LiveBytes(), bytes + 1000);
  }
  EXPECT_EQ(Storage::LiveCount(), count);
  EXPECT_EQ(Storage::LiveBytes(), bytes);
}

}  // namespace
}  // namespace testing
}  // namespace dtensor
