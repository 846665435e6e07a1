#include "dtensor/mesh/layout.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// One integer mode of a flattened layout.
struct FlatMode {
  int64_t shape;
  int64_t stride;
};

bool MulOverflows(int64_t a, int64_t b, int64_t* product) {
  return __builtin_mul_overflow(a, b, product);
}

// Whether mode `next` continues `mode` (next.stride == shape * stride).
bool Continues(const FlatMode& mode, const FlatMode& next) {
  int64_t extent;
  return !MulOverflows(mode.shape, mode.stride, &extent) &&
         extent == next.stride;
}

// Adds to `*index` the index of colexicographic coordinate `*linear` within
// shape:stride and divides it out of `*linear`. When `open`, the last mode
// takes whatever is left (CuTe's extension past the size). Unsigned
// arithmetic: an extension far past the size wraps instead of being undefined.
void Accumulate(const IntTuple& shape, const IntTuple& stride, bool open,
                int64_t* linear, uint64_t* index) {
  if (shape.is_int()) {
    const int64_t coordinate = open ? *linear : *linear % shape.value();
    *index += static_cast<uint64_t>(coordinate) *
              static_cast<uint64_t>(stride.value());
    *linear /= shape.value();
    return;
  }
  const size_t n = shape.elements().size();
  for (size_t i = 0; i < n; ++i) {
    Accumulate(shape.elements()[i], stride.elements()[i], open && i + 1 == n,
               linear, index);
  }
}

int64_t Evaluate(const IntTuple& shape, const IntTuple& stride,
                 int64_t linear) {
  uint64_t index = 0;
  Accumulate(shape, stride, /*open=*/true, &linear, &index);
  return static_cast<int64_t>(index);
}

// The product of the integers of `t`.
int64_t SizeOf(const IntTuple& t) {
  if (t.is_int()) return t.value();
  int64_t size = 1;
  for (const IntTuple& element : t.elements()) size *= SizeOf(element);
  return size;
}

std::vector<FlatMode> FlatModes(const IntTuple& shape, const IntTuple& stride) {
  const std::vector<int64_t> shapes = shape.Leaves();
  const std::vector<int64_t> strides = stride.Leaves();
  std::vector<FlatMode> modes;
  modes.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    modes.push_back({shapes[i], strides[i]});
  }
  return modes;
}

std::vector<FlatMode> FlatModes(const Layout& layout) {
  return FlatModes(layout.shape(), layout.stride());
}

// Shape and stride of the layout made of `modes`: an integer pair for one
// mode, 1:0 for none, flat tuples otherwise.
std::pair<IntTuple, IntTuple> TuplesOf(const std::vector<FlatMode>& modes) {
  if (modes.empty()) return {IntTuple(1), IntTuple(0)};
  if (modes.size() == 1) return {modes[0].shape, modes[0].stride};
  std::vector<IntTuple> shape, stride;
  for (const FlatMode& mode : modes) {
    shape.emplace_back(mode.shape);
    stride.emplace_back(mode.stride);
  }
  return {IntTuple(std::move(shape)), IntTuple(std::move(stride))};
}

// Size-1 modes dropped, (s0:d0)(s1:s0*d0) merged into (s0*s1:d0).
std::vector<FlatMode> CoalescedModes(const std::vector<FlatMode>& modes) {
  std::vector<FlatMode> result;
  for (const FlatMode& mode : modes) {
    if (mode.shape == 1) continue;
    if (!result.empty() && Continues(result.back(), mode)) {
      result.back().shape *= mode.shape;
    } else {
      result.push_back(mode);
    }
  }
  return result;
}

// `structure` with its integers replaced, in depth-first order, by `leaves`
// starting at `*next`.
IntTuple ReplaceLeaves(const IntTuple& structure,
                       const std::vector<int64_t>& leaves, size_t* next) {
  if (structure.is_int()) return leaves[(*next)++];
  std::vector<IntTuple> elements;
  for (const IntTuple& element : structure.elements()) {
    elements.push_back(ReplaceLeaves(element, leaves, next));
  }
  return IntTuple(std::move(elements));
}

