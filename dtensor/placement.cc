#include "dtensor/placement.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dtensor {
namespace {

constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg,
                                   ReduceOp::kMax, ReduceOp::kMin};

absl::string_view AsAbsl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

// Whether `text` has the form "<name>(...)"; if so, sets `inner` to the
// trimmed text between the parentheses.
bool StripCall(absl::string_view text, char name, absl::string_view* inner) {
  if (text.size() < 3 || text[0] != name || text[1] != '(' ||
      text.back() != ')') {
    return false;
  }
  *inner = absl::StripAsciiWhitespace(text.substr(2, text.size() - 3));
  return true;
}

}  // namespace

absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kReduceOps) {
    if (ReduceOpName(op) == AsAbsl(name)) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reduce op '", AsAbsl(name), "' (expected sum, avg, max, min)"));
}

std::string Placement::ToString() const {
  switch (kind_) {
    case Kind::kShard:
      return absl::StrCat("S(", dim_, ")");
    case Kind::kReplicate:
      return "R";
    case Kind::kPartial:
      return absl::StrCat("P(", ReduceOpName(op_), ")");
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const Placement& placement) {
  return os << placement.ToString();
}

absl::StatusOr<Placement> ParsePlacement(std::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(AsAbsl(text));
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed placement '", trimmed,
                     "' (expected R, S(dim), P or P(sum|avg|max|min))"));
  };
  if (trimmed == "R") return Placement::Replicate();
  if (trimmed == "P") return Placement::Partial(ReduceOp::kSum);
  absl::string_view inner;
  if (StripCall(trimmed, 'S', &inner)) {
    int64_t dim;
    if (!absl::SimpleAtoi(inner, &dim)) return bad();
    return Placement::Shard(dim);
  }
  if (StripCall(trimmed, 'P', &inner)) {
    absl::StatusOr<ReduceOp> op =
        ParseReduceOp(std::string_view(inner.data(), inner.size()));
    if (!op.ok()) return bad();
    return Placement::Partial(*op);
  }
  return bad();
}

absl::StatusOr<Placement> NormalizePlacement(Placement placement,
                                             int64_t tensor_rank) {
  if (!placement.is_shard()) return placement;
  const int64_t dim = placement.dim();
  if (dim < -tensor_rank || dim >= tensor_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard dim ", dim,
                     " is out of range for a tensor of rank ", tensor_rank));
  }
  return Placement::Shard(dim < 0 ? dim + tensor_rank : dim);
}

}  // namespace dtensor
