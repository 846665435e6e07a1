// A Hugging Face config.json as a plan file: the base_model_tp_plan of a
// Llama config (testdata/llama_config.json: q/k/v/gate/up colwise, o/down
// rowwise) applied to a model built here with Hugging Face's module names
// (layers.N.self_attn.q_proj, ..., layers.N.mlp.down_proj). Forward and
// gradients equal the same model on one rank, and the forward collectives are
// the textbook count: one all-reduce after o_proj and one after down_proj
// per layer, nothing else (backward is not checked: docs/parallel.md).
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/embedding.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/nn/norms.h"
#include "dtensor/ops/attention_ops.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "tests/parallel/style_test_util.h"

namespace dtensor {
namespace parallel {
namespace {

// testdata/llama_config.json's sizes.
constexpr int64_t kDim = 32, kHeads = 4, kHidden = 64, kVocab = 64, kLayers = 2;
constexpr int64_t kBatch = 2, kSeq = 8;

absl::StatusOr<std::unique_ptr<nn::Linear>> Proj(int64_t in, int64_t out) {
  nn::LinearOptions options;
  options.bias = false;
  options.weight_init = nn::Initializer::Normal(0, 0.2);
  return nn::Linear::Create(in, out, options);
}

// LlamaAttention's names, multi-head causal attention without rotary
// embeddings (enough for the layouts: heads sharded by the colwise q/k/v).
class HfAttention : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<HfAttention>> Create() {
    std::unique_ptr<HfAttention> m(new HfAttention());
    for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
      DT_ASSIGN_OR_RETURN(auto proj, Proj(kDim, kDim));
      DT_RETURN_IF_ERROR(m->AddModule(name, std::move(proj)).status());
    }
    DT_ASSIGN_OR_RETURN(auto o, Proj(kDim, kDim));
    DT_RETURN_IF_ERROR(m->AddModule("o_proj", std::move(o)).status());
    return m;
  }
  absl::string_view type_name() const override { return "HfAttention"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    const int64_t batch = x.shape()[0], seq = x.shape()[1];
    std::vector<DTensor> qkv;
    for (int i = 0; i < 3; ++i) {
      DT_ASSIGN_OR_RETURN(DTensor p, (*children()[i].module)(x));
      DT_ASSIGN_OR_RETURN(p, ops::View(p, {batch, seq, kHeads, kDim / kHeads}));
      DT_ASSIGN_OR_RETURN(p, ops::Permute(p, {0, 2, 1, 3}));
      qkv.push_back(p);
    }
    DT_ASSIGN_OR_RETURN(DTensor out, ops::ScaledDotProductAttention(
                                         qkv[0], qkv[1], qkv[2], true));
    DT_ASSIGN_OR_RETURN(out, ops::Permute(out, {0, 2, 1, 3}));
    DT_ASSIGN_OR_RETURN(out, ops::Reshape(out, {batch, seq, kDim}));
    return (*children()[3].module)(out);
  }
};

// LlamaMLP: down_proj(silu(gate_proj(x)) * up_proj(x)).
class HfMlp : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<HfMlp>> Create() {
    std::unique_ptr<HfMlp> m(new HfMlp());
    DT_ASSIGN_OR_RETURN(auto gate, Proj(kDim, kHidden));
    DT_ASSIGN_OR_RETURN(m->gate_, m->AddModule("gate_proj", std::move(gate)));
    DT_ASSIGN_OR_RETURN(auto up, Proj(kDim, kHidden));
    DT_ASSIGN_OR_RETURN(m->up_, m->AddModule("up_proj", std::move(up)));
    DT_ASSIGN_OR_RETURN(auto down, Proj(kHidden, kDim));
    DT_ASSIGN_OR_RETURN(m->down_, m->AddModule("down_proj", std::move(down)));
    return m;
  }
  absl::string_view type_name() const override { return "HfMlp"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    DT_ASSIGN_OR_RETURN(DTensor gate, (*gate_)(x));
    DT_ASSIGN_OR_RETURN(gate, ops::Silu(gate));
    DT_ASSIGN_OR_RETURN(DTensor up, (*up_)(x));
    DT_ASSIGN_OR_RETURN(DTensor h, ops::Mul(gate, up));
    return (*down_)(h);
  }

 private:
  nn::Linear* gate_ = nullptr;
  nn::Linear* up_ = nullptr;
  nn::Linear* down_ = nullptr;
};

