// Trains the MLP of docs/parallel.md ("Your own model") with the general
// trainer on in-process ranks of a dp x tp mesh:
//
//   ./bazelw run //examples/mlp:train_mlp -- --dp 2 --tp 2
//   ./bazelw run //examples/mlp:train_mlp -- --plan examples/mlp/mlp_plan.json
//
// Without --plan the plan is built in code (MlpPlan). Prints the loss of each
// step and the last step's collectives by phase.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "examples/mlp/mlp.h"
#include "tools/arg_parser.h"

namespace dtensor {
namespace examples {
namespace {

absl::StatusOr<int64_t> IntFlag(const ParsedArgs& args, std::string_view name,
                                int64_t fallback) {
  int64_t value = 0;
  const std::string text = args.ValueOr(name, std::to_string(fallback));
  if (!absl::SimpleAtoi(text, &value) || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", std::string(name),
                     ": expected a positive integer, got '", text, "'"));
  }
  return value;
}

absl::Status Main(const std::vector<std::string>& argv) {
  static constexpr FlagSpec kFlags[] = {{"dp"}, {"tp"}, {"plan"}, {"steps"}};
  DT_ASSIGN_OR_RETURN(ParsedArgs args, ParseArgs(argv, kFlags));
  DT_RETURN_IF_ERROR(args.CheckNoPositional());
  DT_ASSIGN_OR_RETURN(int64_t dp, IntFlag(args, "dp", 2));
  DT_ASSIGN_OR_RETURN(int64_t tp, IntFlag(args, "tp", 2));
  MlpOptions options;
  DT_ASSIGN_OR_RETURN(int64_t steps, IntFlag(args, "steps", 5));
  options.steps = static_cast<int>(steps);
  parallel::Plan plan = MlpPlan();
  if (args.Has("plan")) {
    DT_ASSIGN_OR_RETURN(plan, parallel::LoadPlanFile(args.ValueOr("plan", "")));
  }
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh,
                      DeviceMesh::Create({dp, tp}, {"dp", "tp"}));
  DT_ASSIGN_OR_RETURN(MlpRun run, TrainMlp(mesh, plan, options));
  for (size_t step = 0; step < run.losses.size(); ++step) {
    std::cout << "step " << step << " loss " << run.losses[step] << "\n";
  }
  std::cout << "last step's collectives on rank 0\nforward:\n"
            << run.forward.Summary() << "backward:\n"
            << run.backward.Summary() << "update:\n"
            << run.update.Summary();
  return absl::OkStatus();
}

}  // namespace
}  // namespace examples
}  // namespace dtensor

int main(int argc, char** argv) {
  const absl::Status status =
      dtensor::examples::Main(std::vector<std::string>(argv + 1, argv + argc));
  if (!status.ok()) {
    std::cerr << "train_mlp: " << status << "\n";
    return 1;
  }
  return 0;
}
