// A standalone fuzz driver for runs longer than CI's:
//   fuzz_driver [--target NAME|all] [--seed S] [--inputs N] [--seconds T]
//               [--corpus DIR] [--hang_seconds H]
// Runs each target (all by default) from its seeds plus the files of DIR,
// prints inputs run per target, and exits 1 naming the input on a broken
// contract, 3 on a hang. Runs are deterministic given the seed (and corpus):
// rerun a crash with the same flags under --config=asan for its stack.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/text_file.h"
#include "tests/fuzz/fuzz_runner.h"
#include "tests/fuzz/fuzz_targets.h"

namespace dtensor {
namespace fuzz {
namespace {

struct DriverOptions {
  std::string target = "all";
  std::string corpus;
  FuzzOptions fuzz;
};

bool ParseNumber(const std::string& text, int64_t& value) {
  return absl::SimpleAtoi(text, &value) && value >= 0;
}

// Returns false on a malformed command line.
bool ParseDriverArgs(int argc, char** argv, DriverOptions& options) {
  if (argc % 2 == 0) return false;  // Flags come in pairs.
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    int64_t number = 0;
    if (flag == "--target") {
      options.target = value;
    } else if (flag == "--corpus") {
      options.corpus = value;
    } else if (!ParseNumber(value, number)) {
      return false;
    } else if (flag == "--seed") {
      options.fuzz.seed = static_cast<uint64_t>(number);
    } else if (flag == "--inputs") {
      options.fuzz.max_inputs = number;
    } else if (flag == "--seconds") {
      options.fuzz.max_time = absl::Seconds(number);
    } else if (flag == "--hang_seconds") {
      options.fuzz.hang_limit = absl::Seconds(number);
    } else {
      return false;
    }
  }
  return true;
}

absl::Status ReadCorpus(const std::string& dir,
                        std::vector<std::string>& seeds) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_regular_file()) continue;
    absl::StatusOr<std::string> text =
        ReadTextFile(entry.path().string(), kMaxPlanFileBytes);
    if (!text.ok()) return text.status();
    seeds.push_back(*std::move(text));
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("--corpus ", dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  DriverOptions options;
  options.fuzz.max_time = absl::Seconds(60);
  if (!ParseDriverArgs(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: fuzz_driver [--target NAME|all] [--seed S] "
                 "[--inputs N] [--seconds T] [--corpus DIR] "
                 "[--hang_seconds H]\n");
    return 2;
  }
  if (!options.corpus.empty()) {
    absl::Status status = ReadCorpus(options.corpus, options.fuzz.extra_seeds);
    if (!status.ok()) {
      std::fprintf(stderr, "fuzz_driver: %s\n", status.ToString().c_str());
      return 2;
    }
  }
  bool found = false;
  for (const FuzzTarget& target : FuzzTargets()) {
    if (options.target != "all" && options.target != target.name) continue;
    found = true;
    absl::StatusOr<FuzzStats> stats = RunFuzz(target, options.fuzz);
    if (!stats.ok()) {
      std::fprintf(stderr, "%s\n", stats.status().ToString().c_str());
      return 1;
    }
    std::printf("%s: %lld inputs, slowest %s, no failure\n", target.name,
                static_cast<long long>(stats->inputs),
                absl::FormatDuration(stats->slowest).c_str());
    std::fflush(stdout);
  }
  if (!found) {
    std::fprintf(stderr, "fuzz_driver: unknown --target %s\n",
                 options.target.c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace fuzz
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::fuzz::Main(argc, argv); }
