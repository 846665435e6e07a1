#include "dtensor/ops/op_args.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/enum_names.h"

namespace dtensor {
namespace op_args_internal {

void ArgNameNotInSchema() {
  std::fputs("KeyOf: the schema has no argument of that name\n", stderr);
  std::abort();
}

void ArgOfAnotherKind() {
  std::fputs("KeyOf: the argument is of another kind\n", stderr);
  std::abort();
}

}  // namespace op_args_internal

constexpr EnumNames<ArgKind, ArgKind::kScalar> kArgKindNames("int", "ints",
                                                             "bool", "double",
                                                             "scalar");

absl::string_view ArgKindName(ArgKind kind) { return kArgKindNames.Name(kind); }

OpArgs& OpArgs::AddInt(int64_t value) {
  slots_.push_back({ArgKind::kInt, static_cast<uint32_t>(words_.size()), 1});
  words_.push_back(value);
  return *this;
}

OpArgs& OpArgs::AddInts(absl::Span<const int64_t> values) {
  slots_.push_back({ArgKind::kInts, static_cast<uint32_t>(words_.size()),
                    static_cast<uint32_t>(values.size())});
  words_.insert(words_.end(), values.begin(), values.end());
  return *this;
}

OpArgs& OpArgs::AddBool(bool value) {
  slots_.push_back({ArgKind::kBool, static_cast<uint32_t>(words_.size()), 1});
  words_.push_back(value ? 1 : 0);
  return *this;
}

OpArgs& OpArgs::AddDouble(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  slots_.push_back({ArgKind::kDouble, static_cast<uint32_t>(words_.size()), 1});
  words_.push_back(bits);
  return *this;
}

OpArgs& OpArgs::AddScalar(double value) {
  slots_.push_back(
      {ArgKind::kScalar, static_cast<uint32_t>(scalars_.size()), 1});
  scalars_.push_back(value);
  return *this;
}

double OpArgs::Double(size_t i) const {
  DT_DCHECK(Holds(i, ArgKind::kDouble));
  double value;
  std::memcpy(&value, &words_[slots_[i].offset], sizeof(value));
  return value;
}

std::string OpArgs::ToString(absl::Span<const ArgSpec> schema) const {
  std::vector<std::string> items;
  for (size_t i = 0; i < slots_.size(); ++i) {
    std::string name =
        i < schema.size() ? std::string(schema[i].name) : absl::StrCat(i);
    std::string value;
    switch (slots_[i].kind) {
      case ArgKind::kInt:
        value = absl::StrCat(Int(i));
        break;
      case ArgKind::kInts:
        value = absl::StrCat("[", absl::StrJoin(Ints(i), ", "), "]");
        break;
      case ArgKind::kBool:
        value = Bool(i) ? "true" : "false";
        break;
      case ArgKind::kDouble:
        value = absl::StrCat(Double(i));
        break;
      case ArgKind::kScalar:
        value = absl::StrCat(Scalar(i));
        break;
    }
    items.push_back(absl::StrCat(name, "=", value));
  }
  return absl::StrJoin(items, ", ");
}

absl::Status CheckOpArgs(absl::string_view op, absl::Span<const ArgSpec> schema,
                         const OpArgs& args) {
  if (args.size() != schema.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, " takes ", schema.size(), " argument(s), got ", args.size()));
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    if (args.kind(i) != schema[i].kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": argument ", i, " (", schema[i].name, ") must be ",
          ArgKindName(schema[i].kind), ", got ", ArgKindName(args.kind(i))));
    }
  }
  return absl::OkStatus();
}

namespace {

// Adds `text` parsed as `spec.kind` to `args`; an error names the argument.
absl::Status AddParsed(absl::string_view op, const ArgSpec& spec,
                       absl::string_view text, OpArgs& args) {
  const absl::string_view value =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  const auto malformed = [&](absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": argument ", spec.name, "='", value, "' is not ", expected));
  };
  switch (spec.kind) {
    case ArgKind::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return malformed("an integer");
      args.AddInt(v);
      return absl::OkStatus();
    }
    case ArgKind::kInts: {
      std::vector<int64_t> values;
      if (!value.empty()) {
        for (absl::string_view item : absl::StrSplit(value, ',')) {
          int64_t v;
          if (!absl::SimpleAtoi(item, &v)) {
            return malformed("a list of integers separated by ','");
          }
          values.push_back(v);
        }
      }
      args.AddInts(values);
      return absl::OkStatus();
    }
    case ArgKind::kBool: {
      bool v;
      if (!absl::SimpleAtob(value, &v)) return malformed("true or false");
      args.AddBool(v);
      return absl::OkStatus();
    }
    case ArgKind::kDouble:
    case ArgKind::kScalar: {
      double v;
      if (!absl::SimpleAtod(value, &v)) return malformed("a number");
      if (spec.kind == ArgKind::kDouble) {
        args.AddDouble(v);
      } else {
        args.AddScalar(v);
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpArgs> ParseOpArgs(
    absl::string_view op, absl::Span<const ArgSpec> schema,
    const std::map<std::string, std::string, std::less<>>& named) {
  for (const auto& [name, value] : named) {
    bool known = false;
    for (const ArgSpec& spec : schema) known |= spec.name == name;
    if (!known) {
      std::vector<absl::string_view> names;
      for (const ArgSpec& spec : schema) names.push_back(spec.name);
      return absl::InvalidArgumentError(absl::StrCat(
          op, " has no argument '", name, "' (arguments: ",
          names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  OpArgs args;
  for (const ArgSpec& spec : schema) {
    auto it = named.find(spec.name);
    if (it != named.end()) {
      absl::Status status = AddParsed(op, spec, it->second, args);
      if (!status.ok()) return status;
    } else if (spec.default_value != nullptr) {
      absl::Status status = AddParsed(op, spec, spec.default_value, args);
      if (!status.ok()) return status;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(op, " needs argument '", spec.name, "' (",
                       ArgKindName(spec.kind), ")"));
    }
  }
  return args;
}

}  // namespace dtensor
