// The module tree: the exact fully-qualified names and types of a 2-layer
// tiny Llama, parameter counts (against published model sizes), the
// hidden-dim rule, lookups by name, hooks, training mode, registration and
// config errors, and the printed tree.
#include "dtensor/nn/module.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/attention.h"
#include "dtensor/nn/dropout.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/nn/norms.h"
#include "dtensor/nn/transformer_block.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/tensor/elementwise.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn::LlamaConfig;
using nn::Module;
using nn::Transformer;

std::unique_ptr<Transformer> TinyModel() {
  return *Transformer::Create(nn_testing::TinyConfig());
}

TEST(ModuleTest, TinyLlamaParameterNamesAndShapes) {
  std::unique_ptr<Transformer> model = TinyModel();
  std::vector<std::pair<std::string, Shape>> expected = {
      {"tok_embeddings.weight", {64, 32}}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = absl::StrCat("layers.", layer, ".");
    const std::vector<std::pair<std::string, Shape>> block = {
        {p + "attention.wq.weight", {32, 32}},
        {p + "attention.wk.weight", {16, 32}},
        {p + "attention.wv.weight", {16, 32}},
        {p + "attention.wo.weight", {32, 32}},
        {p + "feed_forward.w1.weight", {96, 32}},
        {p + "feed_forward.w2.weight", {32, 96}},
        {p + "feed_forward.w3.weight", {96, 32}},
        {p + "attention_norm.weight", {32}},
        {p + "ffn_norm.weight", {32}},
    };
    expected.insert(expected.end(), block.begin(), block.end());
  }
  expected.push_back({"norm.weight", {32}});
  expected.push_back({"output.weight", {64, 32}});
  std::vector<std::pair<std::string, Shape>> got;
  for (const nn::NamedSlot& named : model->NamedParameters()) {
    got.push_back({named.name, named.slot->shape});
    EXPECT_TRUE(named.slot->is_parameter);
    EXPECT_FALSE(named.slot->value.defined());
  }
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(model->NamedBuffers().empty());
  EXPECT_EQ(model->NamedSlots().size(), expected.size());
}

TEST(ModuleTest, TinyLlamaModuleNamesAndTypes) {
  std::unique_ptr<Transformer> model = TinyModel();
  std::vector<std::pair<std::string, std::string>> expected = {
      {"", "Transformer"},
      {"tok_embeddings", "Embedding"},
      {"layers", "ModuleList"}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = absl::StrCat("layers.", layer);
    const std::vector<std::pair<std::string, std::string>> block = {
        {p, "TransformerBlock"},
        {p + ".attention", "Attention"},
        {p + ".attention.wq", "Linear"},
        {p + ".attention.wk", "Linear"},
        {p + ".attention.wv", "Linear"},
        {p + ".attention.wo", "Linear"},
        {p + ".feed_forward", "FeedForward"},
        {p + ".feed_forward.w1", "Linear"},
        {p + ".feed_forward.w2", "Linear"},
        {p + ".feed_forward.w3", "Linear"},
        {p + ".attention_norm", "RMSNorm"},
        {p + ".ffn_norm", "RMSNorm"},
    };
    expected.insert(expected.end(), block.begin(), block.end());
  }
  expected.push_back({"norm", "RMSNorm"});
  expected.push_back({"output", "Linear"});
  std::vector<std::pair<std::string, std::string>> got;
  for (const nn::NamedModule& named : model->NamedModules()) {
    got.push_back({named.name, std::string(named.module->type_name())});
  }
  EXPECT_EQ(got, expected);
}

// Parameter count by the formula, and the published sizes of Llama 3 8B and
// 70B.
TEST(ModuleTest, ParameterCounts) {
  const LlamaConfig tiny = nn_testing::TinyConfig();
  const int64_t per_layer = 32 * 32 * 2 + 2 * (16 * 32) + 3 * 32 * 96 + 2 * 32;
  EXPECT_EQ(TinyModel()->NumParameters(), 2 * 64 * 32 + 2 * per_layer + 32);
  EXPECT_EQ((*Transformer::Create(LlamaConfig::Llama3_8B()))->NumParameters(),
            8030261248);
  EXPECT_EQ((*Transformer::Create(LlamaConfig::Llama3_70B()))->NumParameters(),
            70553706496);
  EXPECT_EQ(tiny.hidden_dim(), 96);
}

TEST(ModuleTest, HiddenDimFollowsTheLlamaRule) {
  LlamaConfig llama2_7b;
  llama2_7b.dim = 4096;
  llama2_7b.multiple_of = 256;
  EXPECT_EQ(llama2_7b.hidden_dim(), 11008);
  LlamaConfig llama2_70b;
  llama2_70b.dim = 8192;
  llama2_70b.multiple_of = 4096;
  llama2_70b.ffn_dim_multiplier = 1.3;
  EXPECT_EQ(llama2_70b.hidden_dim(), 28672);
  EXPECT_EQ(LlamaConfig::Llama3_8B().hidden_dim(), 14336);
  EXPECT_EQ(LlamaConfig::Llama3_70B().hidden_dim(), 28672);
}

