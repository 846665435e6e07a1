#include "dtensor/mesh/int_tuple.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// Recursive-descent parser over the IntTuple notation.
class TupleParser {
 public:
  explicit TupleParser(std::string_view text) : text_(text) {}

  absl::StatusOr<IntTuple> ParseAll() {
    DT_ASSIGN_OR_RETURN(IntTuple tuple, ParseTuple());
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected trailing text");
    return tuple;
  }

 private:
  absl::StatusOr<IntTuple> ParseTuple() {
    SkipSpaces();
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      std::vector<IntTuple> elements;
      SkipSpaces();
      if (Consume(')')) return IntTuple(std::move(elements));
      while (true) {
        DT_ASSIGN_OR_RETURN(IntTuple element, ParseTuple());
        elements.push_back(std::move(element));
        SkipSpaces();
        if (Consume(')')) return IntTuple(std::move(elements));
        if (!Consume(',')) return Error("expected ',' or ')'");
      }
    }
    return ParseInt();
  }

  absl::StatusOr<IntTuple> ParseInt() {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
    int64_t value;
    if (!absl::SimpleAtoi(absl::string_view(text_.data() + start, pos_ - start),
                          &value)) {
      pos_ = start;
      return Error("expected an integer that fits in int64 or '('");
    }
    return IntTuple(value);
  }

  void SkipSpaces() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status Error(const char* what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse \"", std::string(text_), "\" at position ",
                     pos_, ": ", what));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

int64_t IntTuple::rank() const {
  return is_tuple_ ? static_cast<int64_t>(elements_.size()) : 1;
}

int64_t IntTuple::depth() const {
  if (!is_tuple_) return 0;
  int64_t deepest = 0;
  for (const IntTuple& element : elements_) {
    deepest = std::max(deepest, element.depth());
  }
  return 1 + deepest;
}

std::vector<int64_t> IntTuple::Leaves() const {
  if (!is_tuple_) return {value_};
  std::vector<int64_t> leaves;
  for (const IntTuple& element : elements_) {
    const std::vector<int64_t> sub = element.Leaves();
    leaves.insert(leaves.end(), sub.begin(), sub.end());
  }
  return leaves;
}

std::string IntTuple::ToString() const {
  if (!is_tuple_) return absl::StrCat(value_);
  return absl::StrCat(
      "(",
      absl::StrJoin(elements_, ",",
                    [](std::string* out, const IntTuple& element) {
                      out->append(element.ToString());
                    }),
      ")");
}

absl::StatusOr<IntTuple> IntTuple::Parse(std::string_view text) {
  return TupleParser(text).ParseAll();
}

bool operator==(const IntTuple& a, const IntTuple& b) {
  return a.is_tuple_ == b.is_tuple_ && a.value_ == b.value_ &&
         a.elements_ == b.elements_;
}

bool Congruent(const IntTuple& a, const IntTuple& b) {
  if (a.is_int() || b.is_int()) return a.is_int() && b.is_int();
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (!Congruent(a.elements()[i], b.elements()[i])) return false;
  }
  return true;
}

}  // namespace dtensor
