// The tensor-parallel styles beyond colwise/rowwise (sequence_parallel,
// loss_parallel, prepare_input, prepare_output) on the tiny Llama: one
// forward and backward step on 2 and 4 in-process ranks gives the logits,
// loss and every parameter's gradient of the one-rank model with the same
// seed; the layouts the styles promise are observed with hooks.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/module.h"
#include "gtest/gtest.h"
#include "tests/parallel/style_test_util.h"

namespace dtensor {
namespace parallel_testing {
namespace {

constexpr char kMegatron[] = R"(
  "layers.*.attention.wq": "colwise", "layers.*.attention.wk": "colwise",
  "layers.*.attention.wv": "colwise",
  "layers.*.feed_forward.w1": "colwise", "layers.*.feed_forward.w3": "colwise")";

// TP + sequence parallel: the norms run on S(1) activations, the rowwise
// layers reduce-scatter to S(1).
std::string SequenceParallelPlan(bool loss_parallel) {
  return absl::StrCat(R"({"tp": {)", kMegatron, R"plan(,
  "layers.*.attention.wo": {"style": "rowwise", "output_layouts": "S(1)"},
  "layers.*.feed_forward.w2": {"style": "rowwise", "output_layouts": "S(1)"},
  "tok_embeddings": {"style": "rowwise", "output_layouts": "S(1)"},
  "layers.*.attention_norm": "sequence_parallel",
  "layers.*.ffn_norm": "sequence_parallel",
  "norm": "sequence_parallel")plan",
                      loss_parallel ? R"(, "output": "loss_parallel")" : "",
                      "}}");
}

const StepResult& OneRank() {
  static const StepResult* result = [] {
    auto step = LlamaStep(Mesh({1}, {"tp"}), std::nullopt);
    EXPECT_TRUE(step.ok()) << step.status();
    return new StepResult(step.ok() ? *step : StepResult());
  }();
  return *result;
}

// Records the tp placement of what a module's hooks hand on: its output
// after its own hooks (an output hook added after ParallelizeModule's), or
// the input its Forward gets (an input hook added after).
class ShardingLog {
 public:
  AfterParallelize Observe(std::string fqn, bool input) {
    return [this, fqn, input](nn::Module& model) -> absl::Status {
      DT_ASSIGN_OR_RETURN(nn::Module * module, model.Submodule(fqn));
      nn::Module::Hook hook =
          [this](const DTensor& x) -> absl::StatusOr<DTensor> {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(x.placements().back().ToString());
        return x;
      };
      if (input) {
        module->AddInputHook(hook);
      } else {
        module->AddOutputHook(hook);
      }
      return absl::OkStatus();
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

TEST(TpStylesTest, SequenceParallelMatchesOneRank) {
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(tp);
    ShardingLog log;
    auto step = LlamaStep(Mesh({tp}, {"tp"}), SequenceParallelPlan(false),
                          log.Observe("layers.1.ffn_norm", /*input=*/true));
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectSameStep(*step, OneRank());
    // The norm ran on the sequence-sharded activation, on every rank.
    EXPECT_EQ(log.seen(), std::vector<std::string>(tp, "S(1)"));
  }
}

TEST(TpStylesTest, LossParallelMatchesOneRankWithVocabShardedLogits) {
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(tp);
    ShardingLog log;
    auto step = LlamaStep(Mesh({tp}, {"tp"}), SequenceParallelPlan(true),
                          log.Observe("output", /*input=*/false));
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectSameStep(*step, OneRank());
    EXPECT_EQ(log.seen(), std::vector<std::string>(tp, "S(2)"));
  }
}

TEST(TpStylesTest, PrepareInputAndOutputRedistributeToTheGivenShardings) {
  // The attention block gets S(1) inputs (its projections gather them
  // again); the feed-forward block hands on S(1).
  const std::string plan = absl::StrCat(R"({"tp": {)", kMegatron, R"plan(,
  "layers.*.attention.wo": "rowwise", "layers.*.feed_forward.w2": "rowwise",
  "layers.*.attention": {"style": "prepare_input", "input_layouts": "S(1)"},
  "layers.*.feed_forward": {"style": "prepare_output",
                            "output_layouts": "S(1)"}}})plan");
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(tp);
    ShardingLog inputs, outputs;
    auto step = LlamaStep(
        Mesh({tp}, {"tp"}), plan, [&](nn::Module& model) -> absl::Status {
          DT_RETURN_IF_ERROR(inputs.Observe("layers.0.attention", true)(model));
          return outputs.Observe("layers.0.feed_forward", false)(model);
        });
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectSameStep(*step, OneRank());
    EXPECT_EQ(inputs.seen(), std::vector<std::string>(tp, "S(1)"));
    EXPECT_EQ(outputs.seen(), std::vector<std::string>(tp, "S(1)"));
  }
}

TEST(TpStylesTest, ABadShardingIsAnErrorNamingIt) {
  auto step = LlamaStep(
      Mesh({2}, {"tp"}),
      R"({"tp": {"norm": {"style": "prepare_input", "input_layouts": "Q"}}})");
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("\"Q\""), std::string::npos)
      << step.status();
}

}  // namespace
}  // namespace parallel_testing
}  // namespace dtensor
