// Examples of the layout algebra: CuTe's published examples, which hold
// literally in our (colexicographic, CuTe's own) convention, plus hand-worked
// cases of every operation and every error.

#include "dtensor/mesh/layout.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

// The layout spelled `text`; a test failure when it does not parse.
Layout L(const std::string& text) {
  absl::StatusOr<Layout> layout = Layout::Parse(text);
  EXPECT_TRUE(layout.ok()) << text << ": " << layout.status();
  return layout.ok() ? *layout : Layout();
}

// The printed result, or the error prefixed with "error: ".
template <typename T>
std::string Str(const absl::StatusOr<T>& result) {
  if (!result.ok()) return "error: " + std::string(result.status().message());
  return result->ToString();
}

TEST(IntTupleTest, BuildsPrintsAndParses) {
  const IntTuple t = {2, {1, 6}};
  EXPECT_EQ(t.ToString(), "(2,(1,6))");
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.depth(), 2);
  EXPECT_EQ(t.Leaves(), (std::vector<int64_t>{2, 1, 6}));
  EXPECT_EQ(IntTuple(12).ToString(), "12");
  EXPECT_EQ(IntTuple(12).rank(), 1);
  EXPECT_EQ(IntTuple(12).depth(), 0);
  EXPECT_EQ(IntTuple{5}.ToString(), "(5)");
  EXPECT_NE(IntTuple{5}, IntTuple(5));
  EXPECT_EQ(IntTuple(std::vector<IntTuple>{}).ToString(), "()");
  EXPECT_EQ(IntTuple(std::vector<IntTuple>{}).depth(), 1);

  absl::StatusOr<IntTuple> parsed = IntTuple::Parse(" ( 2 , ( 1,6 ) ) ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, t);
  EXPECT_EQ(Str(IntTuple::Parse("()")), "()");
  EXPECT_EQ(Str(IntTuple::Parse("-3")), "-3");
  EXPECT_TRUE(Congruent(t, IntTuple{7, {8, 9}}));
  EXPECT_FALSE(Congruent(t, IntTuple{7, 8}));
  EXPECT_FALSE(Congruent(t, IntTuple{7, {8, 9, 10}}));
}

TEST(IntTupleTest, ParseErrorsNameTheText) {
  for (const char* bad : {"", "(", "(2,", "(2 3)", "2)", "x", "(2,)",
                          "99999999999999999999", "((1)"}) {
    absl::StatusOr<IntTuple> parsed = IntTuple::Parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find(std::string("\"") + bad + "\""),
              std::string::npos)
        << parsed.status();
  }
}

TEST(LayoutTest, CreateChecksItsInvariants) {
  EXPECT_EQ(Str(Layout::Create({2, {1, 6}}, {1, {6, 2}})),
            "(2,(1,6)):(1,(6,2))");
  EXPECT_EQ(Str(Layout::Create(IntTuple(std::vector<IntTuple>{}),
                               IntTuple(std::vector<IntTuple>{}))),
            "():()");
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  for (auto [shape, stride] : std::vector<std::pair<IntTuple, IntTuple>>{
           {IntTuple{2, 3}, IntTuple{1, {3}}},      // not congruent
           {IntTuple{2, 3}, 1},                     // not congruent
           {IntTuple{2, 0}, IntTuple{1, 2}},        // shape < 1
           {IntTuple{2, 3}, IntTuple{1, -2}},       // stride < 0
           {IntTuple{big, 4}, IntTuple{1, 1}},      // size overflows
           {IntTuple{2, 3}, IntTuple{1, big + 2}},  // cosize overflows
       }) {
    absl::StatusOr<Layout> layout = Layout::Create(shape, stride);
    ASSERT_FALSE(layout.ok()) << shape << ":" << stride;
    EXPECT_NE(layout.status().message().find(shape.ToString() + ":" +
                                             stride.ToString()),
              std::string::npos)
        << layout.status();
  }
}

TEST(LayoutTest, ParsePrintsBack) {
  for (const char* text : {"12:1", "(2,(1,6)):(1,(6,2))", "():()", "(4):(2)",
                           "((2,2),(2,3)):((4,1),(2,8))"}) {
    EXPECT_EQ(L(text).ToString(), text);
  }
  EXPECT_EQ(L(" ( 2, 3 ) : ( 3 , 1 ) ").ToString(), "(2,3):(3,1)");
  for (const char* bad : {"", "12", "12:", ":1", "(2,3):(1)",
                          "(2,3):(1,2):", "2:-1", "0:1", "(2,3):(1,x)"}) {
    EXPECT_FALSE(Layout::Parse(bad).ok()) << bad;
  }
}

TEST(LayoutTest, SizeCosizeRankDepth) {
  const Layout a = L("(2,(1,6)):(1,(6,2))");
  EXPECT_EQ(a.size(), 12);
  EXPECT_EQ(a.cosize(), 1 + 1 + 5 * 2);
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(a.depth(), 2);
  EXPECT_EQ(L("12:1").rank(), 1);
  EXPECT_EQ(L("12:1").depth(), 0);
  EXPECT_EQ(L("():()").size(), 1);
  EXPECT_EQ(L("():()").cosize(), 1);
  EXPECT_EQ(L("():()").rank(), 0);
  EXPECT_EQ(L("(4,3):(0,0)").cosize(), 1);
  EXPECT_EQ(Layout().ToString(), "1:0");
}