// Compact strides for `shape`: each leaf's stride is the product of the leaves
// before it (column-major) or after it (row-major).
absl::StatusOr<Layout> CompactLayout(IntTuple shape, bool row_major) {
  const std::vector<int64_t> shapes = shape.Leaves();
  std::vector<int64_t> strides(shapes.size());
  int64_t product = 1;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const size_t i = row_major ? shapes.size() - 1 - k : k;
    strides[i] = product;
    if (shapes[i] < 1 || MulOverflows(product, shapes[i], &product)) {
      return absl::InvalidArgumentError(
          absl::StrCat("no compact layout for shape ", shape.ToString(),
                       ": a size is < 1 or the product overflows int64"));
    }
  }
  size_t next = 0;
  IntTuple stride = ReplaceLeaves(shape, strides, &next);
  return Layout::Create(std::move(shape), std::move(stride));
}

// The index of `coordinate` under shape:stride (see Layout::Index).
absl::StatusOr<int64_t> IndexOf(const IntTuple& shape, const IntTuple& stride,
                                const IntTuple& coordinate) {
  if (coordinate.is_int()) {
    if (coordinate.value() < 0 || coordinate.value() >= SizeOf(shape)) {
      return absl::OutOfRangeError(
          absl::StrCat("coordinate ", coordinate.value(),
                       " is out of range for shape ", shape.ToString()));
    }
    return Evaluate(shape, stride, coordinate.value());
  }
  if (shape.is_int() || shape.rank() != coordinate.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinate ", coordinate.ToString(),
                     " does not match shape ", shape.ToString()));
  }
  int64_t index = 0;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    DT_ASSIGN_OR_RETURN(const int64_t part,
                        IndexOf(shape.elements()[i], stride.elements()[i],
                                coordinate.elements()[i]));
    index += part;
  }
  return index;
}

// The natural coordinate of `linear` (in range) within `shape`.
IntTuple CoordinateIn(const IntTuple& shape, int64_t linear) {
  if (shape.is_int()) return linear;
  std::vector<IntTuple> coordinate;
  for (const IntTuple& element : shape.elements()) {
    const int64_t size = SizeOf(element);
    coordinate.push_back(CoordinateIn(element, linear % size));
    linear /= size;
  }
  return IntTuple(std::move(coordinate));
}

// coalesce(a) ∘ b, one integer mode of b at a time, following CuTe: the
// stride of b's mode divides its way through a's modes, then its shape takes
// what it needs from the modes reached. Composing mode by mode equals
// composing the whole of b only when b's modes, written as digits in a's
// mixed radix, never carry into the next digit when summed; the largest digit
// sum of each mode of a is tracked to check that.
class Composer {
 public:
  explicit Composer(std::vector<FlatMode> a)
      : a_(std::move(a)), digit_sums_(a_.size(), 0) {}

  // The result shaped like b: each integer mode of b becomes a mode of it.
  absl::StatusOr<std::pair<IntTuple, IntTuple>> Compose(
      const IntTuple& b_shape, const IntTuple& b_stride) {
    if (b_shape.is_int()) {
      DT_ASSIGN_OR_RETURN(std::vector<FlatMode> modes,
                          ComposeMode(b_shape.value(), b_stride.value()));
      return TuplesOf(modes);
    }
    std::vector<IntTuple> shape, stride;
    for (int64_t i = 0; i < b_shape.rank(); ++i) {
      DT_ASSIGN_OR_RETURN(
          auto mode, Compose(b_shape.elements()[i], b_stride.elements()[i]));
      shape.push_back(std::move(mode.first));
      stride.push_back(std::move(mode.second));
    }
    return std::make_pair(IntTuple(std::move(shape)),
                          IntTuple(std::move(stride)));
  }

