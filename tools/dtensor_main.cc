// The dtensor command-line tool: `dtensor <subcommand> [flags]`. Each
// subcommand lives in its own file and is listed in kSubcommands.

#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/subcommand.h"

namespace dtensor {
namespace {

constexpr Subcommand kSubcommands[] = {
    {"explain",
     "one training step of a model under a plan: collectives per module, "
     "memory per rank",
     RunExplainCommand},
    {"layout", "which block of a tensor every rank of a mesh holds",
     RunLayoutCommand},
    {"plan", "the cheapest collectives from one layout to another",
     RunPlanCommand},
    {"propagate", "the strategy, redistributions and output layout of an op",
     RunPropagateCommand},
};

void PrintUsage(std::ostream& os) {
  os << "usage: dtensor <subcommand> [flags]   (dtensor <subcommand> --help)\n"
        "subcommands:\n";
  for (const Subcommand& subcommand : kSubcommands) {
    os << "  " << subcommand.name << "  " << subcommand.summary << "\n";
  }
}

int Main(const std::vector<std::string>& args) {
  if (args.empty()) {
    PrintUsage(std::cerr);
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "help") {
    PrintUsage(std::cout);
    return kExitOk;
  }
  for (const Subcommand& subcommand : kSubcommands) {
    if (args[0] == subcommand.name) {
      return subcommand.run(absl::MakeConstSpan(args).subspan(1), std::cout,
                            std::cerr);
    }
  }
  std::cerr << "dtensor: unknown subcommand '" << args[0]
            << "' (try dtensor --help)\n";
  return kExitUsage;
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::Main(std::vector<std::string>(argv + 1, argv + argc));
}
