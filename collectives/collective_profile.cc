#include "dtensor/collectives/collective_profile.h"

#include <atomic>
#include <string>
#include <utility>

#include "dtensor/base/profiler.h"

namespace dtensor {
namespace {

// Times the first Wait() of the work it wraps.
class TimedWork : public Work {
 public:
  TimedWork(std::shared_ptr<Work> work, absl::string_view op)
      : work_(std::move(work)), op_(op) {}

  absl::Status Wait() override {
    const bool first = !waited_.exchange(true);
    const double start_us = Profiler::ClockUs();
    absl::Status status = work_->Wait();
    if (first) RecordCollectiveWait(op_, start_us);
    return status;
  }
  bool IsCompleted() const override { return work_->IsCompleted(); }

 private:
  const std::shared_ptr<Work> work_;
  const absl::string_view op_;
  std::atomic<bool> waited_{false};
};

}  // namespace

void RecordCollectiveWait(absl::string_view op, double start_us) {
  if (!Profiler::Active()) return;
  Profiler::Record record;
  record.kind = Profiler::Kind::kCollective;
  record.name = std::string(op);
  record.start_us = start_us;
  record.wall_us = Profiler::ClockUs() - start_us;
  Profiler::RecordOnThread(record);
}

std::shared_ptr<Work> ProfiledWork(std::shared_ptr<Work> work,
                                   absl::string_view op) {
  if (!Profiler::Active()) return work;
  return std::make_shared<TimedWork>(std::move(work), op);
}

}  // namespace dtensor
