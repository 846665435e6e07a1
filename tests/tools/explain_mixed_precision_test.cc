// `dtensor explain` under a plan's mixed-precision policy: the bytes of
// FSDP's all-gathers and reduce-scatters follow param_dtype and
// reduce_dtype (against a hand derivation: a bf16 all-gather moves half the
// bytes of an f32 one), the memory keeps f32 masters, gradients and
// optimizer state while activations shrink, the --json report gains a
// "mixed_precision" object (only then) and --dtype defaults to the masters'
// f32.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tools/commands.h"
#include "tools/subcommand.h"

namespace dtensor {
namespace {

// The tiny config's parameters, by hand: dim 256, 4 layers, 8 heads of 32,
// 4 kv heads (kv dim 128), vocabulary 256, hidden dim 2/3 * 4 * 256 = 682
// rounded up to a multiple of 64 = 704. Every dim 0 divides by 4.
constexpr double kLayer = 256 * 256 + 2 * 128 * 256 +
                          256 * 256 +      // wq wk wv wo
                          3 * 704 * 256 +  // w1 w3 w2
                          2 * 256;         // norms
constexpr double kTinyParameters = 4 * kLayer + 2 * 256 * 256 + 256;
constexpr double kDp = 4;

// A plan file in the test's temporary directory.
std::string WritePlan(const std::string& name, const std::string& json) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(tmp == nullptr ? "/tmp" : tmp, "/", name, ".json");
  std::ofstream(path) << json;
  return path;
}

// The --json report of one step of the tiny model under `plan_json` on
// dp=4 (batch 4 x seq 16).
JsonValue Explain(const std::string& name, const std::string& plan_json,
                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {
      "--config", "tiny", "--plan", WritePlan(name, plan_json),
      "--mesh",   "dp=4", "--seq",  "16",
      "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::ostringstream out, err;
  EXPECT_EQ(RunExplainCommand(args, out, err), kExitOk) << err.str();
  absl::StatusOr<JsonValue> json = ParseJson(out.str());
  EXPECT_TRUE(json.ok()) << json.status() << out.str();
  return json.ok() ? *json : JsonValue();
}

double Bytes(const JsonValue& report, const char* phase, const char* kind) {
  const JsonValue* k =
      report.Find("totals")->Find(phase)->Find("by_kind")->Find(kind);
  return k == nullptr ? -1 : k->Find("bytes_per_rank")->number_value();
}

double Memory(const JsonValue& report, const char* field) {
  return report.Find("memory_per_rank")->Find(field)->number_value();
}

TEST(ExplainMixedPrecisionTest, BytesAndMemoryFollowTheDTypes) {
  const JsonValue f32 =
      Explain("fsdp", R"({"dp": "fsdp"})", {"--dtype", "f32"});
  const JsonValue bf16 =
      Explain("fsdp_bf16",
              R"({"dp": "fsdp", "mixed_precision": {"param_dtype": "bf16"}})");
  const JsonValue bf16_reduce =
      Explain("fsdp_bf16_reduce",
              R"({"dp": "fsdp", "mixed_precision": {"param_dtype": "bf16",
          "reduce_dtype": "bf16"}})");
  ASSERT_TRUE(f32.is_object() && bf16.is_object() && bf16_reduce.is_object());
  // Each rank receives the other 3 ranks' quarter of every parameter, in
  // forward and again in backward: (dp - 1) * P / dp elements.
  const double gathered = (kDp - 1) * kTinyParameters / kDp;
  for (const char* phase : {"forward", "backward"}) {
    SCOPED_TRACE(phase);
    EXPECT_EQ(Bytes(f32, phase, "all_gather"), 4 * gathered);
    EXPECT_EQ(Bytes(bf16, phase, "all_gather"), 2 * gathered);
    EXPECT_EQ(Bytes(bf16_reduce, phase, "all_gather"), 2 * gathered);
  }
  // The gradients' reduce-scatter: (dp - 1) / dp of P elements, in
  // reduce_dtype (default the masters' f32).
  EXPECT_EQ(Bytes(f32, "backward", "reduce_scatter"), 4 * gathered);
  EXPECT_EQ(Bytes(bf16, "backward", "reduce_scatter"), 4 * gathered);
  EXPECT_EQ(Bytes(bf16_reduce, "backward", "reduce_scatter"), 2 * gathered);
  // f32 masters, gradients and AdamW moments: a quarter of P each.
  for (const JsonValue* report : {&f32, &bf16, &bf16_reduce}) {
    EXPECT_EQ(Memory(*report, "parameters"), 4 * kTinyParameters / kDp);
    EXPECT_EQ(Memory(*report, "gradients"), 4 * kTinyParameters / kDp);
    EXPECT_EQ(Memory(*report, "optimizer_state"), 8 * kTinyParameters / kDp);
  }
  // Activations and the gathered copies in bf16.
  EXPECT_LT(Memory(bf16, "peak_activations"),
            0.75 * Memory(f32, "peak_activations"));
}

TEST(ExplainMixedPrecisionTest, ReportsThePolicyAndDefaultsToF32Masters) {
  const JsonValue with = Explain(
      "policy", R"({"dp": "fsdp", "mixed_precision": {"param_dtype": "bf16",
                    "reduce_dtype": "f32"}})");
  ASSERT_TRUE(with.is_object());
  EXPECT_EQ(with.Find("dtype")->string_value(), "f32");
  const JsonValue* policy = with.Find("mixed_precision");
  ASSERT_TRUE(policy != nullptr && policy->is_object());
  EXPECT_EQ(policy->Find("param_dtype")->string_value(), "bf16");
  EXPECT_EQ(policy->Find("reduce_dtype")->string_value(), "f32");
  EXPECT_EQ(policy->Find("output_dtype"), nullptr);
  const JsonValue without = Explain("no_policy", R"({"dp": "fsdp"})");
  ASSERT_TRUE(without.is_object());
  EXPECT_EQ(without.Find("dtype")->string_value(), "bf16");
  EXPECT_EQ(without.Find("mixed_precision"), nullptr);
}

TEST(ExplainMixedPrecisionTest, AnUnknownDTypeIsAnErrorNamingIt) {
  std::ostringstream out, err;
  const int status = RunExplainCommand(
      {"--config", "tiny", "--mesh", "dp=4", "--plan",
       WritePlan("bad", R"({"mixed_precision": {"param_dtype": "fp8"}})")},
      out, err);
  EXPECT_NE(status, kExitOk);
  EXPECT_NE(err.str().find("fp8"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace dtensor
