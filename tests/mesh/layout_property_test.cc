// Property tests of the layout algebra over thousands of random layouts, each
// result checked by brute-force enumeration of the maps with an evaluator
// written here (flattened modes, colexicographic coordinates).

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/mesh/layout.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr int kCases = 3000;

struct Mode {
  int64_t shape;
  int64_t stride;
};
using Modes = std::vector<Mode>;

void CollectLeaves(const IntTuple& t, std::vector<int64_t>* leaves) {
  if (t.is_int()) {
    leaves->push_back(t.value());
    return;
  }
  for (const IntTuple& element : t.elements()) CollectLeaves(element, leaves);
}

Modes ModesOf(const Layout& layout) {
  std::vector<int64_t> shapes, strides;
  CollectLeaves(layout.shape(), &shapes);
  CollectLeaves(layout.stride(), &strides);
  Modes modes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    modes.push_back({shapes[i], strides[i]});
  }
  return modes;
}

int64_t SizeOf(const Modes& modes) {
  int64_t size = 1;
  for (const Mode& mode : modes) size *= mode.shape;
  return size;
}

// The index of linear coordinate `i` (first mode fastest), i < size.
int64_t Eval(const Modes& modes, int64_t i) {
  int64_t index = 0;
  for (const Mode& mode : modes) {
    index += (i % mode.shape) * mode.stride;
    i /= mode.shape;
  }
  return index;
}

// Every index of the layout, in linear-coordinate order.
std::vector<int64_t> Table(const Layout& layout) {
  const Modes modes = ModesOf(layout);
  std::vector<int64_t> table;
  for (int64_t i = 0; i < SizeOf(modes); ++i) table.push_back(Eval(modes, i));
  return table;
}

int64_t MaxPlusOne(const std::vector<int64_t>& table) {
  return *std::max_element(table.begin(), table.end()) + 1;
}

bool Injective(const std::vector<int64_t>& table) {
  return std::set<int64_t>(table.begin(), table.end()).size() == table.size();
}

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}

  int64_t Int(int64_t lo, int64_t hi) {  // In [lo, hi].
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  int64_t Pick(const std::vector<int64_t>& values) {
    return values[Int(0, values.size() - 1)];
  }
  bool Coin() { return Int(0, 1) == 1; }

  // Up to `max_rank` modes, shapes and strides drawn from the lists.
  Modes AnyModes(int max_rank, const std::vector<int64_t>& shapes,
                 const std::vector<int64_t>& strides) {
    Modes modes(Int(1, max_rank));
    for (Mode& mode : modes) mode = {Pick(shapes), Pick(strides)};
    return modes;
  }

  // Injective modes that admit a complement: sorted by stride, each stride a
  // multiple of the previous extent; then shuffled, with size-1 modes mixed
  // in. `gaps` and `start` of 1 only give a bijection onto [0, size).
  Modes ChainModes(int max_rank, const std::vector<int64_t>& shapes,
                   const std::vector<int64_t>& gaps,
                   const std::vector<int64_t>& start) {
    Modes modes;
    int64_t stride = Pick(start);
    for (int64_t n = Int(1, max_rank); n > 0; --n) {
      const int64_t shape = Pick(shapes);
      if (shape == 1) {
        modes.push_back({1, Int(0, 9)});
        continue;
      }
      modes.push_back({shape, stride});
      stride *= shape * Pick(gaps);
    }
    std::shuffle(modes.begin(), modes.end(), rng_);
    return modes;
  }

  // A layout of `modes` with a random nesting: consecutive modes grouped into
  // sub-tuples, recursively; a single mode is an integer layout half the time.
  Layout Nest(const Modes& modes) {
    std::pair<IntTuple, IntTuple> tuples;
    if (modes.size() == 1 && Coin()) {
      tuples = {modes[0].shape, modes[0].stride};
    } else {
      tuples = Group(modes, 0, modes.size(), 3);
    }
    absl::StatusOr<Layout> layout = Layout::Create(tuples.first, tuples.second);
    EXPECT_TRUE(layout.ok()) << layout.status();
    return *layout;
  }

 private:
  std::pair<IntTuple, IntTuple> Group(const Modes& modes, size_t lo, size_t hi,
                                      int depth) {
    std::vector<IntTuple> shape, stride;
    size_t begin = lo;
    while (begin < hi) {
      const size_t end = depth > 0 ? begin + Int(1, hi - begin) : begin + 1;
      if (end - begin == 1 && Int(0, 3) > 0) {
        shape.emplace_back(modes[begin].shape);
        stride.emplace_back(modes[begin].stride);
      } else {
        auto [sub_shape, sub_stride] = Group(modes, begin, end, depth - 1);
        shape.push_back(sub_shape);
        stride.push_back(sub_stride);
      }
      begin = end;
    }
    return {IntTuple(shape), IntTuple(stride)};
  }

  std::mt19937 rng_;
};

