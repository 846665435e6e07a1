#ifndef DTENSOR_TESTS_FUZZ_FUZZ_TARGETS_H_
#define DTENSOR_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace dtensor {
namespace fuzz {

// One parser or command-line entry point under fuzzing. `run` feeds it one
// input and checks the contract every input must meet: the call returns (no
// crash, no abort, no hang: the runner's watchdog times it) with a value or
// an error whose message is non-empty; for subcommands, exit status 0 or 2
// and errors as one line "dtensor <command>: <message>". `run` returns a
// non-OK status describing a broken contract.
struct FuzzTarget {
  const char* name;
  absl::Status (*run)(const std::string& input);
  // Valid inputs to start from.
  std::vector<std::string> seeds;
  // Tokens of the grammar for the mutator.
  std::vector<std::string> dictionary;
};

// placement, mesh, json, plan, model_config, checkpoint_metadata,
// op_args, cli_layout, cli_plan, cli_propagate, cli_explain. A subcommand
// target's input is its argv, one argument per line. Paths in the seeds are
// relative to the repository root (the runfiles root of a test).
absl::Span<const FuzzTarget> FuzzTargets();

}  // namespace fuzz
}  // namespace dtensor

#endif  // DTENSOR_TESTS_FUZZ_FUZZ_TARGETS_H_
