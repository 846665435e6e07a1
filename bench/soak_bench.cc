// Long-run soak (issue 29): trains a Llama model for many steps on
// in-process ranks and prints, after step 10 and every --every steps, the
// resident set (/proc/self/statm), the heap in use (mallinfo2), the live
// tensor storage (tensor/storage.h) and the library's caches; then the
// growth per step from the first sample after warm-up to the last. One
// table row per sample, per mesh (meshes run one after another in this
// process: later meshes start with the caches the earlier ones left).
//
//   bazel-bin/bench/soak_bench [--config tiny] [--meshes "dp=1,tp=1 dp=2,tp=2"]
//       [--plan parallel/plans/tp_dp.json] [--steps 3000] [--every 1000]
//       [--batch 8] [--seq 64]
#include <malloc.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/testing/training_soak.h"
#include "tools/arg_parser.h"
#include "tools/explain_config.h"
#include "tools/mesh_flag.h"
#include "tools/user_path.h"

namespace dtensor {
namespace {

constexpr int64_t kWarmUpStep = 10;

struct Options {
  std::string config = "tiny";
  std::vector<std::string> meshes = {"dp=1,tp=1", "dp=2,tp=2"};
  std::string plan = "parallel/plans/tp_dp.json";
  int64_t steps = 3000;
  int64_t every = 1000;
  int64_t batch = 8;
  int64_t seq = 64;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  constexpr FlagSpec kFlags[] = {{"config"}, {"meshes"}, {"plan"}, {"steps"},
                                 {"every"},  {"batch"},  {"seq"}};
  DT_ASSIGN_OR_RETURN(const ParsedArgs parsed, ParseArgs(args, kFlags));
  DT_RETURN_IF_ERROR(parsed.CheckNoPositional());
  Options options;
  options.config = parsed.ValueOr("config", options.config);
  if (parsed.Has("meshes")) {
    options.meshes =
        absl::StrSplit(parsed.ValueOr("meshes", ""), ' ', absl::SkipEmpty());
  }
  options.plan = UserPath(parsed.ValueOr("plan", options.plan));
  for (auto [flag, value] :
       {std::pair{"steps", &options.steps}, std::pair{"every", &options.every},
        std::pair{"batch", &options.batch}, std::pair{"seq", &options.seq}}) {
    if (parsed.Has(flag) &&
        (!absl::SimpleAtoi(parsed.ValueOr(flag, ""), value) || *value < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " needs a positive integer, got ",
                       parsed.ValueOr(flag, "")));
    }
  }
  return options;
}

double Mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

int64_t HeapInUse() { return static_cast<int64_t>(mallinfo2().uordblks); }

// A sample's row: its step, the seconds a step took since the previous
// sample, and the footprint.
void PrintRow(const std::string& mesh, int64_t step, double seconds_per_step,
              const testing::ProcessFootprint& f, int64_t heap) {
  std::printf(
      "%-10s %6lld %8.1f %8.2f %9.2f %9.3f %8lld %8.2f %7lld %7lld %7lld\n",
      mesh.c_str(), static_cast<long long>(step), 1e3 * seconds_per_step,
      Mb(f.resident_bytes), Mb(heap), Mb(f.live_storage_bytes),
      static_cast<long long>(f.live_storages), Mb(f.idle_large_buffer_bytes),
      static_cast<long long>(f.propagation_entries),
      static_cast<long long>(f.propagation_misses),
      static_cast<long long>(f.planner_entries));
  std::fflush(stdout);
}

absl::Status SoakMesh(const Options& options, const std::string& mesh) {
  testing::SoakOptions soak;
  DT_ASSIGN_OR_RETURN(soak.config, LoadLlamaConfig(options.config));
  DT_ASSIGN_OR_RETURN(soak.mesh, ParseMeshFlag(mesh));
  DT_ASSIGN_OR_RETURN(soak.plan, parallel::LoadPlanFile(options.plan));
  soak.batch = options.batch;
  soak.seq = options.seq;
  soak.steps = options.steps;
  soak.sample_after = {kWarmUpStep};
  for (int64_t step = options.every; step <= options.steps;
       step += options.every) {
    soak.sample_after.push_back(step);
  }
  struct Sample {
    int64_t step;
    testing::ProcessFootprint footprint;
    int64_t heap;
  };
  std::vector<Sample> samples;
  auto last = std::chrono::steady_clock::now();
  int64_t last_step = 0;
  DT_RETURN_IF_ERROR(testing::RunTrainingSoak(
      soak, [&](int64_t step, const testing::ProcessFootprint& footprint) {
        const auto now = std::chrono::steady_clock::now();
        const double seconds =
            std::chrono::duration<double>(now - last).count() /
            static_cast<double>(step - last_step);
        samples.push_back({step, footprint, HeapInUse()});
        PrintRow(mesh, step, seconds, footprint, samples.back().heap);
        last = now;
        last_step = step;
      }));
  if (samples.size() < 3) return absl::OkStatus();
  // From the first sample after warm-up (step --every) to the last.
  const Sample& from = samples[1];
  const Sample& to = samples.back();
  const double steps = static_cast<double>(to.step - from.step);
  std::printf(
      "%-10s growth per step over steps %lld..%lld: RSS %.3f KB, heap %.3f "
      "KB, live tensors %.3f KB\n",
      mesh.c_str(), static_cast<long long>(from.step),
      static_cast<long long>(to.step),
      (to.footprint.resident_bytes - from.footprint.resident_bytes) / steps /
          1e3,
      (to.heap - from.heap) / steps / 1e3,
      (to.footprint.live_storage_bytes - from.footprint.live_storage_bytes) /
          steps / 1e3);
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  DT_ASSIGN_OR_RETURN(
      const Options options,
      ParseOptions(std::vector<std::string>(argv + 1, argv + argc)));
  std::printf(
      "soak: config %s, plan %s, batch %lld x seq %lld, %lld steps\n"
      "%-10s %6s %8s %8s %9s %9s %8s %8s %7s %7s %7s\n",
      options.config.c_str(), options.plan.c_str(),
      static_cast<long long>(options.batch),
      static_cast<long long>(options.seq),
      static_cast<long long>(options.steps), "mesh", "step", "ms/step",
      "RSS MB", "heap MB", "tensor MB", "storages", "idle MB", "prop", "misses",
      "plans");
  for (const std::string& mesh : options.meshes) {
    DT_RETURN_IF_ERROR(SoakMesh(options, mesh));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  const absl::Status status = dtensor::Main(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "soak_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
