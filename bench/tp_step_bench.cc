// One training step of a 2-layer Llama on 2 in-process ranks, tensor
// parallel (tp=2, the Megatron plan): through the DTensor runtime
// (BM_TpStepDTensor) and written by hand on local shards with the same
// kernels and the same collectives issued directly (BM_TpStepHandWritten).
//
// Before timing, both steps run 3 times from the same shards (once per
// process): their losses, final parameter shards and collective counts must
// agree, else both benchmarks are skipped with the mismatch. Timings: wall
// time per step (rank 0 drives the loop) and the CPU time of the whole
// process (both ranks). Figures and a profile in docs/performance.md.
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/tp_step_hand_written.h"
#include "bench/tp_step_model.h"
#include "benchmark/benchmark.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/reduction.h"

namespace dtensor::bench {
namespace {

// ---- Verification. ----

// What rank 0 saw of both steps.
struct Comparison {
  std::vector<double> dtensor_losses;
  std::vector<double> hand_losses;
  int64_t dtensor_collectives = 0;
  int64_t dtensor_all_reduces = 0;
  int64_t hand_collectives = 0;
  double max_param_diff = 0;
  std::string worst_param;
};

constexpr int kVerifySteps = 3;

absl::Status CompareRank(ProcessGroups& groups, Comparison& out) {
  DT_ASSIGN_OR_RETURN(auto dtensor, DTensorTrainer::Create(groups));
  DT_ASSIGN_OR_RETURN(
      auto hand, HandWrittenTrainer::Create(groups, dtensor->LocalParams()));
  Comparison c;
  CommCounter counter;
  for (int step = 0; step < kVerifySteps; ++step) {
    {
      CommCounter::Scope scope(counter);
      DT_RETURN_IF_ERROR(dtensor->Step());
    }
    if (step == 0) {
      c.dtensor_collectives = counter.total_collectives();
      c.dtensor_all_reduces = counter.count(CommKind::kAllReduce);
    }
    DT_ASSIGN_OR_RETURN(double loss, dtensor->loss());
    c.dtensor_losses.push_back(loss);
  }
  for (int step = 0; step < kVerifySteps; ++step) {
    DT_RETURN_IF_ERROR(hand->Step());
    if (step == 0) c.hand_collectives = hand->collectives();
    DT_ASSIGN_OR_RETURN(double loss, hand->loss());
    c.hand_losses.push_back(loss);
  }
  const std::vector<Tensor> a = dtensor->LocalParams();
  const std::vector<Tensor>& b = hand->LocalParams();
  for (size_t i = 0; i < a.size(); ++i) {
    DT_ASSIGN_OR_RETURN(Tensor diff, Sub(a[i], b[i]));
    DT_ASSIGN_OR_RETURN(diff, Abs(diff));
    DT_ASSIGN_OR_RETURN(Tensor max, Max(diff));
    DT_ASSIGN_OR_RETURN(double value, max.Item());
    if (value >= c.max_param_diff) {
      c.max_param_diff = value;
      c.worst_param = dtensor->names()[i];
    }
  }
  if (groups.rank() == 0) out = c;
  return absl::OkStatus();
}

// Runs both steps for a few steps from the same shards and checks that they
// agree: losses and parameters within f32 tolerance, and equal numbers of
// collectives (all all-reduces). OK, or why not.
absl::Status Verify() {
  Comparison c;
  LocalCluster cluster(kRanks);
  DT_RETURN_IF_ERROR(cluster.Run(
      [&](ProcessGroups& groups) { return CompareRank(groups, c); }));
  std::string report;
  for (int step = 0; step < kVerifySteps; ++step) {
    absl::StrAppend(&report, "step ", step + 1, " loss ",
                    c.dtensor_losses[step], " vs ", c.hand_losses[step], "; ");
  }
  absl::StrAppend(&report, "collectives ", c.dtensor_collectives, " vs ",
                  c.hand_collectives, "; max param diff ", c.max_param_diff,
                  " (", c.worst_param, ")");
  std::fprintf(stderr, "tp_step_bench verification: %s\n", report.c_str());
  bool agree = c.dtensor_collectives == c.hand_collectives &&
               c.dtensor_all_reduces == c.hand_collectives &&
               c.max_param_diff < 1e-4;
  for (int step = 0; step < kVerifySteps; ++step) {
    agree = agree && std::abs(c.dtensor_losses[step] - c.hand_losses[step]) <
                         1e-4 * std::abs(c.dtensor_losses[step]);
  }
  if (!agree) return absl::InternalError(absl::StrCat("mismatch: ", report));
  return absl::OkStatus();
}

const absl::Status& VerifiedOnce() {
  static const absl::Status* status = new absl::Status(Verify());
  return *status;
}

// ---- The benchmarks. ----

// Rank 0 runs the benchmark loop and tells rank 1 to take each step (or to
// stop); the step's collectives keep the ranks together.
class StepSignal {
 public:
  void Post(bool go) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(go);
    cv_.notify_one();
  }
  bool Next() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return next_ < queue_.size(); });
    return queue_[next_++];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> queue_;
  size_t next_ = 0;
};

// Runs `Trainer::Step` under `state` on every rank, after building the
// trainers with `make`.
template <typename MakeTrainer>
void RunSteps(benchmark::State& state, MakeTrainer make) {
  if (!VerifiedOnce().ok()) {
    state.SkipWithError(VerifiedOnce().ToString().c_str());
    return;
  }
  StepSignal signal;
  LocalCluster cluster(kRanks);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto trainer, make(groups));
        // One untimed step: optimizer state, caches.
        DT_RETURN_IF_ERROR(trainer->Step());
        if (groups.rank() != 0) {
          while (signal.Next()) DT_RETURN_IF_ERROR(trainer->Step());
          return absl::OkStatus();
        }
        absl::Status failed;
        for (auto _ : state) {
          signal.Post(true);
          failed = trainer->Step();
          if (!failed.ok()) break;
        }
        signal.Post(false);
        return failed;
      });
  if (!status.ok()) state.SkipWithError(status.ToString().c_str());
}

void BM_TpStepDTensor(benchmark::State& state) {
  RunSteps(state, [](ProcessGroups& groups) {
    return DTensorTrainer::Create(groups);
  });
}

void BM_TpStepHandWritten(benchmark::State& state) {
  RunSteps(state,
           [](ProcessGroups& groups)
               -> absl::StatusOr<std::unique_ptr<HandWrittenTrainer>> {
             // The same initial shards as the DTensor model's.
             DT_ASSIGN_OR_RETURN(auto dtensor, DTensorTrainer::Create(groups));
             return HandWrittenTrainer::Create(groups, dtensor->LocalParams());
           });
}

// Wall time over both ranks' threads; CPU time of the whole process (both
// ranks).
BENCHMARK(BM_TpStepDTensor)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_TpStepHandWritten)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace dtensor::bench
