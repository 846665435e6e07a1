#include "dtensor/base/enum_names.h"

#include <optional>
#include <string_view>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

enum class Fruit : unsigned char { kApple, kPear, kPlum };

constexpr EnumNames<Fruit, Fruit::kPlum> kFruitNames("apple", "pear", "plum");

TEST(EnumNamesTest, NamesEachValue) {
  EXPECT_EQ(std::string_view(kFruitNames.Name(Fruit::kApple)), "apple");
  EXPECT_EQ(std::string_view(kFruitNames.Name(Fruit::kPear)), "pear");
  EXPECT_EQ(std::string_view(kFruitNames.Name(Fruit::kPlum)), "plum");
}

TEST(EnumNamesTest, NamesAValueOutsideTheEnumUnknown) {
  EXPECT_EQ(std::string_view(kFruitNames.Name(static_cast<Fruit>(3))),
            "unknown");
  EXPECT_EQ(std::string_view(kFruitNames.Name(static_cast<Fruit>(255))),
            "unknown");
}

TEST(EnumNamesTest, ParsesEachNameBack) {
  EXPECT_EQ(kFruitNames.Parse("apple"), std::optional<Fruit>(Fruit::kApple));
  EXPECT_EQ(kFruitNames.Parse("pear"), std::optional<Fruit>(Fruit::kPear));
  EXPECT_EQ(kFruitNames.Parse("plum"), std::optional<Fruit>(Fruit::kPlum));
}

TEST(EnumNamesTest, ParsesOnlyExactNames) {
  EXPECT_EQ(kFruitNames.Parse(""), std::nullopt);
  EXPECT_EQ(kFruitNames.Parse("Apple"), std::nullopt);
  EXPECT_EQ(kFruitNames.Parse("pears"), std::nullopt);
  EXPECT_EQ(kFruitNames.Parse("pea"), std::nullopt);
  EXPECT_EQ(kFruitNames.Parse("unknown"), std::nullopt);
}

TEST(EnumNamesTest, ListsTheNamesInValueOrder) {
  EXPECT_EQ(kFruitNames.List(), "apple, pear, plum");
  constexpr EnumNames<Fruit, Fruit::kApple> kOne("apple");
  EXPECT_EQ(kOne.List(), "apple");
}

TEST(EnumNamesTest, WorksAtCompileTime) {
  static_assert(std::string_view(kFruitNames.Name(Fruit::kPear)) == "pear");
  static_assert(kFruitNames.Parse("plum") == Fruit::kPlum);
  static_assert(!kFruitNames.Parse("fig").has_value());
}

}  // namespace
}  // namespace dtensor