TEST(LayoutTest, CoordinatesAreColexicographic) {
  // (2,3):(1,2) is column-major: linear i is (i % 2, i / 2).
  const Layout a = L("(2,3):(10,100)");
  const std::vector<int64_t> expected = {0, 10, 100, 110, 200, 210};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(a(i), expected[i]) << i;
    EXPECT_EQ(Str(a.Coordinate(i)), IntTuple({i % 2, i / 2}).ToString());
  }
  // Past the size, the last mode extends (CuTe).
  EXPECT_EQ(a(7), 10 + 300);

  const Layout h = L("(2,(3,2)):(1,(2,6))");
  EXPECT_EQ(Str(h.Coordinate(7)), "(1,(0,1))");
  EXPECT_EQ(*h.Index(IntTuple{1, {0, 1}}), 7);
  EXPECT_EQ(*h.Index(IntTuple{1, 3}), 7);  // Weakly congruent.
  EXPECT_EQ(*h.Index(7), 7);
  EXPECT_EQ(*h.Index(IntTuple{1, {2, 1}}), 1 + 4 + 6);

  EXPECT_FALSE(h.Coordinate(12).ok());
  EXPECT_FALSE(h.Coordinate(-1).ok());
  EXPECT_FALSE(h.Index(12).ok());
  EXPECT_FALSE(h.Index(IntTuple{2, 0}).ok());       // 2 >= 2
  EXPECT_FALSE(h.Index(IntTuple{1, 6}).ok());       // 6 >= 3*2
  EXPECT_FALSE(h.Index(IntTuple{1, {3, 0}}).ok());  // 3 >= 3
  EXPECT_FALSE(h.Index(IntTuple{{0, 0}, 0}).ok());  // Tuple for an integer.
  EXPECT_FALSE(h.Index(IntTuple{0, 0, 0}).ok());    // Wrong rank.
  absl::StatusOr<int64_t> bad = h.Index(IntTuple{1, {3, 0}});
  EXPECT_NE(bad.status().message().find("(2,(3,2)):(1,(2,6))"),
            std::string::npos)
      << bad.status();
}

TEST(LayoutTest, CompactLayouts) {
  EXPECT_EQ(Str(Layout::ColumnMajor({2, {3, 4}})), "(2,(3,4)):(1,(2,6))");
  EXPECT_EQ(Str(Layout::RowMajor({2, {3, 4}})), "(2,(3,4)):(12,(4,1))");
  EXPECT_EQ(Str(Layout::RowMajor(5)), "5:1");
  EXPECT_FALSE(Layout::RowMajor({2, 0}).ok());
  EXPECT_FALSE(Layout::RowMajor({std::numeric_limits<int64_t>::max(), 2}).ok());
}

TEST(LayoutTest, ModesSelectAndConcat) {
  const Layout a = L("(2,(3,4),5):(1,(2,6),24)");
  EXPECT_EQ(Str(a.Mode(1)), "(3,4):(2,6)");
  EXPECT_EQ(Str(a.Mode(2)), "5:24");
  EXPECT_FALSE(a.Mode(3).ok());
  EXPECT_FALSE(a.Mode(-1).ok());
  EXPECT_EQ(Str(L("7:3").Mode(0)), "7:3");
  EXPECT_FALSE(L("7:3").Mode(1).ok());
  EXPECT_EQ(Str(a.Select({2, 0})), "(5,2):(24,1)");
  EXPECT_EQ(Str(a.Select({1})), "((3,4)):((2,6))");
  EXPECT_EQ(Str(a.Select({})), "():()");
  EXPECT_FALSE(a.Select({0, 3}).ok());
  EXPECT_EQ(Str(Layout::Concat({L("2:1"), L("(3,4):(2,6)")})),
            "(2,(3,4)):(1,(2,6))");
}

TEST(LayoutAlgebraTest, CuteCoalesceExample) {
  EXPECT_EQ(Coalesce(L("(2,(1,6)):(1,(6,2))")), L("12:1"));
  EXPECT_EQ(Coalesce(L("(2,(1,6)):(1,(6,3))")), L("(2,6):(1,3)"));
  EXPECT_EQ(Coalesce(L("(1,1):(3,5)")), L("1:0"));
  EXPECT_EQ(Coalesce(L("(4,3):(0,0)")), L("12:0"));
}

