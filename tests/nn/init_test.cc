// Deterministic initialization: a tensor's values depend only on the seed and
// its fully-qualified name — the same on one rank and on sharded meshes
// (uneven and nested shards included), equal to the documented Philox draws
// (Tensor::Normal on the stream TensorKey(seed, name)) — and errors name the
// slot.
#include "dtensor/nn/init.h"

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/embedding.h"
#include "dtensor/nn/initializer.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/tensor/generator.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn::Initializer;
using nn::InitOptions;
using nn::NamedSlot;
using nn::TensorKey;
using nn::Transformer;
using nn_testing::RunOnMesh;

constexpr uint64_t kSeed = 42;

InitOptions Seeded(uint64_t seed) {
  InitOptions options;
  options.seed = seed;
  return options;
}

// What the documentation promises for a whole tensor.
Tensor Expected(const nn::TensorSlot& slot, const std::string& name,
                uint64_t seed, DType dtype = DType::kF32) {
  if (slot.init.kind == Initializer::Kind::kConstant) {
    return *Tensor::Full(slot.shape, slot.init.a, dtype);
  }
  Generator generator(TensorKey(seed, name));
  if (slot.init.kind == Initializer::Kind::kNormal) {
    return *Tensor::Normal(slot.shape, slot.init.a, slot.init.b, generator,
                           dtype);
  }
  std::vector<double> values(NumElements(slot.shape));
  for (double& v : values) {
    v = slot.init.a +
        (slot.init.b - slot.init.a) * generator.NextUniformDouble();
  }
  return *Tensor::FromVector(values, slot.shape)->To(dtype);
}

// Parses one layout per tensor rank: `by_rank[r]` for tensors of rank r.
nn::SlotShardingFn ShardingByRank(std::vector<std::string> by_rank) {
  return [by_rank](absl::string_view, const Shape& shape) {
    return Sharding::Parse(by_rank[shape.size()],
                           static_cast<int64_t>(shape.size()));
  };
}

