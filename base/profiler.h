#ifndef DTENSOR_BASE_PROFILER_H_
#define DTENSOR_BASE_PROFILER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/thread_scope.h"

namespace dtensor {

// What part of a training step work belongs to. Autograd's backward pass and
// the optimizer's step mark theirs (ProfilePhaseScope); everything else is
// the forward.
enum class ProfilePhase : uint8_t { kForward, kBackward, kOptimizer };
inline constexpr int kNumProfilePhases = 3;
absl::string_view ProfilePhaseName(ProfilePhase phase);

// Device time of one op, measured by the device and read only when asked
// (a pair of CUDA events: dtensor/ops/op_profile.h). Reading may wait for
// the device; the profiler reads at Profiler::Resolve, never per op.
class DeviceSpan {
 public:
  virtual ~DeviceSpan() = default;
  // Microseconds between the span's start and end on the device.
  // Errors: the device's.
  virtual absl::StatusOr<double> ElapsedUs() const = 0;
};

// Records what one rank does while active: each op's wall time on the host
// (and, for device ops, its device time), grouped by op name and phase; the
// time the rank spent waiting in collectives; and the host<->device copies
// that made the host wait for the device ("host syncs"). Like CommCounter it
// records on the thread that activates it (in-process ranks are threads, so
// each rank profiles into its own Profiler); profile_summary.h turns a
// profile into a table, profile_trace.h into a Chrome trace.
//
//   Profiler profiler(rank);
//   for (each step) {
//     Profiler::Scope scope(profiler);   // or once around every step
//     Profiler::StepScope step(profiler);
//     ... forward, backward, optimizer ...
//   }
//   DT_RETURN_IF_ERROR(profiler.Resolve());
//   std::cout << FormatProfileTable(Summarize(profiler));
//
// With no scope active anywhere on the thread, every hook (Active(),
// RecordOnThread, NoteHostSync) costs one thread-local load.
// Requires: a profiler outlives its scopes; one thread records into a
// profiler at a time.
class Profiler {
 public:
  enum class Kind : uint8_t { kOp, kCollective };
  struct Record {
    Kind kind = Kind::kOp;
    // The op's registry name, or the collective's ("all_reduce").
    std::string name;
    ProfilePhase phase = ProfilePhase::kForward;
    // The step it ran in (StepScope's index; -1 outside a step).
    int64_t step = -1;
    // Host wall clock, microseconds since the profiler was made.
    double start_us = 0;
    double wall_us = 0;
    // Set for ops whose kernels ran on a device; Resolve() reads it into
    // device_us (negative until then, and for host ops).
    std::shared_ptr<const DeviceSpan> device;
    double device_us = -1;
    // What the op did on this rank's local tensors (0: unknown): floating
    // point operations, and bytes read and written.
    double flops = 0;
    double bytes = 0;
  };
  // One StepScope: host wall clock, microseconds since the profiler was made.
  struct Step {
    double start_us = 0;
    double wall_us = 0;
    int64_t host_syncs = 0;
  };

  explicit Profiler(int64_t rank);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Makes `profiler` record on this thread until destroyed; scopes nest and
  // every active profiler records.
  class Scope {
   public:
    explicit Scope(Profiler& profiler);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ThreadScope<Profiler> scope_;
  };

  // Marks one step (its wall time and host syncs); steps are numbered from 0
  // in the order they begin. Requires: step scopes of one profiler do not
  // nest.
  class StepScope {
   public:
    explicit StepScope(Profiler& profiler);
    ~StepScope();
    StepScope(const StepScope&) = delete;
    StepScope& operator=(const StepScope&) = delete;

   private:
    Profiler& profiler_;
  };

  // Whether a profiler is active on this thread: what a hook checks first.
  static bool Active() { return active_on_thread_ > 0; }
  // Microseconds on the host's steady clock (the records' clock is this
  // minus the profiler's origin: see Now()).
  static double ClockUs();
  // Records `record` in every profiler active on this thread, its phase set
  // to CurrentProfilePhase(), its step to each profiler's current step and
  // its start shifted to each profiler's clock (`record.start_us` is given
  // in ClockUs()).
  static void RecordOnThread(const Record& record);
  // Counts one copy between host and device that made the host wait for the
  // device, in every profiler active on this thread.
  static void NoteHostSync();

  // Reads every record's device span into device_us and drops the spans.
  // Errors: the first span's error (the other spans are still read).
  absl::Status Resolve();

  int64_t rank() const { return rank_; }
  const std::vector<Record>& records() const { return records_; }
  const std::vector<Step>& steps() const { return steps_; }
  // Host syncs counted outside any step.
  int64_t host_syncs_outside_steps() const { return outside_syncs_; }

 private:
  // How many profilers are active on this thread (Scope keeps it).
  inline static thread_local int active_on_thread_ = 0;

  int64_t rank_;
  double origin_us_;
  std::vector<Record> records_;
  std::vector<Step> steps_;
  bool in_step_ = false;
  int64_t outside_syncs_ = 0;
};

// The phase of the work this thread does now (kForward outside any scope).
ProfilePhase CurrentProfilePhase();

// Sets the thread's phase until destroyed (restoring the one before): what
// the backward pass and the optimizer step put around their work. Cheap
// enough to stay on when nothing profiles (two thread-local writes).
class ProfilePhaseScope {
 public:
  explicit ProfilePhaseScope(ProfilePhase phase);
  ~ProfilePhaseScope();
  ProfilePhaseScope(const ProfilePhaseScope&) = delete;
  ProfilePhaseScope& operator=(const ProfilePhaseScope&) = delete;

 private:
  ProfilePhase previous_;
};

}  // namespace dtensor

#endif  // DTENSOR_BASE_PROFILER_H_