const std::vector<int64_t> kSmall = {1, 2, 3, 4, 5, 6};
const std::vector<int64_t> kSmallStrides = {0, 1, 2, 3, 4, 5, 6, 8, 12, 24};
const std::vector<int64_t> kPow2 = {1, 2, 4, 8};
const std::vector<int64_t> kPow2Strides = {0, 1, 2, 4, 8, 16, 32, 64};

TEST(LayoutPropertyTest, ParseReadsWhatToStringWrites) {
  Random random(1);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(5, kSmall, kSmallStrides));
    absl::StatusOr<Layout> parsed = Layout::Parse(a.ToString());
    ASSERT_TRUE(parsed.ok()) << a << ": " << parsed.status();
    EXPECT_EQ(*parsed, a);
  }
}

TEST(LayoutPropertyTest, CoordinatesAndIndicesAgreeWithTheMap) {
  Random random(2);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(4, kSmall, kSmallStrides));
    const std::vector<int64_t> table = Table(a);
    ASSERT_EQ(a.size(), static_cast<int64_t>(table.size())) << a;
    ASSERT_EQ(a.cosize(), MaxPlusOne(table)) << a;
    for (int64_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a(i), table[i]) << a << " at " << i;
      absl::StatusOr<IntTuple> coordinate = a.Coordinate(i);
      ASSERT_TRUE(coordinate.ok()) << coordinate.status();
      ASSERT_TRUE(Congruent(*coordinate, a.shape())) << a << " " << *coordinate;
      absl::StatusOr<int64_t> index = a.Index(*coordinate);
      ASSERT_TRUE(index.ok()) << index.status();
      ASSERT_EQ(*index, table[i]) << a << " at " << *coordinate;
      ASSERT_EQ(*a.Index(i), table[i]) << a << " at " << i;
    }
  }
}

TEST(LayoutPropertyTest, CoalescePreservesTheMapAndIsMinimal) {
  Random random(3);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(5, kSmall, kSmallStrides));
    const Layout r = Coalesce(a);
    ASSERT_EQ(Table(r), Table(a)) << a << " -> " << r;
    ASSERT_LE(r.depth(), 1) << a << " -> " << r;
    const Modes modes = ModesOf(r);
    for (size_t i = 0; i < modes.size(); ++i) {
      if (modes.size() > 1) {
        ASSERT_GT(modes[i].shape, 1) << a << " -> " << r;
      }
      if (i > 0) {
        ASSERT_NE(modes[i - 1].shape * modes[i - 1].stride, modes[i].stride)
            << a << " -> " << r;
      }
    }
  }
}

// Checks a ∘ b against function composition; returns whether it was defined.
bool CheckComposition(const Layout& a, const Layout& b) {
  absl::StatusOr<Layout> r = Composition(a, b);
  if (!r.ok()) return false;
  const std::vector<int64_t> ta = Table(a), tb = Table(b), tr = Table(*r);
  EXPECT_EQ(tr.size(), tb.size()) << a << " o " << b << " = " << *r;
  if (tr.size() != tb.size()) return true;
  for (size_t i = 0; i < tb.size(); ++i) {
    EXPECT_EQ(tr[i], ta[tb[i]])
        << a << " o " << b << " = " << *r << " at " << i;
  }
  // Shaped like b: its top-level modes have b's sizes.
  if (!b.shape().is_int()) {
    EXPECT_EQ(r->rank(), b.rank()) << a << " o " << b << " = " << *r;
  }
  if (!b.shape().is_int() && r->rank() == b.rank()) {
    for (int64_t k = 0; k < b.rank(); ++k) {
      EXPECT_EQ(r->Mode(k)->size(), b.Mode(k)->size())
          << a << " o " << b << " = " << *r << " mode " << k;
    }
  }
  return true;
}