TEST(ModuleTest, InvalidConfigsNameTheField) {
  const auto error_of = [](LlamaConfig config) {
    return std::string(Transformer::Create(config).status().message());
  };
  LlamaConfig config = nn_testing::TinyConfig();
  config.dim = 30;
  EXPECT_NE(error_of(config).find("dim 30"), std::string::npos);
  config = nn_testing::TinyConfig();
  config.n_kv_heads = 3;
  EXPECT_NE(error_of(config).find("n_kv_heads 3"), std::string::npos);
  config = nn_testing::TinyConfig();
  config.n_heads = 16;  // Head dim 2 is even; 32 heads would give 1.
  EXPECT_TRUE(Transformer::Create(config).ok());
  config.n_heads = 32;
  config.n_kv_heads = 32;
  EXPECT_NE(error_of(config).find("head dim 1"), std::string::npos);
  config = nn_testing::TinyConfig();
  config.vocab_size = 0;
  EXPECT_NE(error_of(config).find("vocab_size 0"), std::string::npos);
  config = nn_testing::TinyConfig();
  config.norm_eps = -1;
  EXPECT_NE(error_of(config).find("norm_eps -1"), std::string::npos);
  config = nn_testing::TinyConfig();
  config.ffn_dim_multiplier = 0;
  EXPECT_NE(error_of(config).find("ffn_dim_multiplier 0"), std::string::npos);
}

TEST(ModuleTest, LookupsByName) {
  std::unique_ptr<Transformer> model = TinyModel();
  absl::StatusOr<Module*> wq = model->Submodule("layers.1.attention.wq");
  ASSERT_TRUE(wq.ok()) << wq.status();
  EXPECT_EQ((*wq)->type_name(), "Linear");
  EXPECT_EQ(*wq, &static_cast<nn::TransformerBlock&>(model->layers().at(1))
                      .attention()
                      .wq());
  EXPECT_EQ(*model->Submodule(""), model.get());
  absl::StatusOr<Module*> missing = model->Submodule("layers.2.attention");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("\"layers.2\""), std::string::npos)
      << missing.status();
  absl::StatusOr<nn::TensorSlot*> slot =
      model->FindSlot("layers.0.ffn_norm.weight");
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ((*slot)->shape, Shape{32});
  EXPECT_EQ(model->FindSlot("layers.0.ffn_norm.bias").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(model->FindSlot("layers.0.ffn_norm").ok());
  EXPECT_FALSE(model->FindSlot("").ok());
}

TEST(ModuleTest, SetSlotChecksTheGlobalShape) {
  std::unique_ptr<Transformer> model = TinyModel();
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const auto meta = [&](Shape shape, Placement p) {
    return *DTensor::FromSpec(
        runtime, *DTensorSpec::Create(mesh, {p}, shape, DType::kF32));
  };
  // Another layout of the same global shape replaces the value.
  ASSERT_TRUE(model
                  ->SetSlot("layers.0.attention.wq.weight",
                            meta({32, 32}, Placement::Shard(0)))
                  .ok());
  EXPECT_EQ((*model->FindSlot("layers.0.attention.wq.weight"))
                ->value.sharding()
                .ToString(),
            "S(0)");
  const absl::Status wrong =
      model->SetSlot("norm.weight", meta({16}, Placement::Replicate()));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("[32]"), std::string::npos) << wrong;
  EXPECT_NE(wrong.message().find("[16]"), std::string::npos) << wrong;
  EXPECT_FALSE(model->SetSlot("norm.weight", DTensor()).ok());
  EXPECT_FALSE(model->SetSlot("nothing.weight", DTensor()).ok());
}

// A module with a parameter and a buffer; registers a slot named `extra`
// when given, to provoke registration errors.
class Scale : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<Scale>> Create(
      int64_t dim, const std::string& extra = "", Shape extra_shape = {}) {
    std::unique_ptr<Scale> scale(new Scale());
    DT_ASSIGN_OR_RETURN(
        scale->scale_,
        scale->AddParameter("scale", {dim}, nn::Initializer::Ones()));
    DT_RETURN_IF_ERROR(
        scale->AddBuffer("steps", {}, nn::Initializer::Zeros()).status());
    if (!extra.empty() || !extra_shape.empty()) {
      DT_RETURN_IF_ERROR(
          scale->AddParameter(extra, extra_shape, nn::Initializer::Zeros())
              .status());
    }
    return scale;
  }
  absl::string_view type_name() const override { return "Scale"; }
  absl::Status AddChildForTest(std::string name,
                               std::unique_ptr<Module> child) {
    return AddModule(std::move(name), std::move(child)).status();
  }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    return ops::Mul(x, value(scale_));
  }

 private:
  Scale() = default;
  int scale_ = -1;
};

