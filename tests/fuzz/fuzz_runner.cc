#include "tests/fuzz/fuzz_runner.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/fuzz/mutator.h"

namespace dtensor {
namespace fuzz {
namespace {

// Times each input on a thread of its own; ends the process when one runs
// past the hang limit.
class Watchdog {
 public:
  Watchdog(const char* target, absl::Duration limit)
      : target_(target), limit_(limit), thread_([this] { Watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  void Start(const std::string& input) {
    std::lock_guard<std::mutex> lock(mutex_);
    input_ = &input;
    started_ = absl::Now();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    input_ = nullptr;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      changed_.wait_for(lock, std::chrono::milliseconds(100));
      if (input_ != nullptr && absl::Now() - started_ > limit_) {
        std::fprintf(stderr, "fuzz %s: HANG (over %s) on input \"%s\"\n",
                     target_, absl::FormatDuration(limit_).c_str(),
                     absl::CEscape(*input_).c_str());
        std::fflush(stderr);
        ::_exit(3);
      }
    }
  }

  const char* target_;
  absl::Duration limit_;
  std::mutex mutex_;
  std::condition_variable changed_;
  const std::string* input_ = nullptr;
  absl::Time started_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<FuzzStats> RunFuzz(const FuzzTarget& target,
                                  const FuzzOptions& options) {
  std::vector<std::string> corpus = target.seeds;
  corpus.insert(corpus.end(), options.extra_seeds.begin(),
                options.extra_seeds.end());
  if (corpus.empty()) corpus.push_back("");
  const Mutator mutator(target.dictionary);
  std::mt19937_64 rng(options.seed);
  Watchdog watchdog(target.name, options.hang_limit);
  FuzzStats stats;
  const absl::Time end = absl::Now() + options.max_time;
  while (stats.inputs < options.max_inputs && absl::Now() < end) {
    const size_t index = static_cast<size_t>(stats.inputs);
    const std::string input =
        index < corpus.size()
            ? corpus[index]
            : mutator.Mutate(corpus[rng() % corpus.size()], corpus, rng);
    const absl::Time start = absl::Now();
    watchdog.Start(input);
    const absl::Status status = target.run(input);
    watchdog.Stop();
    stats.slowest = std::max(stats.slowest, absl::Now() - start);
    ++stats.inputs;
    if (!status.ok()) {
      return absl::InternalError(
          absl::StrCat("fuzz ", target.name, ": input \"", absl::CEscape(input),
                       "\": ", status.message()));
    }
  }
  return stats;
}

}  // namespace fuzz
}  // namespace dtensor