  // An error when the modes composed so far carry into each other.
  absl::Status CheckNoCarry() const {
    for (size_t i = 0; i + 1 < a_.size(); ++i) {
      if (digit_sums_[i] >= a_[i].shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("the modes of the right operand overlap: their "
                         "coordinates in mode ",
                         i, " of the left one sum to ", digit_sums_[i],
                         " >= its shape ", a_[i].shape));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::vector<FlatMode>> ComposeMode(int64_t s, int64_t d) {
    std::vector<FlatMode> result;
    if (s == 1) return result;
    if (d == 0) return std::vector<FlatMode>{{s, 0}};
    int64_t rest_shape = s;
    int64_t rest_stride = d;
    for (size_t i = 0; i + 1 < a_.size() && rest_shape > 1; ++i) {
      const int64_t shape = a_[i].shape;
      if (rest_stride % shape == 0) {  // Steps over this whole mode.
        rest_stride /= shape;
        continue;
      }
      if (shape % rest_stride != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("stride divisibility: stride ", rest_stride,
                         " vs shape ", shape, " of mode ", i));
      }
      const int64_t taken = std::min(shape / rest_stride, rest_shape);
      if (rest_shape % taken != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape divisibility: shape ", rest_shape, " vs ",
                         taken, " elements left in mode ", i));
      }
      DT_RETURN_IF_ERROR(Append(i, taken, rest_stride, &result));
      rest_shape /= taken;
      rest_stride = 1;
    }
    if (rest_shape > 1) {
      DT_RETURN_IF_ERROR(
          Append(a_.size() - 1, rest_shape, rest_stride, &result));
    }
    return result;
  }

  // Appends `count` steps of `step` within mode `i` of a.
  absl::Status Append(size_t i, int64_t count, int64_t step,
                      std::vector<FlatMode>* result) {
    int64_t stride;
    if (MulOverflows(step, a_[i].stride, &stride)) {
      return absl::InvalidArgumentError("a stride overflows int64");
    }
    result->push_back({count, stride});
    // The last mode of a is open-ended: it cannot carry.
    if (i + 1 < a_.size()) digit_sums_[i] += (count - 1) * step;
    return absl::OkStatus();
  }

  std::vector<FlatMode> a_;
  std::vector<int64_t> digit_sums_;
};

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

// OutOfRange "<what> <index> is out of range for layout <layout> of <bound
// name> <bound>" unless 0 <= index < bound.
absl::Status CheckIndex(const Layout& layout, absl::string_view what,
                        int64_t index, absl::string_view bound_name,
                        int64_t bound) {
  if (index >= 0 && index < bound) return absl::OkStatus();
  return absl::OutOfRangeError(
      absl::StrCat(what, " ", index, " is out of range for layout ",
                   layout.ToString(), " of ", bound_name, " ", bound));
}

}  // namespace

absl::StatusOr<Layout> Layout::Create(IntTuple shape, IntTuple stride) {
  const auto error = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout ", shape.ToString(), ":", stride.ToString(), ": ", what));
  };
  if (!Congruent(shape, stride)) {
    return error("shape and stride are not congruent");
  }
  int64_t size = 1;
  int64_t cosize = 1;
  const std::vector<int64_t> shapes = shape.Leaves();
  const std::vector<int64_t> strides = stride.Leaves();
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i] < 1 || strides[i] < 0) {
      return error("shapes must be >= 1 and strides >= 0");
    }
    int64_t extent;
    if (MulOverflows(size, shapes[i], &size) ||
        MulOverflows(shapes[i] - 1, strides[i], &extent) ||
        __builtin_add_overflow(cosize, extent, &cosize)) {
      return error("its size or cosize overflows int64");
    }
  }
  return Layout(std::move(shape), std::move(stride));
}

absl::StatusOr<Layout> Layout::ColumnMajor(IntTuple shape) {
  return CompactLayout(std::move(shape), /*row_major=*/false);
}

absl::StatusOr<Layout> Layout::RowMajor(IntTuple shape) {
  return CompactLayout(std::move(shape), /*row_major=*/true);
}

