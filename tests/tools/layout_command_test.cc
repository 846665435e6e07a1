#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace dtensor {
namespace {

struct Result {
  int status;
  std::string out, err;
};

Result RunLayout(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = RunLayoutCommand(args, out, err);
  return {status, out.str(), err.str()};
}

TEST(ShardingCommandTest, JsonForTheIssueExample) {
  const Result r = RunLayout({"--mesh", "4x2", "--shape", "18,2",
                              "--placements", "S(0),S(0)", "--json"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "{\"mesh\":[4,2],\"shape\":[18,2],\"placements\":\"S(0),S(0)\","
            "\"ranks\":["
            "{\"rank\":0,\"coord\":[0,0],\"local_shape\":[3,2],"
            "\"global_offset\":[0,0]},"
            "{\"rank\":1,\"coord\":[0,1],\"local_shape\":[2,2],"
            "\"global_offset\":[3,0]},"
            "{\"rank\":2,\"coord\":[1,0],\"local_shape\":[3,2],"
            "\"global_offset\":[5,0]},"
            "{\"rank\":3,\"coord\":[1,1],\"local_shape\":[2,2],"
            "\"global_offset\":[8,0]},"
            "{\"rank\":4,\"coord\":[2,0],\"local_shape\":[3,2],"
            "\"global_offset\":[10,0]},"
            "{\"rank\":5,\"coord\":[2,1],\"local_shape\":[2,2],"
            "\"global_offset\":[13,0]},"
            "{\"rank\":6,\"coord\":[3,0],\"local_shape\":[2,2],"
            "\"global_offset\":[15,0]},"
            "{\"rank\":7,\"coord\":[3,1],\"local_shape\":[1,2],"
            "\"global_offset\":[17,0]}]}\n");
}

// Mesh dim 1 outermost: 18 -> 9, 9; each 9 -> 3, 3, 3, 0. The placements are
// printed canonically (explicit positions, negative dims normalised).
TEST(ShardingCommandTest, JsonForTheSwappedOrder) {
  const Result r =
      RunLayout({"--mesh=2x2", "--shape=9", "--placements", "S(-1)[1], S(0)[0]",
                 "--json", "--dtype", "bf16"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"mesh\":[2,2],\"shape\":[9],\"placements\":\"S(0)[1],S(0)[0]\","
            "\"ranks\":["
            "{\"rank\":0,\"coord\":[0,0],\"local_shape\":[3],"
            "\"global_offset\":[0]},"
            "{\"rank\":1,\"coord\":[0,1],\"local_shape\":[2],"
            "\"global_offset\":[5]},"
            "{\"rank\":2,\"coord\":[1,0],\"local_shape\":[2],"
            "\"global_offset\":[3]},"
            "{\"rank\":3,\"coord\":[1,1],\"local_shape\":[2],"
            "\"global_offset\":[7]}]}\n");
}

// The JSON read back by ParseJson, a reader independent of the writer. (Its
// only string, the canonical placements, never needs escapes.)
TEST(ShardingCommandTest, JsonReadsBackWithParseJson) {
  const Result r = RunLayout({"--mesh", "dp=2,tp=3", "--shape", "7,5",
                              "--placements", "S(0),S(1)", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  absl::StatusOr<JsonValue> json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << r.out;
  ASSERT_EQ(json->members().size(), 4u);
  EXPECT_EQ(json->members()[0].first, "mesh");
  EXPECT_EQ(json->Find("mesh")->items()[1].number_value(), 3);
  EXPECT_EQ(json->Find("shape")->items()[0].number_value(), 7);
  EXPECT_EQ(json->Find("placements")->string_value(), "S(0),S(1)");
  const std::vector<JsonValue>& ranks = json->Find("ranks")->items();
  ASSERT_EQ(ranks.size(), 6u);
  // Rank 5 at (1, 2): rows [4, 7), columns [4, 5).
  const JsonValue& last = ranks[5];
  EXPECT_EQ(last.Find("rank")->number_value(), 5);
  EXPECT_EQ(last.Find("coord")->items()[1].number_value(), 2);
  EXPECT_EQ(last.Find("local_shape")->items()[0].number_value(), 3);
  EXPECT_EQ(last.Find("local_shape")->items()[1].number_value(), 1);
  EXPECT_EQ(last.Find("global_offset")->items()[0].number_value(), 4);
  EXPECT_EQ(last.Find("global_offset")->items()[1].number_value(), 4);
}

TEST(ShardingCommandTest, TableAndPictureFor2dTensor) {
  const Result r = RunLayout(
      {"--mesh", "2x2", "--shape", "5,4", "--placements", "S(0),S(1)"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "mesh 2x2, shape [5, 4], dtype f32, placements S(0),S(1)\n"
            "\n"
            "rank  coord   local_shape  global_offset  replica\n"
            "0     [0, 0]  [3, 2]       [0, 0]         0\n"
            "1     [0, 1]  [3, 2]       [0, 2]         0\n"
            "2     [1, 0]  [2, 2]       [3, 0]         0\n"
            "3     [1, 1]  [2, 2]       [3, 2]         0\n"
            "\n"
            "rows: tensor dim 0, columns: tensor dim 1\n"
            "      0:2   2:4\n"
            "    +-----+-----+\n"
            "0:3 | 0   | 1   |\n"
            "    +-----+-----+\n"
            "3:5 | 2   | 3   |\n"
            "    +-----+-----+\n");
}

TEST(ShardingCommandTest, PictureLabelsReplicasAndListsEmptyBlocks) {
  const Result r = RunLayout(
      {"--mesh", "2x4", "--shape", "3", "--placements", "P(max),S(0)"});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string picture =
      "columns: tensor dim 0\n"
      "  0:1   1:2   2:3\n"
      "+-----+-----+-----+\n"
      "| 0,4 | 1,5 | 2,6 |\n"
      "+-----+-----+-----+\n"
      "empty blocks: ranks 3, 7\n";
  ASSERT_GE(r.out.size(), picture.size());
  EXPECT_EQ(r.out.substr(r.out.size() - picture.size()), picture) << r.out;
  EXPECT_NE(r.out.find("4     [1, 0]  [1]          [0]            1\n"),
            std::string::npos)
      << r.out;
}

TEST(ShardingCommandTest, NoPictureBeyondTwoDims) {
  const Result r =
      RunLayout({"--mesh", "2", "--shape", "2,2,2", "--placements", "S(2)"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("+--"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1     [1]    [2, 2, 1]    [0, 0, 1]"),
            std::string::npos)
      << r.out;
}

TEST(ShardingCommandTest, EmptyTensorHasNoBoxes) {
  const Result r =
      RunLayout({"--mesh", "2", "--shape", "0,3", "--placements", "S(1)"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(no elements)\nempty blocks: ranks 0, 1\n"),
            std::string::npos)
      << r.out;
}

TEST(ShardingCommandTest, HelpGoesToStdout) {
  const Result r = RunLayout({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: dtensor layout"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

// Bad arguments: exit status 2, nothing on stdout, one line on stderr naming
// the bad value.
TEST(ShardingCommandTest, BadArgumentsAreOneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<std::string> ok = {"--shape", "18,2", "--placements",
                                       "S(0),S(0)"};
  auto with_mesh = [&](const std::string& mesh) {
    std::vector<std::string> args = ok;
    args.insert(args.end(), {"--mesh", mesh});
    return args;
  };
  const Case cases[] = {
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0),S(0)",
        "--bogus"},
       "--bogus"},
      {with_mesh("4x"), "'4x'"},
      {with_mesh("4x0"), "0"},
      {with_mesh("-4x2"), "-4"},
      {with_mesh("100000x100000"), "100000x100000"},
      {with_mesh("4"), "for 2 mesh dims"},
      {{"--mesh", "4x2", "--shape", "18,a", "--placements", "S(0),S(0)"},
       "'18,a'"},
      {{"--mesh", "4x2", "--shape", "18,-2", "--placements", "S(0),S(0)"},
       "-2"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0),Q"}, "'Q'"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(2),R"}, "S(2)"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0)[0],S(0)[0]"},
       "[0, 0]"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0),S(0)",
        "--dtype", "f8"},
       "f8"},
      {{"--mesh", "4x2", "--shape", "18,2"}, "--placements"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0),S(0)",
        "stray"},
       "'stray'"},
      {{"--mesh", "4x2", "--shape", "18,2", "--placements", "S(0)\nR"},
       "S(0)\\nR"},
  };
  for (const Case& c : cases) {
    const Result r = RunLayout(c.args);
    EXPECT_EQ(r.status, 2) << c.names;
    EXPECT_EQ(r.out, "") << c.names;
    ASSERT_FALSE(r.err.empty()) << c.names;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_EQ(r.err.rfind("dtensor layout: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace dtensor
