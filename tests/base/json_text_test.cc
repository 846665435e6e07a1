// JSON writing (json_text.h): numbers in dtensor's form, strings escaped so
// that ParseJson, an independent parser, reads back the same values, and no
// throw on invalid UTF-8.
#include "dtensor/base/json_text.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dtensor {
namespace {

using nlohmann::ordered_json;

// The value ParseJson reads from DumpJson(json); fails the test when it
// reads none.
JsonValue RoundTrip(const ordered_json& json) {
  absl::StatusOr<JsonValue> parsed = ParseJson(DumpJson(json));
  EXPECT_TRUE(parsed.ok()) << parsed.status() << " in " << DumpJson(json);
  return parsed.ok() ? *parsed : JsonValue();
}

TEST(JsonTextTest, NumbersAreIntegersOrShortestDoubles) {
  const struct {
    double value;
    const char* text;
  } cases[] = {
      {40.0, "40"},
      {-3.0, "-3"},
      {0.0, "0"},
      {-0.0, "0"},
      {8.3, "8.3"},
      {1e-7, "1e-07"},
      {0.0001, "0.0001"},
      {1e15, "1e+15"},
      {123456789.5, "123456789.5"},
      {0.1 + 0.2, "0.30000000000000004"},
      {999999999999999.0, "999999999999999"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(DumpJson(JsonNumber(c.value)), c.text) << c.value;
    EXPECT_EQ(RoundTrip(JsonNumber(c.value)).number_value(), c.value)
        << c.value;
  }
}

TEST(JsonTextTest, NonFiniteNumbersAreNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double value : {nan, inf, -inf}) {
    EXPECT_EQ(DumpJson(JsonNumber(value)), "null") << value;
    // nlohmann writes a non-finite double as null too.
    EXPECT_EQ(DumpJson(ordered_json(value)), "null") << value;
  }
  const JsonValue parsed = RoundTrip({{"time_us", JsonNumber(nan)}});
  ASSERT_NE(parsed.Find("time_us"), nullptr);
  EXPECT_TRUE(parsed.Find("time_us")->is_null());
}

TEST(JsonTextTest, CompactWithKeysInInsertionOrder) {
  const ordered_json json = {{"z", 1},
                             {"a", {1, 2}},
                             {"m", {{"k", nullptr}, {"b", true}}},
                             {"e", ordered_json::array()}};
  EXPECT_EQ(DumpJson(json),
            R"({"z":1,"a":[1,2],"m":{"k":null,"b":true},"e":[]})");
}

TEST(JsonTextTest, StringsNeedingEscapesReadBackTheSame) {
  // Quotes, backslash, every control character, DEL, and 2-, 3- and 4-byte
  // UTF-8 (é, €, U+1F600).
  std::string text =
      "say \"hi\" \\ / \x7f \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
  for (char c = 1; c < 0x20; ++c) text += c;
  const ordered_json json = {{text, text}};
  const std::string dumped = DumpJson(json);
  // No raw control character reaches the text.
  for (char c : dumped)
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << dumped;
  const JsonValue parsed = RoundTrip(json);
  ASSERT_EQ(parsed.members().size(), 1u);
  EXPECT_EQ(parsed.members()[0].first, text);
  EXPECT_EQ(parsed.members()[0].second.string_value(), text);
}

TEST(JsonTextTest, InvalidUtf8IsReplacedNotThrown) {
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string dumped;
  ASSERT_NO_THROW(dumped = DumpJson(ordered_json("a\xFF"
                                                 "b \xC3")));
  absl::StatusOr<JsonValue> parsed = ParseJson(dumped);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->string_value(), "a" + replacement + "b " + replacement);
}

}  // namespace
}  // namespace dtensor
