// `dtensor propagate`: the exact JSON of the issue's example (through the
// built binary too), redistributions and collective counts (also read back by
// ParseJson), several outputs, op arguments, and one-line errors with exit
// status 2.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace dtensor {
namespace {

struct Result {
  int status;
  std::string out, err;
};

Result RunCommand(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = RunPropagateCommand(args, out, err);
  return {status, out.str(), err.str()};
}

constexpr char kIssueExample[] =
    R"j({"op":"mm","output":{"shape":[12,4],"placements":"S(0)"},)j"
    R"j("redistributions":[)j"
    R"j({"input":0,"from":"S(0)","to":"S(0)","steps":[],"cost_us":0},)j"
    R"j({"input":1,"from":"R","to":"R","steps":[],"cost_us":0}],)j"
    R"j("collectives":{"all_gather":0,"all_reduce":0,"reduce_scatter":0,)j"
    R"j("all_to_all":0,"permute":0},"cost_us":0})j"
    "\n";

TEST(PropagateCommandTest, IssueExampleJson) {
  const Result r = RunCommand({"--mesh", "4", "--op", "mm", "--in", "12x8:S(0)",
                               "--in", "8x4:R", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, kIssueExample);
}

TEST(PropagateCommandTest, RedistributionStepsAndCountsInJson) {
  // Both operands row-sharded: moving x to S(1) (one all-to-all) would leave
  // a partial sum that costs an all-reduce to read; gathering w (96 bytes per
  // rank) is cheaper with that counted and gives row-sharded output.
  const Result r = RunCommand({"--mesh", "4", "--op=mm", "--in=12x8:S(0)",
                               "--in", "8x4:S(0)", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(R"j("output":{"shape":[12,4],"placements":"S(0)"})j"),
            std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find(R"j({"input":1,"from":"S(0)","to":"R","steps":[{"kind":)j"
                 R"j("all_gather","mesh_dims":[0],"after":"R",)j"
                 R"j("bytes_per_rank":96,"cost_us":)j"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"j("collectives":{"all_gather":1,"all_reduce":0,)j"
                       R"j("reduce_scatter":0,"all_to_all":0,"permute":0})j"),
            std::string::npos)
      << r.out;
}

// The JSON read back by ParseJson, a reader independent of the writer.
TEST(PropagateCommandTest, JsonReadsBackWithParseJson) {
  const Result r = RunCommand({"--mesh", "4", "--op", "exp", "--in", "8:P",
                               "--dtype", "f64", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  absl::StatusOr<JsonValue> json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << r.out;
  std::vector<std::string> keys;
  for (const JsonValue::Member& member : json->members()) {
    keys.push_back(member.first);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"op", "output", "redistributions",
                                            "collectives", "cost_us"}));
  EXPECT_EQ(json->Find("op")->string_value(), "exp");
  EXPECT_EQ(json->Find("output")->Find("placements")->string_value(), "S(0)");
  ASSERT_EQ(json->Find("redistributions")->items().size(), 1u);
  const JsonValue& in = json->Find("redistributions")->items()[0];
  EXPECT_EQ(in.Find("input")->number_value(), 0);
  EXPECT_EQ(in.Find("from")->string_value(), "P(sum)");
  EXPECT_EQ(in.Find("to")->string_value(), "S(0)");
  ASSERT_EQ(in.Find("steps")->items().size(), 1u);
  const JsonValue& step = in.Find("steps")->items()[0];
  EXPECT_EQ(step.Find("kind")->string_value(), "reduce_scatter");
  // Each rank receives 3 blocks of 2 f64 values.
  EXPECT_EQ(step.Find("bytes_per_rank")->number_value(), 48);
  EXPECT_GT(step.Find("cost_us")->number_value(), 0);
  EXPECT_EQ(in.Find("cost_us")->number_value(),
            step.Find("cost_us")->number_value());
  EXPECT_EQ(json->Find("collectives")->Find("reduce_scatter")->number_value(),
            1);
  EXPECT_EQ(json->Find("collectives")->Find("all_gather")->number_value(), 0);
  EXPECT_EQ(json->Find("cost_us")->number_value(),
            in.Find("cost_us")->number_value());
}

TEST(PropagateCommandTest, SeveralOutputsAndArguments) {
  const Result r = RunCommand({"--mesh", "2x2", "--op", "aminmax", "--in",
                               "8x6:S(0),S(1):f64", "--arg", "dims=1", "--arg",
                               "keepdim=true", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.out.find(R"j("output":{"shape":[8,1],"placements":"S(0),P(min)"},)j"
                 R"j("outputs":[{"shape":[8,1],"placements":"S(0),P(min)"},)j"
                 R"j({"shape":[8,1],"placements":"S(0),P(max)"}],)j"),
      std::string::npos)
      << r.out;
}

TEST(PropagateCommandTest, TextNamesStrategyStepsAndOutputs) {
  const Result r = RunCommand({"--mesh", "dp=2,tp=2", "--op", "sum", "--in",
                               "8x6:S(0),S(1)", "--arg", "dims=1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "sum on mesh 2x2: [S(0),S(1)] -> [S(0),P(sum)]\n"
            "input 0: [8, 6] f32 S(0),S(1), kept\n"
            "output 0: [8] f32 S(0),P(sum)\n"
            "total 0.000 us, 0 collective(s)\n");
  const Result gather = RunCommand(
      {"--mesh", "4", "--op", "exp", "--in", "8:P", "--dtype", "f64"});
  ASSERT_EQ(gather.status, 0) << gather.err;
  EXPECT_NE(gather.out.find("input 0: [8] f64 P(sum) -> S(0): 1 step(s)"),
            std::string::npos)
      << gather.out;
  EXPECT_NE(gather.out.find("1. reduce_scatter"), std::string::npos)
      << gather.out;
}

TEST(PropagateCommandTest, ListNamesTheOps) {
  const Result r = RunCommand({"--list"});
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("mm "), std::string::npos);
  EXPECT_NE(r.out.find("dims:ints= keepdim:bool=false"), std::string::npos)
      << r.out;
}

TEST(PropagateCommandTest, BadArgumentsGiveOneLineAndStatusTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--mesh", "4", "--op", "conv", "--in", "4:R"},
      {"--mesh", "4", "--op", "mm"},
      {"--mesh", "4", "--op", "mm", "--in", "4x4", "--in", "4x4:R"},
      {"--mesh", "4", "--op", "mm", "--in", "4x4:R", "--in", "5x4:R"},
      {"--mesh", "4", "--op", "mm", "--in", "4x4:S(2)", "--in", "4x4:R"},
      {"--mesh", "4", "--op", "sum", "--in", "4x4:R", "--arg", "axis=1"},
      {"--mesh", "4", "--op", "sum", "--in", "4x4:R", "--arg", "dims"},
      {"--mesh", "4", "--op", "sum", "--in", "4x4:R", "--arg", "dims=x"},
      {"--mesh", "4", "--op", "sum", "--in", "4x4:R:f99"},
      {"--mesh", "0", "--op", "sum", "--in", "4x4:R"},
      {"--mesh", "4", "--op", "sum", "--in", "4x4:R", "--frobnicate"},
      {"--mesh", "4", "--op", "sum", "--in"},
      {"--op", "sum", "--in", "4:R"},
  };
  for (const std::vector<std::string>& args : bad) {
    const Result r = RunCommand(args);
    EXPECT_EQ(r.status, 2) << args[args.size() - 1];
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("dtensor propagate: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The built binary, as a user runs it.
TEST(PropagateBinaryTest, IssueExampleThroughTheDtensorTool) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_NE(srcdir, nullptr);
  const std::string command =
      std::string(srcdir) +
      "/dtensor/tools/dtensor propagate --mesh 4 --op mm --in '12x8:S(0)' "
      "--in '8x4:R' --json";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(out, kIssueExample);
}

}  // namespace
}  // namespace dtensor
