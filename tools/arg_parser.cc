#include "tools/arg_parser.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace dtensor {

bool ParsedArgs::Has(std::string_view name) const {
  return values_.find(name) != values_.end();
}

std::string ParsedArgs::ValueOr(std::string_view name,
                                std::string fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::string> ParsedArgs::Required(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing --", std::string(name)));
  }
  return it->second;
}

absl::Status ParsedArgs::CheckNoPositional() const {
  if (positional_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected argument '", positional_[0], "'"));
}

absl::StatusOr<ParsedArgs> ParseArgs(absl::Span<const std::string> args,
                                     absl::Span<const FlagSpec> flags) {
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positional_.insert(parsed.positional_.end(), args.begin() + i + 1,
                                args.end());
      break;
    }
    if (arg.rfind("--", 0) != 0) {
      parsed.positional_.push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals - 2);
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& flag : flags) {
      if (flag.name == name) spec = &flag;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", arg, "'"));
    }
    if (parsed.Has(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " given twice"));
    }
    std::string value;
    if (equals != std::string::npos) {
      if (!spec->takes_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " takes no value, got '", arg, "'"));
      }
      value = arg.substr(equals + 1);
    } else if (spec->takes_value) {
      if (i + 1 == args.size() || args[i + 1].rfind("--", 0) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    parsed.values_.emplace(name, std::move(value));
  }
  return parsed;
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(std::string_view text,
                                                  char separator,
                                                  std::string_view what) {
  std::vector<int64_t> values;
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(text.data(), text.size()), separator)) {
    int64_t value;
    if (!absl::SimpleAtoi(item, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed ", std::string(what), " '", std::string(text),
                       "': expected integers separated by '",
                       std::string(1, separator), "'"));
    }
    values.push_back(value);
  }
  return values;
}

}  // namespace dtensor
