#include "dtensor/parallel/plan.h"

#include <memory>
#include <string>
#include <vector>

#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/llama_config.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

std::unique_ptr<nn::Transformer> TinyLlama() {
  nn::LlamaConfig config;
  config.dim = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 64;
  config.multiple_of = 32;
  config.max_seq_len = 16;
  auto model = nn::Transformer::Create(config);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(model).value();
}

DeviceMesh Mesh() { return DeviceMesh::Create({2, 2}, {"dp", "tp"}).value(); }

TEST(PlanTest, MatchPatternStarIsOneComponent) {
  // Reference: component-wise comparison written out by hand per case.
  EXPECT_TRUE(MatchPattern("layers.*.attention.wq", "layers.3.attention.wq"));
  EXPECT_TRUE(MatchPattern("layers.*.attention.wq", "layers.10.attention.wq"));
  EXPECT_FALSE(MatchPattern("layers.*.attention.wq", "layers.attention.wq"));
  EXPECT_FALSE(
      MatchPattern("layers.*.attention.wq", "layers.3.x.attention.wq"));
  EXPECT_FALSE(MatchPattern("layers.*.attention.wq", "layers.3.attention"));
  EXPECT_FALSE(MatchPattern("layers.*", "layers"));
  EXPECT_TRUE(MatchPattern("*", "output"));
  EXPECT_FALSE(MatchPattern("*", "layers.0"));
  EXPECT_TRUE(MatchPattern("output", "output"));
  EXPECT_FALSE(MatchPattern("output", "outputs"));
  EXPECT_FALSE(MatchPattern("l*", "layers"));  // No partial wildcards.
}

TEST(PlanTest, ParsesStylesAndOptions) {
  auto plan = ParsePlan(R"json({
    "tp": {"layers.*.attention.wq": "colwise",
           "layers.*.attention.wo": "rowwise",
           "layers.*.attention_norm": "sequence_parallel",
           "output": {"style": "colwise", "output_layouts": "S(-1)",
                      "use_local_output": false
}
}
, "dp" : "fsdp"
})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tp_dim, "tp");
  EXPECT_EQ(plan->dp, DataParallel::kFsdp);
  ASSERT_EQ(plan->tp.size(), 4u);
  EXPECT_EQ(plan->tp[0].pattern, "layers.*.attention.wq");
  EXPECT_EQ(plan->tp[0].spec.style, Style::kColwise);
  EXPECT_FALSE(plan->tp[0].spec.use_local_output);  // Default (plan.h).
  EXPECT_EQ(plan->tp[1].spec.style, Style::kRowwise);
  EXPECT_EQ(plan->tp[2].spec.style, Style::kSequenceParallel);
  EXPECT_EQ(plan->tp[3].spec.output_layouts, "S(-1)");
  EXPECT_FALSE(plan->tp[3].spec.input_layouts.has_value());
  EXPECT_FALSE(plan->tp[3].spec.use_local_output);
}

TEST(PlanTest, ParsesBucketSizes) {
  auto plan = ParsePlan(R"json({"dp": "replicate", "bucket_mb": 4,
                                "first_bucket_mb": 0.5})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bucket_bytes, 4 << 20);
  EXPECT_EQ(plan->first_bucket_bytes, 1 << 19);
  plan = ParsePlan(R"json({"dp": "replicate"})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bucket_bytes, 25 << 20);  // DDP's defaults.
  EXPECT_EQ(plan->first_bucket_bytes, 1 << 20);
}

TEST(PlanTest, ParseErrorsNameTheValue) {
  const std::pair<const char*, const char*> cases[] = {
      {R"json({"tp": {"a": "diagonal"}})json", "\"diagonal\""},
      {R"json({"tp": {"a": {"style": "colwise", "stride": 2}}})json",
       "\"stride\""},
      {R"json({"tp": {"a": {"output_layouts": "R"}}})json", "\"style\""},
      {R"json({"tp": {"a": 3}})json", "not a number"},
      {R"json({"tp": {"a": {"style": "colwise", "use_local_output": "yes"}}})json",
       "use_local_output"},
      {R"json({"dp": "zero3"})json", "\"zero3\""},
      {R"json({"pp": {}})json", "\"pp\""},
      {R"json({"bucket_mb": 0})json", "\"bucket_mb\" is 0"},
      {R"json({"first_bucket_mb": -2})json", "\"first_bucket_mb\" is -2"},
      {R"json({"first_bucket_mb": "1"})json", "first_bucket_mb"},
      {R"json([1])json", "not a array"},
      {R"json({"tp": })json", "line 1 column 8"},
  };
  for (const auto& c : cases) {
    auto plan = ParsePlan(c.first);
    ASSERT_FALSE(plan.ok()) << c.first;
    EXPECT_NE(plan.status().message().find(c.second), std::string::npos)
        << c.first << " -> " << plan.status();
  }
}

TEST(PlanTest, ResolvesEveryLayer) {
  auto model = TinyLlama();
  auto plan = ParsePlan(R"json({"tp": {
      "layers.*.attention.wq": "colwise",
      "layers.*.attention.wo": "rowwise",
      "layers.*.ffn_norm": "sequence_parallel",
      "tok_embeddings": "rowwise",
      "output": "loss_parallel"}})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto resolved = ResolvePlan(*plan, *model, Mesh());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::vector<std::string> names;
  for (const ResolvedEntry& r : *resolved) names.push_back(r.fqn);
  // Pre-order over the tree.
  EXPECT_EQ(names, (std::vector<std::string>{
                       "tok_embeddings", "layers.0.attention.wq",
                       "layers.0.attention.wo", "layers.0.ffn_norm",
                       "layers.1.attention.wq", "layers.1.attention.wo",
                       "layers.1.ffn_norm", "output"}));
  EXPECT_EQ((*resolved)[1].entry->spec.style, Style::kColwise);
  EXPECT_EQ((*resolved)[1].module->type_name(), "Linear");
}

TEST(PlanTest, ResolveErrorsNameTheValue) {
  auto model = TinyLlama();
  const std::pair<const char*, const char*> cases[] = {
      {R"json({"tp": {"layers.*.attn.wq": "colwise"}})json",
       "\"layers.*.attn.wq\" matches no module"},
      {R"json({"tp": {"layers.*.attention.wq": "colwise",
                  "layers.0.attention.*": "rowwise"}})json",
       "\"layers.0.attention.wq\" is matched by both"},
      {R"json({"tp": {"layers.*.attention": "colwise"}})json",
       "of type Attention"},
      {R"json({"tp": {"layers.*.attention.wq": "sequence_parallel"}})json",
       "of type Linear"},
      {R"json({"tp": {"tok_embeddings": "loss_parallel"}})json",
       "of type Embedding"},
      {R"json({"tp_dim": "model", "tp": {"output": "colwise"}})json", "model"},
      {R"json({"dp_dim": "data", "dp": "fsdp"})json", "data"},
  };
  for (const auto& c : cases) {
    auto plan = ParsePlan(c.first);
    ASSERT_TRUE(plan.ok()) << c.first << plan.status();
    auto resolved = ResolvePlan(*plan, *model, Mesh());
    ASSERT_FALSE(resolved.ok()) << c.first;
    EXPECT_NE(resolved.status().message().find(c.second), std::string::npos)
        << c.first << " -> " << resolved.status();
  }
}

TEST(PlanTest, LoadPlanFileMissingNamesPath) {
  auto plan = LoadPlanFile("/nonexistent/plan.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find("/nonexistent/plan.json"),
            std::string::npos);
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
