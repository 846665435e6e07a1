#include "dtensor/base/json_value.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(JsonValueTest, ParsesScalars) {
  EXPECT_TRUE(ParseJson(" null ")->is_null());
  EXPECT_TRUE(ParseJson("true")->bool_value());
  EXPECT_FALSE(ParseJson("false")->bool_value());
  EXPECT_EQ(ParseJson("-12.5e2")->number_value(), -1250.0);
  EXPECT_EQ(ParseJson("0")->number_value(), 0.0);
  EXPECT_EQ(ParseJson("\"a\\\"b\\\\c\\/\\n\\t\"")->string_value(),
            "a\"b\\c/\n\t");
}

TEST(JsonValueTest, DecodesUnicodeEscapes) {
  EXPECT_EQ(ParseJson("\"\\u0041\"")->string_value(), "A");
  EXPECT_EQ(ParseJson("\"\\u00e9\"")->string_value(), "\xC3\xA9");
  EXPECT_EQ(ParseJson("\"\\u20AC\"")->string_value(), "\xE2\x82\xAC");
  // U+1F600 as a surrogate pair.
  EXPECT_EQ(ParseJson("\"\\ud83d\\ude00\"")->string_value(),
            "\xF0\x9F\x98\x80");
}

TEST(JsonValueTest, ObjectsKeepOrderAndFind) {
  auto v = ParseJson(R"({"b": 1, "a": [true, null, "x"], "c": {}})");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_object());
  ASSERT_EQ(v->members().size(), 3u);
  EXPECT_EQ(v->members()[0].first, "b");
  EXPECT_EQ(v->members()[1].first, "a");
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 3u);
  EXPECT_TRUE(a->items()[1].is_null());
  EXPECT_EQ(a->items()[2].string_value(), "x");
  EXPECT_TRUE(v->Find("c")->members().empty());
  EXPECT_EQ(v->Find("zz"), nullptr);
}

struct BadCase {
  const char* text;
  const char* message_part;
};

TEST(JsonValueTest, ErrorsNamePosition) {
  const BadCase cases[] = {
      {"", "line 1 column 1"},
      {"{\"a\": 1,\n  \"b\" 2}", "line 2 column 7"},
      {"[1, 2", "end of input"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\":1, \"a\":2}", "duplicate key \"a\""},
      {"\"abc", "unterminated string"},
      {"\"\\q\"", "unknown escape"},
      {"01", "trailing text"},
      {"1.", "expected a digit after '.'"},
      {"-", "expected a digit"},
      {"1e", "exponent"},
      {"tru", "expected a value"},
      {"{1:2}", "expected a string key"},
      {"\"\\ud83d\"", "low surrogate"},
      {"\"\\u12G4\"", "hex digit"},
      {"\"a\nb\"", "control character"},
      {"[] x", "trailing text"},
  };
  for (const BadCase& c : cases) {
    auto v = ParseJson(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find(c.message_part), std::string::npos)
        << c.text << " -> " << v.status();
  }
}

TEST(JsonValueTest, RejectsDeepNestingWithoutCrashing) {
  std::string deep(100000, '[');
  auto v = ParseJson(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nesting too deep"), std::string::npos);
}

// Random documents written by a serializer in the test, then parsed and
// compared structurally with the generator's own tree.
struct Node {
  int kind;  // 0 null, 1 bool, 2 int number, 3 string, 4 array, 5 object
  bool b = false;
  int n = 0;
  std::string s;
  std::vector<std::pair<std::string, Node>> children;
};

Node RandomNode(std::mt19937& rng, int depth) {
  Node node;
  node.kind = static_cast<int>(rng() % (depth > 3 ? 4 : 6));
  node.b = rng() % 2;
  node.n = static_cast<int>(rng() % 2001) - 1000;
  const char alphabet[] = "ab\"\\/\n\tz*.";
  int len = static_cast<int>(rng() % 6);
  for (int i = 0; i < len; ++i) node.s += alphabet[rng() % 10];
  if (node.kind >= 4) {
    int count = static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      node.children.emplace_back(absl::StrCat("k", i, node.s),
                                 RandomNode(rng, depth + 1));
    }
  }
  return node;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\u0009";
    else
      out += c;
  }
  return out + "\"";
}

std::string Write(const Node& node) {
  switch (node.kind) {
    case 0:
      return "null";
    case 1:
      return node.b ? "true" : "false";
    case 2:
      return absl::StrCat(node.n);
    case 3:
      return Quote(node.s);
    case 4: {
      std::string out = "[ ";
      for (size_t i = 0; i < node.children.size(); ++i) {
        out += (i ? " ,\n" : "") + Write(node.children[i].second);
      }
      return out + "]";
    }
    default: {
      std::string out = "{";
      for (size_t i = 0; i < node.children.size(); ++i) {
        out += (i ? "," : "") + Quote(node.children[i].first) + " :" +
               Write(node.children[i].second);
      }
      return out + " }";
    }
  }
}

void ExpectSame(const Node& node, const JsonValue& v) {
  switch (node.kind) {
    case 0:
      EXPECT_TRUE(v.is_null());
      return;
    case 1:
      ASSERT_TRUE(v.is_bool());
      EXPECT_EQ(v.bool_value(), node.b);
      return;
    case 2:
      ASSERT_TRUE(v.is_number());
      EXPECT_EQ(v.number_value(), node.n);
      return;
    case 3:
      ASSERT_TRUE(v.is_string());
      EXPECT_EQ(v.string_value(), node.s);
      return;
    case 4:
      ASSERT_TRUE(v.is_array());
      ASSERT_EQ(v.items().size(), node.children.size());
      for (size_t i = 0; i < node.children.size(); ++i) {
        ExpectSame(node.children[i].second, v.items()[i]);
      }
      return;
    default:
      ASSERT_TRUE(v.is_object());
      ASSERT_EQ(v.members().size(), node.children.size());
      for (size_t i = 0; i < node.children.size(); ++i) {
        EXPECT_EQ(v.members()[i].first, node.children[i].first);
        ExpectSame(node.children[i].second, v.members()[i].second);
      }
  }
}

TEST(JsonValueTest, RandomDocumentsRoundTrip) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    Node node = RandomNode(rng, 0);
    std::string text = Write(node);
    auto v = ParseJson(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status();
    ExpectSame(node, *v);
  }
}

// Many keys: every one is kept in order, and a duplicate of an early key is
// found at the end (the set of keys seen, not a rescan per key).
TEST(JsonValueTest, LargeObjectKeepsKeysAndFindsLateDuplicate) {
  constexpr int kKeys = 50000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", "\"k", i, "\":", i);
  }
  absl::StatusOr<JsonValue> parsed = ParseJson(absl::StrCat(text, "}"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->members().size(), kKeys);
  EXPECT_EQ(parsed->members()[kKeys - 1].first, absl::StrCat("k", kKeys - 1));

  absl::StatusOr<JsonValue> duplicate =
      ParseJson(absl::StrCat(text, ",\"k7\":0}"));
  ASSERT_FALSE(duplicate.ok());
  EXPECT_THAT(duplicate.status().message(),
              testing::HasSubstr("duplicate key \"k7\""));
}

}  // namespace
}  // namespace dtensor
