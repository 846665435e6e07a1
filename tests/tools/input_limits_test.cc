// Bounded work on any input: model configs outside the stated ranges, and
// files that are not regular or too large, are one-line errors naming the
// field (or path) and the limit, returned at once.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/text_file.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/parallel/plan.h"
#include "gtest/gtest.h"
#include "tools/commands.h"
#include "tools/explain_config.h"

namespace dtensor {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

TEST(InputLimitsTest, ConfigFieldsAboveTheirLimitsNameFieldAndLimit) {
  struct Case {
    std::string json;
    std::string message;
  } cases[] = {
      {absl::StrCat("{\"n_layers\": ", nn::kMaxLlamaLayers + 1, "}"),
       absl::StrCat("n_layers ", nn::kMaxLlamaLayers + 1,
                    " is above the limit ", nn::kMaxLlamaLayers)},
      {"{\"n_layers\": 4000000000}", "n_layers 4000000000 is above the limit"},
      {"{\"dim\": 1099511627776, \"n_heads\": 1}",
       absl::StrCat("dim 1099511627776 is above the limit ", nn::kMaxLlamaDim)},
      {"{\"n_heads\": 131072, \"dim\": 262144}",
       "n_heads 131072 is above the limit"},
      {"{\"n_kv_heads\": 0}", "n_kv_heads 0"},
      {"{\"vocab_size\": 100000000}",
       "vocab_size 100000000 is above the limit"},
      {"{\"max_seq_len\": 100000000}",
       "max_seq_len 100000000 is above the limit"},
      {"{\"multiple_of\": 100000000}",
       "multiple_of 100000000 is above the limit"},
      {"{\"ffn_dim_multiplier\": 1e300}",
       "ffn_dim_multiplier 1e+300 makes the hidden dim"},
      {"{\"n_layers\": -1}", "n_layers -1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<nn::LlamaConfig> config = ParseLlamaConfigJson(c.json);
    ASSERT_FALSE(config.ok()) << c.json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(config.status().message(), c.message))
        << c.json << ": " << config.status();
  }
}

TEST(InputLimitsTest, ConfigAtTheLimitsIsAccepted) {
  nn::LlamaConfig config;
  config.n_layers = nn::kMaxLlamaLayers;
  config.vocab_size = nn::kMaxLlamaVocab;
  config.max_seq_len = nn::kMaxLlamaSeqLen;
  config.dim = nn::kMaxLlamaDim;
  config.n_heads = 1024;
  config.ffn_dim_multiplier = 1.0;
  config.multiple_of = 1024;
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
  // Every shipped config is far inside.
  for (const char* name : {"tiny", "1b", "8b", "70b", "405b"}) {
    EXPECT_TRUE(LoadLlamaConfig(name).ok()) << name;
  }
}

TEST(InputLimitsTest, DevicesAreRefusedByEveryReader) {
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig("/dev/zero");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(config.status().message(),
                                "/dev/zero is not a regular file"))
      << config.status();
  absl::StatusOr<parallel::Plan> plan = parallel::LoadPlanFile("/dev/zero");
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(plan.status().message(),
                                "/dev/zero is not a regular file"))
      << plan.status();
}

TEST(InputLimitsTest, OversizedFilesNameTheirSizeAndTheLimit) {
  const std::string path = TempPath("huge_plan.json");
  {
    std::ofstream file(path);
    file << "{\"tp\": {";
    file << std::string(kMaxPlanFileBytes, ' ');
    file << "}}";
  }
  absl::StatusOr<parallel::Plan> plan = parallel::LoadPlanFile(path);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      plan.status().message(),
      absl::StrCat(path, " has ", kMaxPlanFileBytes + 10,
                   " bytes; the limit is ", kMaxPlanFileBytes)))
      << plan.status();
}

TEST(InputLimitsTest, ExplainGivesOneLineAndExitCode2) {
  std::ostringstream out, err;
  const std::vector<std::string> args = {"--config",  "/dev/zero", "--plan",
                                         "/dev/zero", "--mesh",    "2"};
  EXPECT_EQ(RunExplainCommand(args, out, err), 2);
  EXPECT_EQ(err.str(),
            "dtensor explain: model config: /dev/zero is not a regular file "
            "(a device, FIFO or socket)\n");
}

// Found by tests/fuzz: --verify used to try to allocate the whole tensor.
TEST(InputLimitsTest, PlanVerifyRefusesTensorsTooLargeToHold) {
  std::ostringstream out, err;
  const std::vector<std::string> args = {
      "--mesh", "4",    "--shape", "6,492233720367", "--from",
      "P",      "--to", "S(1)",    "--verify"};
  EXPECT_EQ(RunPlanCommand(args, out, err), 2);
  EXPECT_TRUE(absl::StrContains(err.str(), "[6,492233720367] has more than"))
      << err.str();
}

}  // namespace
}  // namespace dtensor
