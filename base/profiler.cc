#include "dtensor/base/profiler.h"

#include <chrono>
#include <utility>

namespace dtensor {
namespace {

thread_local ProfilePhase current_phase = ProfilePhase::kForward;

}  // namespace

absl::string_view ProfilePhaseName(ProfilePhase phase) {
  switch (phase) {
    case ProfilePhase::kForward:
      return "forward";
    case ProfilePhase::kBackward:
      return "backward";
    case ProfilePhase::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

Profiler::Profiler(int64_t rank) : rank_(rank), origin_us_(ClockUs()) {}

Profiler::Scope::Scope(Profiler& profiler) : scope_(profiler) {
  ++active_on_thread_;
}

Profiler::Scope::~Scope() { --active_on_thread_; }

Profiler::StepScope::StepScope(Profiler& profiler) : profiler_(profiler) {
  Step step;
  step.start_us = ClockUs() - profiler_.origin_us_;
  profiler_.steps_.push_back(step);
  profiler_.in_step_ = true;
}

Profiler::StepScope::~StepScope() {
  Step& step = profiler_.steps_.back();
  step.wall_us = ClockUs() - profiler_.origin_us_ - step.start_us;
  profiler_.in_step_ = false;
}

double Profiler::ClockUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Profiler::RecordOnThread(const Record& record) {
  if (!Active()) return;
  for (Profiler* profiler : ThreadScope<Profiler>::Active()) {
    Record copy = record;
    copy.phase = current_phase;
    copy.step = profiler->in_step_
                    ? static_cast<int64_t>(profiler->steps_.size()) - 1
                    : -1;
    copy.start_us -= profiler->origin_us_;
    profiler->records_.push_back(std::move(copy));
  }
}

void Profiler::NoteHostSync() {
  if (!Active()) return;
  for (Profiler* profiler : ThreadScope<Profiler>::Active()) {
    if (profiler->in_step_) {
      ++profiler->steps_.back().host_syncs;
    } else {
      ++profiler->outside_syncs_;
    }
  }
}

absl::Status Profiler::Resolve() {
  absl::Status first;
  for (Record& record : records_) {
    if (record.device == nullptr) continue;
    absl::StatusOr<double> us = record.device->ElapsedUs();
    if (us.ok()) {
      record.device_us = *us;
    } else if (first.ok()) {
      first = us.status();
    }
    record.device = nullptr;
  }
  return first;
}

ProfilePhase CurrentProfilePhase() { return current_phase; }

ProfilePhaseScope::ProfilePhaseScope(ProfilePhase phase)
    : previous_(current_phase) {
  current_phase = phase;
}

ProfilePhaseScope::~ProfilePhaseScope() { current_phase = previous_; }

}  // namespace dtensor