// A random b with cosize(b) <= size, any modes or a chain of injective
// modes; false when none was found.
bool RandomRightOperand(Random& random, int64_t size, bool chain,
                        const std::vector<int64_t>& shapes,
                        const std::vector<int64_t>& strides, Layout* b) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    *b = random.Nest(chain ? random.ChainModes(3, shapes, strides, strides)
                           : random.AnyModes(3, shapes, strides));
    if (MaxPlusOne(Table(*b)) <= size) return true;
  }
  return false;
}

TEST(LayoutPropertyTest, CompositionIsFunctionCompositionPowersOfTwo) {
  // With power-of-two shapes and strides CuTe's divisibility conditions always
  // hold, and the modes of an injective chain b occupy disjoint bits, so they
  // cannot carry: every composition within a's domain must be defined.
  Random random(4);
  int checked = 0;
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(4, kPow2, kPow2Strides));
    Layout b;
    if (!RandomRightOperand(random, a.size(), /*chain=*/true, kPow2, kPow2,
                            &b)) {
      continue;
    }
    ASSERT_TRUE(CheckComposition(a, b))
        << a << " o " << b << ": " << Composition(a, b).status();
    ++checked;
  }
  EXPECT_GT(checked, kCases / 2);
}

TEST(LayoutPropertyTest, CompositionIsFunctionCompositionWhenDefined) {
  Random random(5);
  int defined = 0, tried = 0;
  for (int c = 0; c < kCases; ++c) {
    for (bool chain : {false, true}) {
      const Layout a = random.Nest(random.AnyModes(4, kSmall, kSmallStrides));
      Layout b;
      if (!RandomRightOperand(
              random, a.size(), chain, kSmall,
              chain ? std::vector<int64_t>{1, 2, 3} : kSmallStrides, &b)) {
        continue;
      }
      ++tried;
      defined += CheckComposition(a, b);
    }
  }
  EXPECT_GT(defined, tried / 5);
}

TEST(LayoutPropertyTest, CompositionRefusesIndicesOutsideTheDomain) {
  Random random(6);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(3, kSmall, kSmallStrides));
    const Layout b = random.Nest(random.AnyModes(3, kSmall, kSmallStrides));
    if (MaxPlusOne(Table(b)) > a.size()) {
      EXPECT_FALSE(Composition(a, b).ok()) << a << " o " << b;
    }
  }
}

// The extent of the modes that complement considers (shape > 1, stride > 0).
int64_t Extent(const Modes& modes) {
  int64_t extent = 1;
  for (const Mode& mode : modes) {
    if (mode.shape > 1 && mode.stride > 0) {
      extent = std::max(extent, mode.shape * mode.stride);
    }
  }
  return extent;
}

// Checks that (a, complement(a, cotarget)) is a bijection onto [0, n) with n
// the cotarget rounded up to a multiple of a's extent.
void CheckComplement(const Layout& a, int64_t cotarget) {
  absl::StatusOr<Layout> c = Complement(a, cotarget);
  ASSERT_TRUE(c.ok()) << a << ", " << cotarget << ": " << c.status();
  const std::vector<int64_t> ta = Table(a), tc = Table(*c);
  const int64_t extent = Extent(ModesOf(a));
  const int64_t expected_size =
      std::max<int64_t>(1, (cotarget + extent - 1) / extent) * extent;
  ASSERT_EQ(a.size() * c->size(), expected_size)
      << a << ", " << cotarget << " -> " << *c;
  std::vector<bool> seen(expected_size, false);
  for (int64_t j = 0; j < c->size(); ++j) {
    for (int64_t i = 0; i < a.size(); ++i) {
      const int64_t index = ta[i] + tc[j];
      ASSERT_LT(index, expected_size) << a << ", " << cotarget << " -> " << *c;
      ASSERT_FALSE(seen[index]) << a << ", " << cotarget << " -> " << *c;
      seen[index] = true;
    }
  }
  // Ordered: increasing strides.
  const Modes modes = ModesOf(*c);
  for (size_t i = 1; i < modes.size(); ++i) {
    ASSERT_LT(modes[i - 1].stride, modes[i].stride) << *c;
  }
}

