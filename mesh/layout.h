#ifndef DTENSOR_MESH_LAYOUT_H_
#define DTENSOR_MESH_LAYOUT_H_

// CuTe-style layouts: a shape:stride pair of (nested) integer tuples that maps
// a coordinate to an index, and the algebra over them (coalesce, composition,
// complement, inverses, logical divide and product). See docs/layout.md.
//
// CONVENTION: coordinates are COLEXICOGRAPHIC, as in CuTe: the linear
// coordinate `i` of a shape (s0, s1, ...) is the coordinate (c0, c1, ...) with
// i = c0 + s0 * (c1 + s1 * (c2 + ...)), i.e. the FIRST mode varies fastest,
// recursively through nested modes. CuTe's published examples hold literally.
// A row-major order is had by choosing row-major strides (see RowMajor), never
// by changing this convention; DeviceMesh does exactly that.
//
// Shapes are >= 1 and strides >= 0 (no negative strides), and every size and
// cosize fits in int64. Every operation checks its preconditions and returns
// an error naming the offending layouts instead of a wrong layout.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/mesh/int_tuple.h"

namespace dtensor {

// A map from coordinates to indices: index = sum of coordinate * stride over
// the integer leaves. A value type; the default is 1:0.
class Layout {
 public:
  Layout() : shape_(1), stride_(0) {}

  // Errors: shape and stride not congruent, a shape < 1, a stride < 0, a size
  // or cosize that overflows int64.
  static absl::StatusOr<Layout> Create(IntTuple shape, IntTuple stride);
  // Compact layouts of `shape`: column-major (first leaf stride 1, CuTe's
  // default) and row-major (last leaf stride 1). Both are bijections onto
  // [0, size). Errors as Create.
  static absl::StatusOr<Layout> ColumnMajor(IntTuple shape);
  static absl::StatusOr<Layout> RowMajor(IntTuple shape);
  // Parses CuTe notation "shape:stride", e.g. "(2,(1,6)):(1,(6,2))".
  static absl::StatusOr<Layout> Parse(std::string_view text);
  // The layout whose modes are `modes`, in order: (m0, m1, ...).
  static absl::StatusOr<Layout> Concat(absl::Span<const Layout> modes);

  const IntTuple& shape() const { return shape_; }
  const IntTuple& stride() const { return stride_; }
  // Number of coordinates: the product of the shape.
  int64_t size() const;
  // One past the largest index: (*this)(size() - 1) + 1.
  int64_t cosize() const;
  // Number of top-level modes (1 for an integer shape).
  int64_t rank() const { return shape_.rank(); }
  int64_t depth() const { return shape_.depth(); }

  // Top-level mode `i` as a layout; mode 0 of an integer layout is itself.
  // Errors: `i` outside [0, rank()).
  absl::StatusOr<Layout> Mode(int64_t i) const;
  // The layout whose modes are the modes `modes` of this one, in that order.
  absl::StatusOr<Layout> Select(absl::Span<const int64_t> modes) const;

  // The index of linear (colexicographic) coordinate `linear`, 0 <= linear.
  // Past size() the last mode, recursively, extends (CuTe's convention).
  int64_t operator()(int64_t linear) const;
  // The index of a coordinate that is congruent to the shape, or weakly
  // congruent: an integer where the shape has a tuple is a linear coordinate
  // in that sub-shape. Errors: a component out of range, a tuple where the
  // shape has an integer, a tuple of the wrong rank.
  absl::StatusOr<int64_t> Index(const IntTuple& coordinate) const;
  // The natural coordinate (congruent to the shape) of linear coordinate
  // `linear`. Errors: `linear` outside [0, size()).
  absl::StatusOr<IntTuple> Coordinate(int64_t linear) const;

  // CuTe notation: "12:1", "(2,(1,6)):(1,(6,2))".
  std::string ToString() const;

  // Structural equality of shape and stride (not equality of the maps).
  friend bool operator==(const Layout& a, const Layout& b) {
    return a.shape_ == b.shape_ && a.stride_ == b.stride_;
  }
  friend bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const Layout& layout) {
    return os << layout.ToString();
  }

