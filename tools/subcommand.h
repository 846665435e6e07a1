#ifndef DTENSOR_TOOLS_SUBCOMMAND_H_
#define DTENSOR_TOOLS_SUBCOMMAND_H_

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tools/arg_parser.h"

namespace dtensor {

// Exit statuses of the dtensor tool.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;

// A subcommand's entry point (tools/commands.h): gets the arguments after the
// subcommand's name, writes its results to `out` and errors to `err`, and
// returns the exit status.
using SubcommandFn = int(absl::Span<const std::string> args, std::ostream& out,
                         std::ostream& err);

// One `dtensor <name> ...` subcommand.
struct Subcommand {
  std::string_view name;
  std::string_view summary;
  SubcommandFn* run;
};

// Writes "dtensor <command>: <message>" as one line to `err` (line breaks in
// the message, which may quote user input, are escaped); returns kExitUsage.
inline int ReportUsageError(std::ostream& err, std::string_view command,
                            absl::string_view message) {
  err << "dtensor " << command << ": "
      << absl::StrReplaceAll(message, {{"\n", "\\n"}, {"\r", "\\r"}}) << "\n";
  return kExitUsage;
}

// Parses a subcommand's `args` against `flags`. Returns nullopt when that
// answered the call, with `exit` set to what the subcommand returns: `usage`
// printed on `out` for --help (kExitOk), or a bad argument reported on `err`
// (kExitUsage).
inline std::optional<ParsedArgs> ParseSubcommandArgs(
    absl::Span<const std::string> args, absl::Span<const FlagSpec> flags,
    std::string_view command, std::string_view usage, std::ostream& out,
    std::ostream& err, int& exit) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, flags);
  if (!parsed.ok()) {
    exit = ReportUsageError(err, command, parsed.status().message());
    return std::nullopt;
  }
  if (parsed->Has("help")) {
    out << usage;
    exit = kExitOk;
    return std::nullopt;
  }
  return *std::move(parsed);
}

// The body of a subcommand's entry point: parses `args` against `flags`
// (ParseSubcommandArgs: --help and bad arguments answered there), then
// returns what `body(parsed, out, err)` returns, an absl::StatusOr<int> exit
// status. `body` writes its results itself; an error it returns is reported
// on `err` as a usage error (kExitUsage).
template <typename Body>
int RunSubcommand(absl::Span<const std::string> args,
                  absl::Span<const FlagSpec> flags, std::string_view command,
                  std::string_view usage, std::ostream& out, std::ostream& err,
                  Body body) {
  int exit = kExitOk;
  const std::optional<ParsedArgs> parsed =
      ParseSubcommandArgs(args, flags, command, usage, out, err, exit);
  if (!parsed.has_value()) return exit;
  const absl::StatusOr<int> result = body(*parsed, out, err);
  if (!result.ok()) {
    return ReportUsageError(err, command, result.status().message());
  }
  return *result;
}

// Defines the entry point `name` (a SubcommandFn declared in tools/commands.h)
// of the subcommand `command` as RunSubcommand over the kFlags and kUsage of
// the file it stands in, with `body`: what every subcommand whose arguments
// need no pre-pass writes the same way.
#define DT_DEFINE_SUBCOMMAND(name, command, body)                        \
  int name(absl::Span<const std::string> args, std::ostream& out,        \
           std::ostream& err) {                                          \
    return RunSubcommand(args, kFlags, command, kUsage, out, err, body); \
  }

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_SUBCOMMAND_H_
