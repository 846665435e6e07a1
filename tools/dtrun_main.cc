// dtrun: starts the processes of a multi-process dtensor job on this node.
//
//   dtrun --nproc 4 [--nnodes N --node-rank K --master-addr A
//         --master-port P] -- <program> <args>
//
// Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT (and DTENSOR_AGENT_STORE=1: dtrun on node 0
// hosts the rendezvous store), and DTENSOR_STORE_SECRET, the job's secret
// that the store asks of its clients: new for a one-node job; a job of
// several nodes takes it from DTENSOR_STORE_SECRET or the file
// DTENSOR_STORE_SECRET_FILE names, the same on every node. Output lines are
// prefixed "[rank N] ".
// When a process fails, dtrun terminates the others and exits with the
// failure's code. Bad arguments: a one-line error and exit code 2.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/arg_parser.h"
#include "tools/dtrun_launcher.h"

namespace dtensor {
namespace {

constexpr int kUsageError = 2;

constexpr FlagSpec kFlags[] = {
    {"nproc"},       {"nnodes"},      {"node-rank"},
    {"master-addr"}, {"master-port"}, {"help", false},
};

constexpr char kUsage[] =
    "usage: dtrun --nproc N [--nnodes N --node-rank K --master-addr A "
    "--master-port P] -- <program> <args>\n";

absl::StatusOr<int64_t> IntFlag(const ParsedArgs& args, std::string_view name,
                                int64_t fallback) {
  if (!args.Has(name)) return fallback;
  const std::string text = args.ValueOr(name, "");
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", std::string(name), " needs an integer, got \"", text, "\""));
  }
  return value;
}

absl::StatusOr<LaunchOptions> ParseOptions(
    const std::vector<std::string>& argv) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, kFlags);
  if (!args.ok()) return args.status();
  LaunchOptions options;
  absl::StatusOr<int64_t> value = IntFlag(*args, "nproc", 1);
  if (!value.ok()) return value.status();
  options.nproc = *value;
  value = IntFlag(*args, "nnodes", 1);
  if (!value.ok()) return value.status();
  options.nnodes = *value;
  value = IntFlag(*args, "node-rank", 0);
  if (!value.ok()) return value.status();
  options.node_rank = *value;
  value = IntFlag(*args, "master-port", 0);
  if (!value.ok()) return value.status();
  if (*value < 0 || *value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-port ", *value, " is not in [0, 65535]"));
  }
  options.master_port = static_cast<int>(*value);
  options.master_addr = args->ValueOr("master-addr", "127.0.0.1");
  options.command = args->positional();
  options.forward_signals = true;
  absl::Status valid = CheckLaunchOptions(options);
  if (!valid.ok()) return valid;
  return options;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  absl::StatusOr<LaunchOptions> options = ParseOptions(args);
  if (!options.ok()) {
    std::fprintf(stderr, "dtrun: %s (try --help)\n",
                 std::string(options.status().message()).c_str());
    return kUsageError;
  }
  // A closed output must not kill the launcher before it ends its processes.
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<LaunchResult> result =
      Launch(*options, STDOUT_FILENO, STDERR_FILENO);
  if (!result.ok()) {
    std::fprintf(stderr, "dtrun: %s\n",
                 std::string(result.status().message()).c_str());
    return result.status().code() == absl::StatusCode::kInvalidArgument
               ? kUsageError
               : 1;
  }
  if (result->first_failure.has_value()) {
    const int64_t rank =
        options->node_rank * options->nproc + *result->first_failure;
    std::fprintf(stderr, "dtrun: rank %lld failed with exit code %d%s\n",
                 static_cast<long long>(rank),
                 result->exit_codes[*result->first_failure],
                 options->terminate_on_failure && options->nproc > 1
                     ? "; terminated the other processes"
                     : "");
  }
  return result->ExitCode();
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::Main(argc, argv); }