// LlamaDecoderLayer: pre-norm attention and MLP with residuals.
class HfDecoderLayer : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<HfDecoderLayer>> Create() {
    std::unique_ptr<HfDecoderLayer> m(new HfDecoderLayer());
    DT_ASSIGN_OR_RETURN(auto attn, HfAttention::Create());
    DT_ASSIGN_OR_RETURN(m->attn_, m->AddModule("self_attn", std::move(attn)));
    DT_ASSIGN_OR_RETURN(auto mlp, HfMlp::Create());
    DT_ASSIGN_OR_RETURN(m->mlp_, m->AddModule("mlp", std::move(mlp)));
    DT_ASSIGN_OR_RETURN(auto n1, nn::RMSNorm::Create(kDim, 1e-5));
    DT_ASSIGN_OR_RETURN(m->in_norm_,
                        m->AddModule("input_layernorm", std::move(n1)));
    DT_ASSIGN_OR_RETURN(auto n2, nn::RMSNorm::Create(kDim, 1e-5));
    DT_ASSIGN_OR_RETURN(
        m->post_norm_, m->AddModule("post_attention_layernorm", std::move(n2)));
    return m;
  }
  absl::string_view type_name() const override { return "HfDecoderLayer"; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    DT_ASSIGN_OR_RETURN(DTensor a, (*in_norm_)(x));
    DT_ASSIGN_OR_RETURN(a, (*attn_)(a));
    DT_ASSIGN_OR_RETURN(DTensor h, ops::Add(x, a));
    DT_ASSIGN_OR_RETURN(DTensor f, (*post_norm_)(h));
    DT_ASSIGN_OR_RETURN(f, (*mlp_)(f));
    return ops::Add(h, f);
  }

 private:
  nn::Module* attn_ = nullptr;
  nn::Module* mlp_ = nullptr;
  nn::Module* in_norm_ = nullptr;
  nn::Module* post_norm_ = nullptr;
};

// LlamaModel (the base model the plan's keys are relative to).
absl::StatusOr<std::unique_ptr<nn::Module>> BuildHfLlama() {
  class Model : public nn::Module {
   public:
    absl::string_view type_name() const override { return "HfLlamaModel"; }
    absl::Status Build() {
      DT_ASSIGN_OR_RETURN(
          auto embed,
          nn::Embedding::Create(kVocab, kDim, nn::Initializer::Normal(0, 1.0)));
      DT_RETURN_IF_ERROR(AddModule("embed_tokens", std::move(embed)).status());
      auto layers = std::make_unique<nn::ModuleList>();
      for (int64_t i = 0; i < kLayers; ++i) {
        DT_ASSIGN_OR_RETURN(auto layer, HfDecoderLayer::Create());
        DT_RETURN_IF_ERROR(layers->Append(std::move(layer)).status());
      }
      DT_RETURN_IF_ERROR(AddModule("layers", std::move(layers)).status());
      DT_ASSIGN_OR_RETURN(auto norm, nn::RMSNorm::Create(kDim, 1e-5));
      return AddModule("norm", std::move(norm)).status();
    }

   protected:
    absl::StatusOr<DTensor> Forward(const DTensor& tokens) override {
      DTensor h = tokens;
      for (const Child& child : children()) {
        DT_ASSIGN_OR_RETURN(h, (*child.module)(h));
      }
      return h;
    }
  };
  auto model = std::make_unique<Model>();
  DT_RETURN_IF_ERROR(model->Build());
  return model;
}

struct Result {
  std::vector<float> hidden;
  std::map<std::string, std::vector<float>> grads;
  // Rank 0's collectives, as labels.
  std::vector<std::string> forward;
  int64_t forward_all_reduces = 0;
};

