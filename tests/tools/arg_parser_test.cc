#include "tools/arg_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr FlagSpec kFlags[] = {{"mesh"}, {"shape"}, {"json", false}};

std::string ErrorOf(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, kFlags);
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(ParseArgsTest, ValuesSwitchesAndPositionals) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      {"--mesh", "4x2", "extra", "--shape=18,2", "--json", "--", "--mesh"},
      kFlags);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ValueOr("mesh", ""), "4x2");
  EXPECT_EQ(*parsed->Required("shape"), "18,2");
  EXPECT_TRUE(parsed->Has("json"));
  EXPECT_EQ(parsed->positional(),
            (std::vector<std::string>{"extra", "--mesh"}));

  absl::StatusOr<ParsedArgs> empty = ParseArgs({}, kFlags);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->Has("json"));
  EXPECT_EQ(empty->ValueOr("mesh", "8"), "8");
  EXPECT_EQ(empty->Required("mesh").status().message(), "missing --mesh");
  // An empty value given with "=" is a value.
  EXPECT_EQ(ParseArgs({"--shape="}, kFlags)->ValueOr("shape", "x"), "");
}

TEST(ParseArgsTest, ErrorsNameTheArgument) {
  EXPECT_EQ(ErrorOf({"--bogus", "1"}), "unknown flag '--bogus'");
  EXPECT_EQ(ErrorOf({"--bogus=1"}), "unknown flag '--bogus=1'");
  EXPECT_EQ(ErrorOf({"--mesh", "2", "--mesh", "4"}), "flag --mesh given twice");
  EXPECT_EQ(ErrorOf({"--mesh"}), "flag --mesh needs a value");
  EXPECT_EQ(ErrorOf({"--mesh", "--json"}), "flag --mesh needs a value");
  EXPECT_EQ(ErrorOf({"--json=1"}),
            "flag --json takes no value, got '--json=1'");
}

TEST(ParseIntListTest, ParsesSeparatedIntegers) {
  EXPECT_EQ(*ParseIntList("4x2", 'x', "--mesh"), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(*ParseIntList("18,0,-1", ',', "--shape"),
            (std::vector<int64_t>{18, 0, -1}));
  EXPECT_EQ(*ParseIntList("8", 'x', "--mesh"), (std::vector<int64_t>{8}));
  for (const std::string text :
       {"", "4x", "x2", "4xx2", "4,2", "a", "1.5", "99999999999999999999"}) {
    absl::StatusOr<std::vector<int64_t>> parsed =
        ParseIntList(text, 'x', "--mesh");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("--mesh '" + text + "'"),
              std::string::npos)
        << parsed.status();
  }
}

}  // namespace
}  // namespace dtensor