TEST(LayoutAlgebraTest, CuteCompositionExample) {
  EXPECT_EQ(Str(Composition(L("(6,2):(8,2)"), L("(4,3):(3,1)"))),
            "((2,2),3):((24,2),8)");
  EXPECT_EQ(Str(Composition(L("20:2"), L("(5,4):(4,1)"))), "(5,4):(8,2)");
  EXPECT_EQ(Str(Composition(L("(10,2):(16,4)"), L("(5,4):(1,5)"))),
            "(5,(2,2)):(16,(80,4))");
  // A broadcast mode of b stays a broadcast.
  EXPECT_EQ(Str(Composition(L("(4,2):(2,1)"), L("(3,2):(0,1)"))),
            "(3,2):(0,2)");
}

TEST(LayoutAlgebraTest, CompositionErrorsNameBothLayouts) {
  for (auto [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"(6,2):(8,2)", "4:4"},            // cosize 13 > size 12
           {"(4,3):(1,10)", "2:3"},           // stride 3 vs shape 4
           {"(4,3):(1,10)", "(3):(2)"},       // shape 3 vs 2 left in mode 0
           {"(8,4):(32,64)", "(4,4):(2,1)"},  // 3*2 + 3*1 carries past 8
       }) {
    absl::StatusOr<Layout> result = Composition(L(a), L(b));
    ASSERT_FALSE(result.ok()) << a << " o " << b << " = " << Str(result);
    EXPECT_NE(result.status().message().find(a), std::string::npos);
    EXPECT_NE(result.status().message().find(b), std::string::npos);
  }
}

TEST(LayoutAlgebraTest, CuteComplementExamples) {
  EXPECT_EQ(Str(Complement(L("(2,2):(1,6)"), 24)), "(3,2):(2,12)");
  EXPECT_EQ(Str(Complement(L("4:2"), 24)), "(2,3):(1,8)");
  EXPECT_EQ(Str(Complement(L("4:1"), 24)), "6:4");
  EXPECT_EQ(Str(Complement(L("6:4"), 24)), "4:1");
  EXPECT_EQ(Str(Complement(L("(2,4):(1,6)"), 24)), "3:2");  // 3:2 then 1:48
  EXPECT_EQ(Str(Complement(L("4:2"), 10)), "(2,2):(1,8)");  // rounded up
  EXPECT_EQ(Str(Complement(L("(2,4):(0,1)"), 8)), "2:4");   // stride 0 ignored
  EXPECT_EQ(Str(Complement(L("4:2"))), "2:1");              // cotarget 7
}

TEST(LayoutAlgebraTest, ComplementErrors) {
  for (const char* a : {"(2,2):(1,1)", "(2,2):(1,3)", "(3,2):(2,3)"}) {
    absl::StatusOr<Layout> result = Complement(L(a), 24);
    ASSERT_FALSE(result.ok()) << a << " -> " << Str(result);
    EXPECT_NE(result.status().message().find(a), std::string::npos);
  }
  EXPECT_FALSE(Complement(L("4:1"), 0).ok());
}

TEST(LayoutAlgebraTest, Inverses) {
  EXPECT_EQ(RightInverse(L("(4,2):(2,1)")), L("(2,4):(4,1)"));
  EXPECT_EQ(RightInverse(L("(2,3):(3,1)")), L("(3,2):(2,1)"));
  EXPECT_EQ(RightInverse(L("(4,2):(2,8)")), L("1:0"));  // 1 is not reached
  EXPECT_EQ(RightInverse(L("(2,4):(0,1)")), L("4:2"));
  EXPECT_EQ(Str(LeftInverse(L("(4,2):(2,1)"))), "(2,4):(4,1)");
  EXPECT_EQ(Str(LeftInverse(L("4:2"))), "(2,4):(4,1)");
  EXPECT_FALSE(LeftInverse(L("(2,4):(0,1)")).ok());  // Not injective.
  EXPECT_FALSE(LeftInverse(L("(2,2):(1,1)")).ok());  // Not injective.
  absl::StatusOr<Layout> bad = LeftInverse(L("(2,2):(1,3)"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(2,2):(1,3)"), std::string::npos);
}

TEST(LayoutAlgebraTest, CuteLogicalDivideExample) {
  EXPECT_EQ(Str(LogicalDivide(L("(4,2,3):(2,1,8)"), L("4:2"))),
            "((2,2),(2,3)):((4,1),(2,8))");
  EXPECT_EQ(Str(LogicalDivide(L("24:1"), L("4:1"))), "(4,6):(1,4)");
  // The tiles do not fit: complement(4:1, 6) rounds up to 8 > 6.
  absl::StatusOr<Layout> bad = LogicalDivide(L("6:1"), L("4:1"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("logical_divide(6:1, 4:1)"),
            std::string::npos)
      << bad.status();
}

TEST(LayoutAlgebraTest, CuteLogicalProductExample) {
  EXPECT_EQ(Str(LogicalProduct(L("(2,2):(4,1)"), L("6:1"))),
            "((2,2),(2,3)):((4,1),(2,8))");
  EXPECT_EQ(Str(LogicalProduct(L("4:1"), L("3:1"))), "(4,3):(1,4)");
  EXPECT_FALSE(LogicalProduct(L("(2,2):(1,1)"), L("3:1")).ok());
}

}  // namespace
}  // namespace dtensor
