#ifndef DTENSOR_TOOLS_ARG_PARSER_H_
#define DTENSOR_TOOLS_ARG_PARSER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dtensor {

// A flag a subcommand accepts: "--name value" / "--name=value" when it takes a
// value, else a switch "--name".
struct FlagSpec {
  std::string_view name;
  bool takes_value = true;
};

// The flags and positional arguments of one command line.
class ParsedArgs {
 public:
  bool Has(std::string_view name) const;
  // The value of flag `name`, or `fallback` when it was not given.
  std::string ValueOr(std::string_view name, std::string fallback) const;
  // The value of flag `name`; an error naming the flag when it was not given.
  absl::StatusOr<std::string> Required(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // OK for a command that takes no positional argument and got none.
  // Errors: InvalidArgument "unexpected argument '<the first one>'".
  absl::Status CheckNoPositional() const;

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(
      absl::Span<const std::string> args, absl::Span<const FlagSpec> flags);

  std::map<std::string, std::string, std::less<>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` against `flags`. Arguments not starting with "--" (and all
// after a bare "--") are positional.
// Errors: InvalidArgument naming the argument: an unknown flag, a flag given
// twice, a value flag without a value, a switch given one.
absl::StatusOr<ParsedArgs> ParseArgs(absl::Span<const std::string> args,
                                     absl::Span<const FlagSpec> flags);

// Parses integers separated by `separator`: "4x2" with 'x', "18,2" with ','.
// An error names `what` (e.g. "--shape") and the text.
absl::StatusOr<std::vector<int64_t>> ParseIntList(std::string_view text,
                                                  char separator,
                                                  std::string_view what);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_ARG_PARSER_H_
