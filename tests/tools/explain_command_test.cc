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
                      "/dtensor/parallel/plans/", name, ".json");
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
        "--seq", "16777217"},
       "--seq 16777217: LlamaConfig: max_seq_len 16777217"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--rank", "9"},
       "rank 9"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--bandwidth", "0"},
       "bandwidth"},
      {{"--config", "tiny", "--plan", Plan("tp_dp")}, "--mesh"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "0"},
       "--device-memory '0'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "-80"},
       "--device-memory '-80'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "80GB"},
       "--device-memory '80GB'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "inf"},
       "--device-memory 'inf'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "GiB"},
       "--device-memory 'GiB'"},
      {{"--config", "tiny", "--plan", Plan("tp_dp"), "--mesh", "dp=2,tp=2",
        "--device-memory", "0.5B"},
       "--device-memory '0.5B'"},
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
  EXPECT_TRUE(absl::StrContains(r.out, "--device-memory"));
  EXPECT_TRUE(absl::StrContains(r.out, "memory_per_device"));
}

// `text` without the part from `begin` up to (not including) `end`; the
// whole text when `begin` is absent.
std::string Without(const std::string& text, const std::string& begin,
                    const std::string& end) {
  const size_t first = text.find(begin);
  if (first == std::string::npos) return text;
  const size_t last = text.find(end, first + begin.size());
  if (last == std::string::npos) return text;
  return text.substr(0, first) + text.substr(last);
}

TEST(ExplainCommandTest, DeviceMemoryAddsItsOwnLinesAndKeyOnly) {
  const std::vector<std::string> base = {
      "--config", "tiny",      "--plan", Plan("tp_sp_fsdp"),
      "--mesh",   "dp=2,tp=2", "--seq",  "16"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return Explain(args);
  };
  const Result text = with({});
  const Result device_text = with({"--device-memory", "80"});
  ASSERT_EQ(text.status, kExitOk) << text.err;
  ASSERT_EQ(device_text.status, kExitOk) << device_text.err;
  EXPECT_FALSE(absl::StrContains(text.out, "Memory per device"));
  for (const char* line :
       {"Memory per device", "capacity             80.00 GiB", "% of capacity)",
        "headroom", "fits"}) {
    EXPECT_TRUE(absl::StrContains(device_text.out, line)) << line;
  }
  EXPECT_EQ(Without(device_text.out, "\nMemory per device", "\nWarnings:"),
            text.out);
  // The same capacity with a unit, in GiB, MiB or bytes.
  for (const char* capacity : {"80GiB", "81920MiB", "85899345920B"}) {
    const Result with_unit = with({"--device-memory", capacity});
    ASSERT_EQ(with_unit.status, kExitOk) << with_unit.err;
    EXPECT_EQ(with_unit.out, device_text.out) << capacity;
  }

  const Result json = with({"--json"});
  const Result device_json = with({"--json", "--device-memory", "80"});
  ASSERT_EQ(json.status, kExitOk) << json.err;
  ASSERT_EQ(device_json.status, kExitOk) << device_json.err;
  EXPECT_FALSE(absl::StrContains(json.out, "memory_per_device"));
  EXPECT_EQ(Without(device_json.out, ",\"memory_per_device\"", ",\"warnings\""),
            json.out);
  absl::StatusOr<JsonValue> parsed = ParseJson(device_json.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const JsonValue& device = *parsed->Find("memory_per_device");
  const double peak = Number(*parsed->Find("memory_per_rank"), "total");
  EXPECT_EQ(Number(device, "capacity"), 80.0 * (1 << 30));
  EXPECT_EQ(Number(device, "peak"), peak);
  EXPECT_EQ(Number(device, "headroom"), 80.0 * (1 << 30) - peak);
  EXPECT_TRUE(device.Find("fits")->bool_value());

  // A device smaller than the peak: it does not fit, by a negative headroom.
  const Result small = with({"--json", "--device-memory", "0.0001"});
  ASSERT_EQ(small.status, kExitOk) << small.err;
  parsed = ParseJson(small.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const JsonValue& tight = *parsed->Find("memory_per_device");
  EXPECT_FALSE(tight.Find("fits")->bool_value());
  EXPECT_LT(Number(tight, "headroom"), 0);
  const Result small_text = with({"--device-memory", "0.0001"});
  const size_t headroom = small_text.out.find("  headroom ");
  ASSERT_NE(headroom, std::string::npos) << small_text.out;
  const std::string line = small_text.out.substr(
      headroom, small_text.out.find('\n', headroom) - headroom);
  EXPECT_TRUE(absl::StrContains(line, " -")) << line;
  EXPECT_TRUE(absl::StrContains(small_text.out, "no\n")) << small_text.out;
}

}  // namespace
}  // namespace dtensor