absl::Status RankStep(ProcessGroups& groups, const DeviceMesh& mesh,
                      const std::optional<Plan>& plan, Result& mine) {
  auto runtime = Runtime::ForRank(groups);
  DT_ASSIGN_OR_RETURN(auto model, BuildHfLlama());
  DT_RETURN_IF_ERROR(
      parallel_testing::InitializeAndParallelize(*model, runtime, mesh, plan));
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kBatch * kSeq; ++i)
    ids.push_back((i * 7 + 3) % kVocab);
  DT_ASSIGN_OR_RETURN(Tensor ids_full, Tensor::FromVector(ids, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(DTensor tokens, parallel_testing::DistributeReplicated(
                                          runtime, ids_full, mesh));
  // loss = sum(h * probe): sum(h * h) would be nearly constant after the
  // final RMSNorm, its gradients float noise.
  std::vector<float> probe_values;
  for (int64_t i = 0; i < kBatch * kSeq * kDim; ++i) {
    probe_values.push_back(std::sin(0.37 * i + 0.1));
  }
  DT_ASSIGN_OR_RETURN(Tensor probe_full,
                      Tensor::FromVector(probe_values, {kBatch, kSeq, kDim}));
  DT_ASSIGN_OR_RETURN(DTensor probe, parallel_testing::DistributeReplicated(
                                         runtime, probe_full, mesh));
  DT_ASSIGN_OR_RETURN(
      parallel_testing::ModelStep step,
      parallel_testing::ForwardBackward(
          *model, tokens, [&](const DTensor& h) -> absl::StatusOr<DTensor> {
            DT_ASSIGN_OR_RETURN(DTensor weighted, ops::Mul(h, probe));
            return ops::Sum(weighted);
          }));
  for (const CommCounter::Event& e : step.forward.events()) {
    if (e.kind != CommKind::kLocal) mine.forward.push_back(e.label);
  }
  mine.forward_all_reduces = step.forward.count(CommKind::kAllReduce);
  DT_ASSIGN_OR_RETURN(Tensor h_full, step.output.FullTensor());
  mine.hidden = h_full.ToVector<float>().value();
  mine.grads = std::move(step.grads);
  return absl::OkStatus();
}

absl::StatusOr<Result> Step(int64_t tp, const std::optional<Plan>& plan) {
  const DeviceMesh mesh = parallel_testing::Mesh({tp}, {"tp"});
  return parallel_testing::RankZeroResult<Result>(
      mesh, [&](ProcessGroups& groups, Result& mine) {
        return RankStep(groups, mesh, plan, mine);
      });
}

std::string ConfigPath() {
  return absl::StrCat(getenv("TEST_SRCDIR"),
                      "/dtensor/tests/parallel/testdata/llama_config.json");
}

TEST(HfConfigPlanTest, ConfigJsonIsTheTpPlan) {
  auto plan = LoadPlanFile(ConfigPath());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->tp.size(), 7u);
  EXPECT_EQ(plan->tp[0].pattern, "layers.*.self_attn.q_proj");
  EXPECT_EQ(plan->tp[0].style->name(), "colwise");
  EXPECT_EQ(plan->tp[3].pattern, "layers.*.self_attn.o_proj");
  EXPECT_EQ(plan->tp[3].style->name(), "rowwise");
  EXPECT_EQ(plan->dp, DataParallel::kNone);
}

TEST(HfConfigPlanTest, ConfigJsonErrors) {
  // Both HF plans, and our keys beside an HF plan.
  auto both = ParsePlan(R"({"base_model_tp_plan": {}, "tp_plan": {}})");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("\"tp_plan\""), std::string::npos);
  for (const char* text :
       {R"({"tp": {}, "base_model_tp_plan": {}})",
        R"({"first_bucket_mb": 2, "base_model_tp_plan": {}})"}) {
    auto mixed = ParsePlan(text);
    ASSERT_FALSE(mixed.ok()) << text;
    EXPECT_NE(mixed.status().message().find("\"base_model_tp_plan\""),
              std::string::npos)
        << text;
  }
  auto bad = ParsePlan(R"({"tp_plan": {"layers.*.mlp": "sideways"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"sideways\""), std::string::npos);
  auto other = ParsePlan(R"({"model_type": "llama", "tp_plan": []})");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("\"tp_plan\""), std::string::npos);
}

TEST(HfConfigPlanTest, MatchesOneRankWithTextbookCollectives) {
  auto one = Step(1, std::nullopt);
  ASSERT_TRUE(one.ok()) << one.status();
  auto plan = LoadPlanFile(ConfigPath());
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(absl::StrCat("tp=", tp));
    auto many = Step(tp, *plan);
    ASSERT_TRUE(many.ok()) << many.status();
    parallel_testing::ExpectClose(many->hidden, one->hidden, "hidden", 1e-4);
    ASSERT_EQ(many->grads.size(), one->grads.size());
    for (const auto& [name, grad] : one->grads) {
      parallel_testing::ExpectClose(many->grads.at(name), grad, name, 1e-4);
    }
    // Forward: o_proj's and down_proj's partial sums, all-reduced, per
    // layer; no other collective.
    EXPECT_EQ(many->forward_all_reduces, 2 * kLayers);
    EXPECT_EQ(many->forward.size(), static_cast<size_t>(2 * kLayers))
        << testing::PrintToString(many->forward);
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