TEST(InitTest, ValuesAreThePhiloxDrawsOfTheSeedAndName) {
  const absl::Status status = RunOnMesh(
      {1},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(
            auto model, nn::BuildLlama(nn_testing::TinyConfig(), runtime, mesh,
                                       Seeded(kSeed)));
        for (const NamedSlot& named : model->NamedSlots()) {
          const Tensor expected = Expected(*named.slot, named.name, kSeed);
          EXPECT_TRUE(AllClose(named.slot->value.ToLocal(), expected, 0, 0))
              << named.name;
        }
        DT_ASSIGN_OR_RETURN(nn::TensorSlot * norm,
                            model->FindSlot("layers.1.ffn_norm.weight"));
        EXPECT_EQ(norm->value.ToLocal().ToVector<double>().value(),
                  std::vector<double>(32, 1.0));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitTest, ShardedMeshesGiveTheOneRankValues) {
  // 1-D and 2-D tensors on a 2x2 mesh: both dims sharded, the other order,
  // both mesh dims nested on one tensor dim (either order), replicated.
  const std::vector<std::vector<std::string>> shardings = {
      {"R,R", "S(0),R", "S(0),S(1)"},
      {"R,R", "R,S(0)", "S(1),S(0)"},
      {"R,R", "S(0),S(0)", "S(0),S(0)"},
      {"R,R", "S(0)[1],S(0)[0]", "S(1)[1],S(1)[0]"},
  };
  for (const auto& sharding : shardings) {
    InitOptions options = Seeded(kSeed);
    options.sharding = ShardingByRank(sharding);
    const absl::Status status = RunOnMesh(
        {2, 2},
        [&](std::shared_ptr<Runtime> runtime,
            const DeviceMesh& mesh) -> absl::Status {
          DT_ASSIGN_OR_RETURN(
              auto model,
              nn::BuildLlama(nn_testing::TinyConfig(), runtime, mesh, options));
          for (const NamedSlot& named : model->NamedSlots()) {
            const DTensor& value = named.slot->value;
            EXPECT_EQ(value.sharding().ToString(),
                      sharding[named.slot->shape.size()])
                << named.name;
            EXPECT_LT(value.ToLocal().numel(), NumElements(named.slot->shape))
                << named.name << " is not sharded";
            DT_ASSIGN_OR_RETURN(Tensor full, value.FullTensor());
            EXPECT_TRUE(
                AllClose(full, Expected(*named.slot, named.name, kSeed), 0, 0))
                << named.name << " laid out " << sharding[full.dim()];
          }
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

// A module of odd shapes, so that shards are uneven and some empty.
std::unique_ptr<nn::ModuleList> OddModule() {
  auto list = std::make_unique<nn::ModuleList>();
  nn::LinearOptions options;
  options.bias = true;
  options.bias_init = Initializer::Uniform(-1, 1);
  (void)list->Append(*nn::Linear::Create(5, 7, options));
  (void)list->Append(*nn::Embedding::Create(3, 5));
  return list;
}

TEST(InitTest, UnevenAndEmptyShardsGiveTheWholeTensorsValues) {
  std::mt19937 rng(9);
  for (const std::vector<int64_t>& mesh_shape :
       {std::vector<int64_t>{3}, std::vector<int64_t>{4},
        std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 3}}) {
    for (int trial = 0; trial < 4; ++trial) {
      // A random Shard/Replicate per mesh dim for each rank of tensor.
      std::vector<std::string> by_rank(3);
      for (int64_t rank = 1; rank <= 2; ++rank) {
        std::vector<std::string> items;
        for (size_t m = 0; m < mesh_shape.size(); ++m) {
          items.push_back(
              rng() % 4 == 0 ? "R" : absl::StrCat("S(", rng() % rank, ")"));
        }
        by_rank[rank] = absl::StrJoin(items, ",");
      }
      InitOptions options = Seeded(trial);
      options.sharding = ShardingByRank(by_rank);
      const absl::Status status = RunOnMesh(
          mesh_shape,
          [&](std::shared_ptr<Runtime> runtime,
              const DeviceMesh& mesh) -> absl::Status {
            std::unique_ptr<nn::ModuleList> module = OddModule();
            DT_RETURN_IF_ERROR(nn::Initialize(*module, runtime, mesh, options));
            for (const NamedSlot& named : module->NamedSlots()) {
              DT_ASSIGN_OR_RETURN(Tensor full, named.slot->value.FullTensor());
              EXPECT_TRUE(AllClose(
                  full, Expected(*named.slot, named.name, trial), 0, 0))
                  << named.name << " on " << mesh.ToString() << " laid out "
                  << named.slot->value.sharding();
            }
            return absl::OkStatus();
          });
      EXPECT_TRUE(status.ok()) << status;
    }
  }
}

TEST(InitTest, SeedsAndNamesGiveDistinctStreams) {
  std::unique_ptr<Transformer> model =
      *Transformer::Create(nn_testing::TinyConfig());
  std::set<uint64_t> keys;
  std::vector<NamedSlot> slots = model->NamedSlots();
  for (const NamedSlot& named : slots) {
    keys.insert(TensorKey(kSeed, named.name));
    keys.insert(TensorKey(kSeed + 1, named.name));
  }
  EXPECT_EQ(keys.size(), 2 * slots.size());
  EXPECT_NE(TensorKey(0, "layers.1.w"), TensorKey(0, "layers.10.w"));
  EXPECT_EQ(TensorKey(7, "output.weight"), TensorKey(7, "output.weight"));
  // The same shape under two names has different values.
  const Tensor a = Expected(*slots[1].slot, slots[1].name, kSeed);
  const Tensor b = Expected(*slots[1].slot, "other", kSeed);
  EXPECT_FALSE(AllClose(a, b, 0.5, 0));
}

TEST(InitTest, NormalAndUniformHaveTheirMoments) {
  const absl::Status status = RunOnMesh(
      {1},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        nn::LinearOptions options;
        options.bias = true;
        options.weight_init = Initializer::Normal(0.5, 0.02);
        options.bias_init = Initializer::Uniform(-2, 1);
        DT_ASSIGN_OR_RETURN(auto linear, nn::Linear::Create(100, 100, options));
        DT_RETURN_IF_ERROR(nn::Initialize(*linear, runtime, mesh));
        const std::vector<double> w =
            linear->weight().ToLocal().ToVector<double>().value();
        double mean = 0, square = 0;
        for (double v : w) mean += v;
        mean /= w.size();
        for (double v : w) square += (v - mean) * (v - mean);
        const double stddev = std::sqrt(square / w.size());
        EXPECT_NEAR(mean, 0.5, 4 * 0.02 / 100);
        EXPECT_NEAR(stddev, 0.02, 0.02 * 0.05);
        const std::vector<double> b =
            linear->bias().ToLocal().ToVector<double>().value();
        double b_mean = 0;
        for (double v : b) {
          EXPECT_GE(v, -2);
          EXPECT_LT(v, 1);
          b_mean += v / b.size();
        }
        // Uniform(-2, 1): mean -0.5, stddev sqrt(3)/2 / sqrt(100).
        EXPECT_NEAR(b_mean, -0.5, 4 * 0.866 / 10);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitTest, Bf16ValuesAreTheRoundedDraws) {
  InitOptions options = Seeded(kSeed);
  options.dtype = DType::kBF16;
  options.sharding = ShardingByRank({"R", "S(0)", "S(1)"});
  const absl::Status status = RunOnMesh(
      {2},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto model, nn::BuildLlama(nn_testing::TinyConfig(),
                                                       runtime, mesh, options));
        for (const NamedSlot& named : model->NamedSlots()) {
          DT_ASSIGN_OR_RETURN(Tensor full, named.slot->value.FullTensor());
          EXPECT_EQ(full.dtype(), DType::kBF16);
          EXPECT_TRUE(AllClose(
              full, Expected(*named.slot, named.name, kSeed, DType::kBF16), 0,
              0))
              << named.name;
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitTest, MetadataOnlyGivesSpecsWithoutData) {
  auto runtime = Runtime::MetadataOnly(3);
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  InitOptions options;
  options.sharding = ShardingByRank({"R,R", "S(0),R", "R,S(1)"});
  std::unique_ptr<Transformer> model =
      *Transformer::Create(nn_testing::TinyConfig());
  ASSERT_TRUE(nn::Initialize(*model, runtime, mesh, options).ok());
  for (const NamedSlot& named : model->NamedSlots()) {
    const DTensor& value = named.slot->value;
    ASSERT_TRUE(value.defined()) << named.name;
    EXPECT_FALSE(value.ToLocal().defined()) << named.name;
    EXPECT_EQ(value.shape(), named.slot->shape);
    EXPECT_EQ(value.sharding().ToString(),
              named.slot->shape.size() == 1 ? "S(0),R" : "R,S(1)");
  }
}

// Errors name the slot, and leave every slot as it was.
TEST(InitTest, ErrorsNameTheSlotAndChangeNothing) {
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  auto runtime = Runtime::MetadataOnly(0);
  const auto expect_error = [&](const InitOptions& options,
                                std::shared_ptr<Runtime> rt,
                                const std::string& needle) {
    std::unique_ptr<Transformer> model =
        *Transformer::Create(nn_testing::TinyConfig());
    const absl::Status status = nn::Initialize(*model, rt, mesh, options);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find(needle), std::string::npos) << status;
    for (const NamedSlot& named : model->NamedSlots()) {
      EXPECT_FALSE(named.slot->value.defined()) << named.name;
    }
  };
  InitOptions partial;
  partial.sharding = [](absl::string_view fqn, const Shape& shape) {
    return Sharding::Parse(fqn == "norm.weight" ? "P,R" : "R,R",
                           static_cast<int64_t>(shape.size()));
  };
  expect_error(partial, runtime, "\"norm.weight\"");
  InitOptions bad_dim;
  bad_dim.sharding = ShardingByRank({"R,R", "S(1),R", "R,R"});
  expect_error(bad_dim, runtime, "\"layers.0.attention_norm.weight\"");
  InitOptions integers;
  integers.dtype = DType::kI32;
  expect_error(integers, runtime, "i32");
  expect_error({}, Runtime::MetadataOnly(9), "9");
  EXPECT_FALSE(nn::Initialize(*OddModule(), nullptr, mesh).ok());
}

TEST(InitTest, InitializeBlockChecksTheBlock) {
  const ShardBlock outside{{2, 2}, {3, 0}};
  const absl::StatusOr<Tensor> block = nn::InitializeBlock(
      Initializer::Normal(0, 1), 1, {4, 2}, outside, DType::kF32);
  EXPECT_FALSE(block.ok());
  EXPECT_NE(block.status().message().find("[4, 2]"), std::string::npos)
      << block.status();
  EXPECT_FALSE(nn::InitializeBlock(Initializer::Normal(0, -1), 1, {4, 2},
                                   {{1, 1}, {0, 0}}, DType::kF32)
                   .ok());
  EXPECT_FALSE(nn::InitializeBlock(Initializer::Uniform(1, 0), 1, {4, 2},
                                   {{1, 1}, {0, 0}}, DType::kF32)
                   .ok());
}

}  // namespace
}  // namespace dtensor