absl::StatusOr<Layout> Layout::Parse(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse layout \"", std::string(text),
                     "\": expected shape:stride"));
  }
  DT_ASSIGN_OR_RETURN(IntTuple shape, IntTuple::Parse(text.substr(0, colon)));
  DT_ASSIGN_OR_RETURN(IntTuple stride, IntTuple::Parse(text.substr(colon + 1)));
  return Create(std::move(shape), std::move(stride));
}

absl::StatusOr<Layout> Layout::Concat(absl::Span<const Layout> modes) {
  std::vector<IntTuple> shape, stride;
  for (const Layout& mode : modes) {
    shape.push_back(mode.shape());
    stride.push_back(mode.stride());
  }
  return Create(IntTuple(std::move(shape)), IntTuple(std::move(stride)));
}

int64_t Layout::size() const { return SizeOf(shape_); }

int64_t Layout::cosize() const {
  int64_t cosize = 1;
  for (const FlatMode& mode : FlatModes(*this)) {
    cosize += (mode.shape - 1) * mode.stride;
  }
  return cosize;
}

absl::StatusOr<Layout> Layout::Mode(int64_t i) const {
  DT_RETURN_IF_ERROR(CheckIndex(*this, "mode", i, "rank", rank()));
  if (shape_.is_int()) return *this;
  return Layout(shape_.elements()[i], stride_.elements()[i]);
}

absl::StatusOr<Layout> Layout::Select(absl::Span<const int64_t> modes) const {
  std::vector<Layout> selected;
  for (int64_t i : modes) {
    DT_ASSIGN_OR_RETURN(Layout mode, Mode(i));
    selected.push_back(std::move(mode));
  }
  return Concat(selected);
}

int64_t Layout::operator()(int64_t linear) const {
  return Evaluate(shape_, stride_, linear);
}

absl::StatusOr<int64_t> Layout::Index(const IntTuple& coordinate) const {
  absl::StatusOr<int64_t> index = IndexOf(shape_, stride_, coordinate);
  if (!index.ok()) return WithContext(index.status(), ToString());
  return index;
}

absl::StatusOr<IntTuple> Layout::Coordinate(int64_t linear) const {
  DT_RETURN_IF_ERROR(
      CheckIndex(*this, "linear coordinate", linear, "size", size()));
  return CoordinateIn(shape_, linear);
}

std::string Layout::ToString() const {
  return absl::StrCat(shape_.ToString(), ":", stride_.ToString());
}

Layout Coalesce(const Layout& layout) {
  auto [shape, stride] = TuplesOf(CoalescedModes(FlatModes(layout)));
  return Layout(std::move(shape), std::move(stride));
}

absl::StatusOr<Layout> Composition(const Layout& a, const Layout& b) {
  const std::string context =
      absl::StrCat("composition ", a.ToString(), " o ", b.ToString());
  if (b.cosize() > a.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context, ": cosize ", b.cosize(), " of the right operand exceeds size ",
        a.size(), " of the left one"));
  }
  std::vector<FlatMode> a_modes = CoalescedModes(FlatModes(a));
  if (a_modes.empty()) a_modes.push_back({1, 0});
  Composer composer(std::move(a_modes));
  absl::StatusOr<std::pair<IntTuple, IntTuple>> tuples =
      composer.Compose(b.shape(), b.stride());
  if (!tuples.ok()) return WithContext(tuples.status(), context);
  if (absl::Status status = composer.CheckNoCarry(); !status.ok()) {
    return WithContext(status, context);
  }
  absl::StatusOr<Layout> result =
      Layout::Create(std::move(tuples->first), std::move(tuples->second));
  if (!result.ok()) return WithContext(result.status(), context);
  return result;
}