TEST(LayoutPropertyTest, ComplementCompletesABijection) {
  Random random(7);
  for (int c = 0; c < kCases; ++c) {
    const Layout a =
        random.Nest(random.ChainModes(4, {1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}));
    const int64_t extent = Extent(ModesOf(a));
    CheckComplement(a, extent * random.Int(1, 4));  // Exact.
    CheckComplement(a, random.Int(1, 3 * extent));  // Rounded up.
  }
}

TEST(LayoutPropertyTest, ComplementRefusesOverlappingLayouts) {
  Random random(8);
  int refused = 0;
  for (int c = 0; c < kCases; ++c) {
    const Modes modes = random.AnyModes(4, kSmall, kSmallStrides);
    Modes considered;
    for (const Mode& mode : modes) {
      if (mode.shape > 1 && mode.stride > 0) considered.push_back(mode);
    }
    if (considered.empty()) continue;
    const Layout a = random.Nest(modes);
    if (!Injective(Table(random.Nest(considered)))) {
      EXPECT_FALSE(Complement(a, 1000).ok()) << a;
      ++refused;
    } else if (Complement(a, 1000).ok()) {
      CheckComplement(random.Nest(considered), 1000);
    }
  }
  EXPECT_GT(refused, kCases / 10);
}

TEST(LayoutPropertyTest, RightInverseInverts) {
  Random random(9);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(4, kSmall, kSmallStrides));
    const Layout r = RightInverse(a);
    const std::vector<int64_t> ta = Table(a), tr = Table(r);
    for (size_t i = 0; i < tr.size(); ++i) {
      ASSERT_LT(tr[i], a.size()) << a << " -> " << r;
      ASSERT_EQ(ta[tr[i]], static_cast<int64_t>(i)) << a << " -> " << r;
    }
  }
  // Largest: on injective chains, r covers all of the prefix 0, 1, ... that
  // a reaches.
  for (int c = 0; c < kCases; ++c) {
    const Layout a =
        random.Nest(random.ChainModes(4, {1, 2, 3, 4}, {1, 1, 2}, {1, 1, 2}));
    const std::vector<int64_t> ta = Table(a);
    const std::set<int64_t> image(ta.begin(), ta.end());
    int64_t prefix = 0;
    while (image.count(prefix)) ++prefix;
    ASSERT_EQ(RightInverse(a).size(), prefix) << a << " -> " << RightInverse(a);
  }
}

TEST(LayoutPropertyTest, InversesOfBijectionsAreFull) {
  Random random(10);
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.ChainModes(5, kSmall, {1}, {1}));
    const std::vector<int64_t> ta = Table(a);
    absl::StatusOr<Layout> left = LeftInverse(a);
    ASSERT_TRUE(left.ok()) << a << ": " << left.status();
    for (const Layout& r : {RightInverse(a), *left}) {
      ASSERT_EQ(r.size(), a.size()) << a << " -> " << r;
      const std::vector<int64_t> tr = Table(r);
      for (int64_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(tr[ta[i]], i) << a << " -> " << r;
        ASSERT_EQ(ta[tr[i]], i) << a << " -> " << r;
      }
    }
  }
}

TEST(LayoutPropertyTest, LeftInverseInvertsInjectiveLayouts) {
  Random random(11);
  for (int c = 0; c < kCases; ++c) {
    const Layout a =
        random.Nest(random.ChainModes(4, {1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}));
    absl::StatusOr<Layout> r = LeftInverse(a);
    ASSERT_TRUE(r.ok()) << a << ": " << r.status();
    const std::vector<int64_t> ta = Table(a);
    const Modes rm = ModesOf(*r);
    for (int64_t i = 0; i < a.size(); ++i) {
      ASSERT_LT(ta[i], r->size()) << a << " -> " << *r;
      ASSERT_EQ(Eval(rm, ta[i]), i) << a << " -> " << *r;
    }
  }
  for (int c = 0; c < kCases; ++c) {
    const Layout a = random.Nest(random.AnyModes(4, kSmall, kSmallStrides));
    if (!Injective(Table(a))) {
      EXPECT_FALSE(LeftInverse(a).ok()) << a;
    }
  }
}

