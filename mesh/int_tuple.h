#ifndef DTENSOR_MESH_INT_TUPLE_H_
#define DTENSOR_MESH_INT_TUPLE_H_

// CuTe's integer tuples: the shapes, strides and coordinates of layouts
// (dtensor/mesh/layout.h), with the text notation "(2,(1,6))" and its parser.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace dtensor {

// An integer or a tuple of IntTuples: `12`, `(2,(1,6))`, `()`.
class IntTuple {
 public:
  // The integer 0.
  IntTuple() = default;
  // The integer `value`.
  IntTuple(int64_t value) : value_(value) {}  // NOLINT: `IntTuple t = 12;`
  // The tuple of `elements`; `IntTuple{2, {1, 6}}` spells (2,(1,6)). Note that
  // `IntTuple{5}` is the one-element tuple (5) while `IntTuple(5)` is 5.
  IntTuple(std::initializer_list<IntTuple> elements)
      : is_tuple_(true), elements_(elements) {}
  explicit IntTuple(std::vector<IntTuple> elements)
      : is_tuple_(true), elements_(std::move(elements)) {}

  // Parses the notation ToString writes: an integer or a parenthesised,
  // comma-separated list of IntTuples; spaces are ignored.
  static absl::StatusOr<IntTuple> Parse(std::string_view text);

  bool is_int() const { return !is_tuple_; }
  // The integer; 0 for a tuple.
  int64_t value() const { return value_; }
  // The elements of a tuple; empty for an integer.
  const std::vector<IntTuple>& elements() const { return elements_; }
  // Number of elements of a tuple; 1 for an integer (CuTe's rank).
  int64_t rank() const;
  // 0 for an integer, 1 + the deepest element for a tuple.
  int64_t depth() const;
  // The integers in depth-first order.
  std::vector<int64_t> Leaves() const;
  // "12", "(2,(1,6))", "()".
  std::string ToString() const;

  // Structural equality: 5 and (5) differ.
  friend bool operator==(const IntTuple& a, const IntTuple& b);
  friend bool operator!=(const IntTuple& a, const IntTuple& b) {
    return !(a == b);
  }
  friend std::ostream& operator<<(std::ostream& os, const IntTuple& t) {
    return os << t.ToString();
  }

 private:
  bool is_tuple_ = false;
  int64_t value_ = 0;
  std::vector<IntTuple> elements_;
};

// Whether `a` and `b` have the same tree structure (integers where integers).
bool Congruent(const IntTuple& a, const IntTuple& b);

}  // namespace dtensor

#endif  // DTENSOR_MESH_INT_TUPLE_H_