absl::StatusOr<Layout> Complement(const Layout& a, int64_t cotarget) {
  const std::string context =
      absl::StrCat("complement(", a.ToString(), ", ", cotarget, ")");
  if (cotarget < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": the cotarget must be >= 1"));
  }
  std::vector<FlatMode> modes;
  for (const FlatMode& mode : FlatModes(a)) {
    if (mode.shape > 1 && mode.stride > 0) modes.push_back(mode);
  }
  std::sort(
      modes.begin(), modes.end(), [](const FlatMode& x, const FlatMode& y) {
        return x.stride != y.stride ? x.stride < y.stride : x.shape < y.shape;
      });
  std::vector<FlatMode> result;
  int64_t covered = 1;  // The extent of the modes handled so far.
  for (const FlatMode& mode : modes) {
    if (mode.stride % covered != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": stride ", mode.stride,
                       " overlaps or does not divide by the extent ", covered,
                       " of the smaller modes"));
    }
    result.push_back({mode.stride / covered, covered});
    if (MulOverflows(mode.shape, mode.stride, &covered)) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": an extent overflows int64"));
    }
  }
  result.push_back({cotarget / covered + (cotarget % covered != 0), covered});
  auto [shape, stride] = TuplesOf(result);
  DT_ASSIGN_OR_RETURN(Layout layout,
                      Layout::Create(std::move(shape), std::move(stride)));
  return Coalesce(layout);
}

absl::StatusOr<Layout> Complement(const Layout& a) {
  return Complement(a, a.cosize());
}

Layout RightInverse(const Layout& a) {
  const std::vector<FlatMode> modes = CoalescedModes(FlatModes(a));
  std::vector<int64_t> linear_stride(
      modes.size());  // Exclusive prefix product.
  int64_t product = 1;
  for (size_t i = 0; i < modes.size(); ++i) {
    linear_stride[i] = product;
    product *= modes[i].shape;
  }
  // Follow the chain of strides 1, s1, s1*s2, ...: each mode in it extends
  // the contiguous range [0, next) that a reaches.
  std::vector<FlatMode> result;
  int64_t next = 1;
  while (true) {
    auto it = std::find_if(modes.begin(), modes.end(),
                           [&](const FlatMode& m) { return m.stride == next; });
    if (it == modes.end()) break;
    result.push_back({it->shape, linear_stride[it - modes.begin()]});
    if (MulOverflows(it->shape, it->stride, &next)) break;
  }
  auto [shape, stride] = TuplesOf(CoalescedModes(result));
  return Layout(std::move(shape), std::move(stride));
}

absl::StatusOr<Layout> LeftInverse(const Layout& a) {
  const std::string context = absl::StrCat("left_inverse(", a.ToString(), ")");
  for (const FlatMode& mode : FlatModes(a)) {
    if (mode.shape > 1 && mode.stride == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": the layout is not injective"));
    }
  }
  absl::StatusOr<Layout> complement = Complement(a);
  if (!complement.ok()) return WithContext(complement.status(), context);
  DT_ASSIGN_OR_RETURN(Layout bijection, Layout::Concat({a, *complement}));
  return RightInverse(bijection);
}

absl::StatusOr<Layout> LogicalDivide(const Layout& a, const Layout& tiler) {
  const std::string context = absl::StrCat("logical_divide(", a.ToString(),
                                           ", ", tiler.ToString(), ")");
  absl::StatusOr<Layout> rest = Complement(tiler, a.size());
  if (!rest.ok()) return WithContext(rest.status(), context);
  DT_ASSIGN_OR_RETURN(Layout tiles, Layout::Concat({tiler, *rest}));
  absl::StatusOr<Layout> result = Composition(a, tiles);
  if (!result.ok()) return WithContext(result.status(), context);
  return result;
}

absl::StatusOr<Layout> LogicalProduct(const Layout& a, const Layout& tiler) {
  const std::string context = absl::StrCat("logical_product(", a.ToString(),
                                           ", ", tiler.ToString(), ")");
  int64_t cotarget;
  if (MulOverflows(a.size(), tiler.cosize(), &cotarget)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": size * cosize overflows int64"));
  }
  absl::StatusOr<Layout> rest = Complement(a, cotarget);
  if (!rest.ok()) return WithContext(rest.status(), context);
  absl::StatusOr<Layout> repeats = Composition(*rest, tiler);
  if (!repeats.ok()) return WithContext(repeats.status(), context);
  return Layout::Concat({a, *repeats});
}

}  // namespace dtensor
