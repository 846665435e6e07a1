#include "dtensor/parallel/parallelize.h"

#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/nn/attention.h"
#include "dtensor/nn/llama.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

nn::LlamaConfig Tiny() {
  nn::LlamaConfig config;
  config.dim = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 64;
  config.multiple_of = 32;
  config.max_seq_len = 16;
  config.init_std = 0.1;
  return config;
}

constexpr char kTpPlan[] = R"plan({"tp": {
  "layers.*.attention.wq": "colwise", "layers.*.attention.wk": "colwise",
  "layers.*.attention.wv": "colwise", "layers.*.attention.wo": "rowwise",
  "layers.*.feed_forward.w1": "colwise", "layers.*.feed_forward.w3": "colwise",
  "layers.*.feed_forward.w2": "rowwise"}})plan";

// Logits of the tiny Llama on `ranks` in-process ranks (mesh "tp"), with the
// TP plan when ranks > 1; rank 0's gathered result.
absl::StatusOr<std::vector<float>> Logits(int64_t ranks) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({ranks}, {"tp"}));
  DT_ASSIGN_OR_RETURN(Plan plan, ParsePlan(kTpPlan));
  std::vector<float> result;
  std::mutex mu;
  LocalCluster cluster(ranks);
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(auto model, nn::BuildLlama(Tiny(), runtime, mesh));
    if (ranks > 1) DT_RETURN_IF_ERROR(ParallelizeModule(*model, mesh, plan));
    std::vector<int64_t> ids(2 * 8);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7 + 3) % 64;
    DT_ASSIGN_OR_RETURN(Tensor tokens, Tensor::FromVector(ids, {2, 8}));
    DT_ASSIGN_OR_RETURN(
        DTensor x,
        DTensor::Distribute(runtime, tokens, mesh, {Placement::Replicate()}));
    DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(x));
    DT_ASSIGN_OR_RETURN(Tensor full, logits.FullTensor());
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = full.ToVector<float>().value();
    }
    return absl::OkStatus();
  }));
  return result;
}

TEST(ParallelizeTest, TpForwardMatchesOneRank) {
  auto one = Logits(1);
  ASSERT_TRUE(one.ok()) << one.status();
  for (int64_t ranks : {2, 4}) {
    auto many = Logits(ranks);
    ASSERT_TRUE(many.ok()) << many.status();
    ASSERT_EQ(many->size(), one->size());
    for (size_t i = 0; i < one->size(); ++i) {
      ASSERT_NEAR((*many)[i], (*one)[i], 1e-4 + 1e-4 * std::fabs((*one)[i]))
          << i;
    }
  }
}

// A plan error of any feature (here activation checkpointing's and context
// parallelism's, which are resolved after the styles) comes before the
// module tree changes: no hooks, no moved parameter, no checkpointed or
// ring attention module.
TEST(ParallelizeTest, PlanErrorsLeaveTheTreeAlone) {
  constexpr char kValid[] = R"json("tp": {"layers.*.attention.wq": "colwise",
      "layers.*.feed_forward.w2": "rowwise"}, "dp": "fsdp")json";
  const std::pair<std::string, std::string> cases[] = {
      {absl::StrCat(
           "{", kValid,
           R"json(, "activation_checkpoint": ["layers.*", "blocks.*"]})json"),
       "activation_checkpoint pattern \"blocks.*\" names no module"},
      {absl::StrCat("{", kValid,
                    R"json(, "activation_checkpoint": ["layers.*"],
                    "context_parallel": {"mesh_dim": "cp"}})json"),
       "context_parallel.mesh_dim \"cp\" is not a dim of the mesh"},
  };
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2}, {"dp", "tp"});
  for (const auto& [json, message] : cases) {
    absl::StatusOr<Plan> plan = ParsePlan(json);
    ASSERT_TRUE(plan.ok()) << json << plan.status();
    auto model = nn::BuildLlama(Tiny(), Runtime::MetadataOnly(0), mesh);
    ASSERT_TRUE(model.ok()) << model.status();
    const absl::Status status = ParallelizeModule(**model, mesh, *plan);
    EXPECT_NE(status.message().find(message), std::string::npos) << status;
    for (const nn::NamedModule& m : (*model)->NamedModules()) {
      EXPECT_EQ(m.module->num_input_hooks(), 0) << m.name;
      EXPECT_EQ(m.module->num_output_hooks(), 0) << m.name;
      EXPECT_FALSE(m.module->has_around_forward()) << m.name;
      if (auto* attention = dynamic_cast<nn::Attention*>(m.module)) {
        EXPECT_FALSE(attention->context_parallel().has_value()) << m.name;
      }
    }
    for (const nn::NamedSlot& slot : (*model)->NamedParameters()) {
      EXPECT_EQ(slot.slot->value.sharding().ToString(), "R,R") << slot.name;
    }
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