// Checks logical_divide(a, tiler) = a ∘ (tiler, complement(tiler, size(a)))
// by brute force; returns whether it was defined.
bool CheckLogicalDivide(const Layout& a, const Layout& tiler) {
  absl::StatusOr<Layout> r = LogicalDivide(a, tiler);
  if (!r.ok()) return false;
  absl::StatusOr<Layout> rest = Complement(tiler, a.size());
  EXPECT_TRUE(rest.ok()) << rest.status();
  const std::vector<int64_t> ta = Table(a), tt = Table(tiler),
                             tc = Table(*rest), tr = Table(*r);
  const std::string what =
      a.ToString() + " / " + tiler.ToString() + " = " + r->ToString();
  EXPECT_EQ(r->rank(), 2) << what;
  EXPECT_EQ(r->Mode(0)->size(), tiler.size()) << what;
  EXPECT_EQ(tr.size(), tt.size() * tc.size()) << what;
  if (tr.size() != tt.size() * tc.size()) return true;
  for (size_t j = 0; j < tc.size(); ++j) {
    for (size_t i = 0; i < tt.size(); ++i) {
      EXPECT_EQ(tr[i + tt.size() * j], ta[tt[i] + tc[j]]) << what;
    }
  }
  return true;
}

TEST(LayoutPropertyTest, LogicalDivideMatchesItsDefinition) {
  Random random(12);
  int defined = 0;
  for (int c = 0; c < kCases; ++c) {
    // Powers of two, tiles within a: always defined.
    const Layout a = random.Nest(random.AnyModes(4, kPow2, kPow2Strides));
    const Layout tiler = random.Nest(random.ChainModes(3, kPow2, kPow2, kPow2));
    if (Extent(ModesOf(tiler)) <= a.size()) {
      ASSERT_TRUE(CheckLogicalDivide(a, tiler))
          << a << " / " << tiler << ": " << LogicalDivide(a, tiler).status();
    }
    // Any small integers: checked when defined.
    defined += CheckLogicalDivide(
        random.Nest(random.AnyModes(4, kSmall, kSmallStrides)),
        random.Nest(random.ChainModes(3, kSmall, {1, 2}, {1, 2, 3})));
  }
  EXPECT_GT(defined, kCases / 10);
}

// Checks logical_product(a, tiler) = (a, complement(a, size(a) *
// cosize(tiler)) ∘ tiler) by brute force; returns whether it was defined.
bool CheckLogicalProduct(const Layout& a, const Layout& tiler) {
  absl::StatusOr<Layout> r = LogicalProduct(a, tiler);
  if (!r.ok()) return false;
  const std::vector<int64_t> ta = Table(a), tt = Table(tiler), tr = Table(*r);
  absl::StatusOr<Layout> rest = Complement(a, a.size() * MaxPlusOne(tt));
  EXPECT_TRUE(rest.ok()) << rest.status();
  const std::vector<int64_t> tc = Table(*rest);
  const std::string what =
      a.ToString() + " x " + tiler.ToString() + " = " + r->ToString();
  EXPECT_EQ(r->rank(), 2) << what;
  EXPECT_EQ(r->Mode(0)->size(), a.size()) << what;
  EXPECT_EQ(tr.size(), ta.size() * tt.size()) << what;
  if (tr.size() != ta.size() * tt.size()) return true;
  for (size_t j = 0; j < tt.size(); ++j) {
    for (size_t i = 0; i < ta.size(); ++i) {
      EXPECT_EQ(tr[i + ta.size() * j], ta[i] + tc[tt[j]]) << what;
    }
  }
  return true;
}

TEST(LayoutPropertyTest, LogicalProductMatchesItsDefinition) {
  Random random(13);
  int defined = 0;
  for (int c = 0; c < kCases; ++c) {
    // Powers of two, injective tiler: always defined.
    const Layout a = random.Nest(random.ChainModes(2, kPow2, kPow2, kPow2));
    const Layout tiler = random.Nest(random.ChainModes(2, kPow2, kPow2, kPow2));
    ASSERT_TRUE(CheckLogicalProduct(a, tiler))
        << a << " x " << tiler << ": " << LogicalProduct(a, tiler).status();
    defined += CheckLogicalProduct(
        random.Nest(random.ChainModes(2, kSmall, {1, 2, 3}, {1, 2, 3})),
        random.Nest(random.AnyModes(2, kSmall, kSmallStrides)));
  }
  EXPECT_GT(defined, kCases / 10);
}

}  // namespace
}  // namespace dtensor