TEST(ModuleTest, BuffersAreSlotsButNotParameters) {
  std::unique_ptr<Scale> scale = *Scale::Create(5);
  ASSERT_EQ(scale->NamedBuffers().size(), 1u);
  EXPECT_EQ(scale->NamedBuffers()[0].name, "steps");
  EXPECT_FALSE(scale->NamedBuffers()[0].slot->is_parameter);
  ASSERT_EQ(scale->NamedParameters().size(), 1u);
  EXPECT_EQ(scale->NamedSlots().size(), 2u);
  EXPECT_EQ(scale->NumParameters(), 5);
  // In a tree, buffers get fully-qualified names too.
  nn::ModuleList list;
  ASSERT_TRUE(list.Append(std::move(scale)).ok());
  EXPECT_EQ(list.NamedBuffers()[0].name, "0.steps");
}

TEST(ModuleTest, RegistrationErrorsNameTheName) {
  const auto error_of = [](const std::string& name, Shape shape = {}) {
    return std::string(Scale::Create(3, name, shape).status().message());
  };
  EXPECT_NE(error_of("scale").find("\"scale\" is already taken"),
            std::string::npos);
  EXPECT_NE(error_of("steps").find("\"steps\" is already taken"),
            std::string::npos);
  EXPECT_NE(error_of("a.b").find("\"a.b\""), std::string::npos);
  EXPECT_NE(error_of("", {2}).find("\"\""), std::string::npos);
  EXPECT_NE(error_of("w", {2, -1}).find("[2, -1]"), std::string::npos);
  std::unique_ptr<Scale> scale = *Scale::Create(3);
  EXPECT_FALSE(scale->AddChildForTest("scale", *Scale::Create(3)).ok());
  EXPECT_FALSE(scale->AddChildForTest("child", nullptr).ok());
  EXPECT_TRUE(scale->AddChildForTest("child", *Scale::Create(3)).ok());
  EXPECT_FALSE(scale->AddChildForTest("child", *Scale::Create(3)).ok());
}

TEST(ModuleTest, LayerArgumentErrors) {
  EXPECT_NE(nn::Linear::Create(0, 3).status().message().find("in_features 0"),
            std::string::npos);
  EXPECT_FALSE(nn::Attention::Create(30, 4, 2, 1e4).ok());
  EXPECT_FALSE(nn::Attention::Create(32, 4, 3, 1e4).ok());
  EXPECT_FALSE(nn::Attention::Create(32, 4, 2, 0).ok());
  EXPECT_NE(nn::Dropout::Create(1.5, 0).status().message().find("1.5"),
            std::string::npos);
  EXPECT_NE(nn::RMSNorm::Create(8, 0).status().message().find("eps 0"),
            std::string::npos);
  EXPECT_FALSE(nn::LayerNorm::Create(-1).ok());
  nn::LinearOptions bad_init;
  bad_init.weight_init = nn::Initializer::Normal(0, -0.1);
  EXPECT_NE(nn::Linear::Create(2, 3, bad_init)
                .status()
                .message()
                .find("normal(0, -0.1)"),
            std::string::npos);
}

