// `dtensor explain` on the command line: the text report, the --json object
// (parsed, its totals consistent with its modules), and one-line errors with
// exit status 2 for bad input.
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tools/commands.h"
#include "tools/subcommand.h"

namespace dtensor {
namespace {

std::string Plan(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir == nullptr ? "." : srcdir,
                      "/dtensor/dtensor/parallel/plans/", name, ".json");
}

struct Result {
  int status;
  std::string out;
  std::string err;
};

Result Explain(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int status = RunExplainCommand(args, out, err);
  return {status, out.str(), err.str()};
}

TEST(ExplainCommandTest, PrintsTablesPerStepAndModule) {
  Result r = Explain({"--model", "llama", "--config", "tiny", "--plan",
                      Plan("tp_dp"), "--mesh", "dp=2,tp=2", "--seq", "16"});
  ASSERT_EQ(r.status, kExitOk) << r.err;
  for (const char* text :
       {"llama tiny", "batch 2 x seq 16, bf16", "Collectives per step",
        "Memory per rank", "peak activations", "Warnings: none",
        "layers.0.attention.wo (Linear)", "R,S(1) local [256, 128]",
        "all_reduce     over tp"}) {
    EXPECT_TRUE(absl::StrContains(r.out, text)) << text << "\n" << r.out;
  }
}

double Number(const JsonValue& object, const char* key) {
  const JsonValue* v = object.Find(key);
  EXPECT_TRUE(v != nullptr && v->is_number()) << key;
  return v == nullptr ? -1 : v->number_value();
}

TEST(ExplainCommandTest, JsonTotalsAddUpOverModulesAndPhases) {
  Result r = Explain({"--config", "tiny", "--plan", Plan("tp_sp_fsdp"),
                      "--mesh", "dp=2,tp=2", "--batch", "4", "--seq", "8",
                      "--dtype", "f32", "--bandwidth", "100,50", "--json"});
  ASSERT_EQ(r.status, kExitOk) << r.err;
  absl::StatusOr<JsonValue> json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("model")->string_value(), "llama");
  EXPECT_EQ(json->Find("config")->string_value(), "tiny");
  EXPECT_EQ(Number(*json, "batch"), 4);
  EXPECT_EQ(json->Find("dtype")->string_value(), "f32");
  const JsonValue& totals = *json->Find("totals");
  // Per phase, over the modules: collectives (a gradient bucket counts once
  // per module that shares it) and bytes.
  std::map<std::string, double> module_count, module_bytes;
  for (const JsonValue& m : json->Find("modules")->items()) {
    ASSERT_TRUE(m.Find("name") && m.Find("type") && m.Find("parameters") &&
                m.Find("activations"));
    for (const char* phase : {"forward", "backward"}) {
      for (const JsonValue& c : m.Find(phase)->items()) {
        module_count[phase] += Number(c, "count");
        module_bytes[phase] += Number(c, "count") * Number(c, "bytes_per_rank");
      }
    }
  }
  const double forward = Number(*totals.Find("forward"), "collectives");
  const double backward = Number(*totals.Find("backward"), "collectives");
  const double optimizer = Number(*totals.Find("optimizer"), "collectives");
  EXPECT_GT(forward, 0);
  EXPECT_EQ(module_count["forward"], forward);
  EXPECT_GE(module_count["backward"], backward);
  EXPECT_EQ(Number(*totals.Find("step"), "collectives"),
            forward + backward + optimizer);
  EXPECT_DOUBLE_EQ(module_bytes["forward"],
                   Number(*totals.Find("forward"), "bytes_per_rank"));
  EXPECT_DOUBLE_EQ(module_bytes["backward"],
                   Number(*totals.Find("backward"), "bytes_per_rank"));
  double by_kind = 0;
  for (const auto& [kind, k] :
       totals.Find("step")->Find("by_kind")->members()) {
    by_kind += Number(k, "count");
  }
  EXPECT_EQ(by_kind, forward + backward + optimizer);
  const JsonValue& memory = *json->Find("memory_per_rank");
  EXPECT_EQ(Number(memory, "total"), Number(memory, "parameters") +
                                         Number(memory, "gradients") +
                                         Number(memory, "optimizer_state") +
                                         Number(memory, "peak_activations"));
  EXPECT_TRUE(json->Find("warnings")->is_array());
}

TEST(ExplainCommandTest, BadInputIsAOneLineUsageError) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--config", "7b", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2"},
       "model config \"7b\""},
      {{"--model", "gpt", "--config", "tiny", "--plan", Plan("tp_dp"), "--mesh",
        "dp=2,tp=2"},
       "--model 'gpt'"},
      {{"--config", "tiny", "--plan", "no_such_plan.json", "--mesh",
        "dp=2,tp=2"},
       "no_such_plan.json"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,pp=2"},
       "tp"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--seq", "0"},
       "--seq '0'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--seq", "4096"},
       "4096"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--rank", "9"},
       "rank 9"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--bandwidth", "0"},
       "bandwidth"},
      {{"--config", "tiny", "--plan", Plan("tp_dp")}, "--mesh"},
  };
  for (const Case& c : cases) {
    Result r = Explain(c.args);
    EXPECT_EQ(r.status, kExitUsage) << c.message;
    EXPECT_TRUE(absl::StartsWith(r.err, "dtensor explain: ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.message)) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(ExplainCommandTest, HelpDescribesTheJsonFormat) {
  Result r = Explain({"--help"});
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_TRUE(absl::StrContains(r.out, "memory_per_rank"));
}

}  // namespace
}  // namespace dtensor
