// Every plan shipped in parallel/plans/ parses and binds to the Llama
// tree: each pattern matches modules of the right type, none twice.
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/parallel/plan_resolution.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

class ShippedPlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedPlanTest, ParsesAndBindsToTheLlamaTree) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_NE(srcdir, nullptr);
  const std::string path =
      std::string(srcdir) + "/dtensor/parallel/plans/" + GetParam() + ".json";
  absl::StatusOr<Plan> plan = LoadPlanFile(path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  nn::LlamaConfig config;
  config.dim = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 64;
  config.multiple_of = 32;
  config.max_seq_len = 16;
  auto model = nn::Transformer::Create(config);
  ASSERT_TRUE(model.ok()) << model.status();
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2}, {"dp", "tp"});
  absl::StatusOr<PlanResolution> resolved = ResolvePlan(*plan, **model, mesh);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  // Seven projections per block, at least.
  EXPECT_GE(resolved->entries.size(), 7u * config.n_layers);
  const bool fsdp = GetParam().find("fsdp") != std::string::npos;
  EXPECT_EQ(plan->dp, fsdp ? DataParallel::kFsdp : DataParallel::kReplicate);
  // A "_cp" plan shards the sequence over the mesh dim "cp".
  const bool cp = absl::EndsWith(GetParam(), "_cp");
  ASSERT_EQ(plan->context_parallel.has_value(), cp);
  if (cp) {
    const DeviceMesh cp_mesh =
        *DeviceMesh::Create({2, 2, 2}, {"dp", "cp", "tp"});
    absl::StatusOr<int64_t> dim =
        ContextParallelDim(cp_mesh, *plan->context_parallel);
    ASSERT_TRUE(dim.ok()) << dim.status();
    EXPECT_EQ(*dim, 1);
    EXPECT_TRUE(ResolvePlan(*plan, **model, cp_mesh).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, ShippedPlanTest,
                         ::testing::Values("tp_dp", "tp_fsdp", "tp_sp_dp",
                                           "tp_sp_fsdp",
                                           "tp_sp_loss_parallel_dp",
                                           "tp_sp_loss_parallel_fsdp",
                                           "tp_sp_fsdp_cp"));

}  // namespace
}  // namespace parallel
}  // namespace dtensor