TEST(ModuleTest, HooksRunInOrderAroundForward) {
  const absl::Status status = nn_testing::RunOnMesh(
      {1},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        std::mt19937 rng(2);
        std::unique_ptr<Scale> scale = *Scale::Create(4);
        DT_RETURN_IF_ERROR(nn::Initialize(*scale, runtime, mesh));
        DT_RETURN_IF_ERROR(scale->SetSlot(
            "scale",
            *nn_testing::Replicated(runtime, mesh,
                                    nn_testing::RandomF32({4}, -1, 1, rng))));
        const Tensor x = nn_testing::RandomF32({3, 4}, -1, 1, rng);
        DT_ASSIGN_OR_RETURN(DTensor input,
                            nn_testing::Replicated(runtime, mesh, x));
        std::vector<std::string> calls;
        scale->AddInputHook([&](const DTensor& t) {
          calls.push_back("in1");
          return ops::Add(t, 1.0);
        });
        scale->AddInputHook([&](const DTensor& t) {
          calls.push_back("in2");
          return ops::Mul(t, 3.0);
        });
        scale->AddOutputHook([&](const DTensor& t) {
          calls.push_back("out");
          return ops::Sub(t, 0.5);
        });
        DT_ASSIGN_OR_RETURN(DTensor y, (*scale)(input));
        EXPECT_EQ(calls, (std::vector<std::string>{"in1", "in2", "out"}));
        // ((x + 1) * 3) * scale - 0.5, by the tensor layer.
        const Tensor s = scale->slots()[0].value.ToLocal();
        const Tensor expected = *Sub(*Mul(*Mul(*Add(x, 1.0), 3.0), s), 0.5);
        EXPECT_TRUE(AllClose(y.ToLocal(), expected, 1e-6, 1e-6));
        EXPECT_EQ(scale->num_input_hooks(), 2);
        scale->ClearHooks();
        EXPECT_EQ(scale->num_output_hooks(), 0);
        DT_ASSIGN_OR_RETURN(y, (*scale)(input));
        EXPECT_TRUE(AllClose(y.ToLocal(), *Mul(x, s), 1e-6, 1e-6));
        // A failing hook fails the call with its error.
        scale->AddOutputHook([](const DTensor&) -> absl::StatusOr<DTensor> {
          return absl::InternalError("hook says no");
        });
        EXPECT_EQ((*scale)(input).status().message(), "hook says no");
        // Exit hooks run after the output hooks however the call ended:
        // after the failing hook, and after a successful call.
        int exits = 0;
        scale->AddExitHook([&] {
          calls.push_back("exit");
          ++exits;
        });
        calls.clear();
        EXPECT_FALSE((*scale)(input).ok());
        EXPECT_EQ(exits, 1);
        scale->ClearHooks();
        scale->AddExitHook([&] { ++exits; });
        scale->AddOutputHook([&](const DTensor& t) {
          calls.push_back("out");
          return t;
        });
        calls.clear();
        EXPECT_TRUE((*scale)(input).ok());
        EXPECT_EQ(exits, 2);
        EXPECT_EQ(calls, (std::vector<std::string>{"out"}));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ModuleTest, HooksApplyInsideATree) {
  const absl::Status status = nn_testing::RunOnMesh(
      {1},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto model, nn::BuildLlama(nn_testing::TinyConfig(),
                                                       runtime, mesh));
        std::mt19937 rng(1);
        DT_ASSIGN_OR_RETURN(
            DTensor tokens,
            nn_testing::Replicated(runtime, mesh,
                                   nn_testing::RandomTokens({2, 4}, 64, rng)));
        DT_ASSIGN_OR_RETURN(DTensor plain, (*model)(tokens));
        int calls = 0;
        DT_ASSIGN_OR_RETURN(Module * ffn,
                            model->Submodule("layers.1.feed_forward"));
        ffn->AddOutputHook([&calls](const DTensor& t) {
          ++calls;
          return ops::Mul(t, 0.0);
        });
        DT_ASSIGN_OR_RETURN(DTensor hooked, (*model)(tokens));
        EXPECT_EQ(calls, 1);
        EXPECT_FALSE(AllClose(hooked.ToLocal(), plain.ToLocal(), 1e-3, 1e-3));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ModuleTest, TrainingModeCoversTheSubtree) {
  std::unique_ptr<Transformer> model = TinyModel();
  for (const nn::NamedModule& named : model->NamedModules()) {
    EXPECT_TRUE(named.module->training()) << named.name;
  }
  model->layers().at(0).SetTraining(false);
  EXPECT_TRUE(model->training());
  EXPECT_FALSE((*model->Submodule("layers.0.attention.wq"))->training());
  EXPECT_TRUE((*model->Submodule("layers.1.attention.wq"))->training());
  model->SetTraining(false);
  for (const nn::NamedModule& named : model->NamedModules()) {
    EXPECT_FALSE(named.module->training()) << named.name;
  }
  // A child added to a module in evaluation mode joins it.
  nn::ModuleList list;
  list.SetTraining(false);
  nn::Dropout* dropout = *list.Append(*nn::Dropout::Create(0.5, 1));
  EXPECT_FALSE(dropout->training());
}

TEST(ModuleTest, ToStringPrintsTheTree) {
  std::unique_ptr<nn::Attention> attention =
      *nn::Attention::Create(8, 2, 1, 10000);
  EXPECT_EQ(attention->ToString(),
            "Attention(\n"
            "  n_heads=2, n_kv_heads=1, head_dim=4, rope_theta=10000\n"
            "  (wq): Linear(in_features=8, out_features=8, bias=false)\n"
            "  (wk): Linear(in_features=8, out_features=4, bias=false)\n"
            "  (wv): Linear(in_features=8, out_features=4, bias=false)\n"
            "  (wo): Linear(in_features=8, out_features=8, bias=false)\n"
            ")\n");
  const std::string tree = TinyModel()->ToString();
  EXPECT_NE(tree.find("  (layers): ModuleList(\n    (0): TransformerBlock(\n"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("(tok_embeddings): Embedding(64, 32)"),
            std::string::npos);
}

}  // namespace
}  // namespace dtensor