 private:
  friend Layout Coalesce(const Layout& layout);
  friend Layout RightInverse(const Layout& layout);

  // Unchecked: for results whose invariants hold by construction.
  Layout(IntTuple shape, IntTuple stride)
      : shape_(std::move(shape)), stride_(std::move(stride)) {}

  IntTuple shape_;
  IntTuple stride_;
};

// The simplest layout with the same map on [0, size): flattened, size-1 modes
// dropped, mode (s0:d0) followed by (s1:s0*d0) merged into (s0*s1:d0). An
// integer layout when one mode is left, 1:0 when none is.
// coalesce((2,(1,6)):(1,(6,2))) = 12:1.
Layout Coalesce(const Layout& layout);

// a ∘ b: the layout R with R(c) = a(b(c)) for every coordinate c of b, shaped
// like b (each integer mode of b becomes a possibly nested mode of R), built
// mode by mode as in CuTe.
// (6,2):(8,2) ∘ (4,3):(3,1) = ((2,2),3):((24,2),8).
// Errors: InvalidArgument, naming both layouts, when a precondition fails:
//  - b's indices lie in a's domain: cosize(b) <= size(a). Unlike CuTe, a is
//    not extended past its size, since that extension depends on how a is
//    written.
//  - per integer mode of b, CuTe's stride and shape divisibility conditions
//    against the modes of coalesce(a);
//  - the modes of b do not carry into each other in a's coordinates (their
//    largest coordinates in each mode of coalesce(a) but the last sum to less
//    than its shape), without which a ∘ b is not the mode-wise composition.
//    CuTe leaves this unchecked; injective b whose modes admit a complement
//    meet it in the cases that arise (tilers, complements, mesh splits).
// The conditions are sufficient, not necessary: a few maps that some layout
// could express are refused.
absl::StatusOr<Layout> Composition(const Layout& a, const Layout& b);

// The layout C, ordered by stride, such that (a, C) is a bijection onto
// [0, size(a) * size(C)) with size(a) * size(C) >= cotarget (the last mode
// is rounded up when cotarget is not a multiple, as in CuTe).
// complement((2,2):(1,6), 24) = (3,2):(2,12); complement(4:2, 24) =
// (2,3):(1,8). Stride-0 modes of a are ignored (left out of the bijection).
// Errors: InvalidArgument, naming a and cotarget: cotarget < 1, or the
// other modes of a, sorted by stride, not injective or a stride that is not
// a multiple of the previous mode's extent (shape * stride).
absl::StatusOr<Layout> Complement(const Layout& a, int64_t cotarget);
// complement(a, cosize(a)).
absl::StatusOr<Layout> Complement(const Layout& a);

// The largest R (1:0 at least) with a(R(i)) = i for all i in [0, size(R)).
// A bijection onto [0, n) has the full inverse, of size n.
// right_inverse((4,2):(2,1)) = (2,4):(4,1).
Layout RightInverse(const Layout& a);

// R with R(a(i)) = i for all i in [0, size(a)): right_inverse((a, complement
// (a))). Errors: a not injective or admitting no complement.
absl::StatusOr<Layout> LeftInverse(const Layout& a);

// a ∘ (tiler, complement(tiler, size(a))): mode 0 is the tile, mode 1 runs
// over the tiles.
// logical_divide((4,2,3):(2,1,8), 4:2) = ((2,2),(2,3)):((4,1),(2,8)).
// Errors: those of the complement and the composition.
absl::StatusOr<Layout> LogicalDivide(const Layout& a, const Layout& tiler);

// (a, complement(a, size(a) * cosize(tiler)) ∘ tiler): mode 0 is a, mode 1
// repeats it as laid out by tiler. Errors: those of the complement and the
// composition.
absl::StatusOr<Layout> LogicalProduct(const Layout& a, const Layout& tiler);

}  // namespace dtensor

#endif  // DTENSOR_MESH_LAYOUT_H_
