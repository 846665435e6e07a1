// State dicts: a round trip between two models gives equal parameters and
// equal forwards; loading keeps each slot's layout and dtype (redistributing
// and converting); errors name missing and unexpected keys, wrong shapes and
// foreign meshes, all at once, and change nothing.
#include "dtensor/nn/state_dict.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/llama.h"
#include "dtensor/ops/cast_ops.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn::BuildLlama;
using nn::InitOptions;
using nn::StateDict;
using nn::Transformer;
using nn_testing::RunOnMesh;

InitOptions Seeded(uint64_t seed) {
  InitOptions options;
  options.seed = seed;
  return options;
}

bool SameValues(nn::Module& a, nn::Module& b) {
  absl::StatusOr<nn_testing::Weights> wa = nn_testing::GatherWeights(a);
  absl::StatusOr<nn_testing::Weights> wb = nn_testing::GatherWeights(b);
  if (!wa.ok() || !wb.ok() || wa->size() != wb->size()) return false;
  for (const auto& [name, array] : *wa) {
    if (wb->at(name).values != array.values) return false;
  }
  return true;
}

TEST(StateDictTest, RoundTripGivesEqualParametersAndForward) {
  const nn::LlamaConfig config = nn_testing::TinyConfig();
  const absl::Status status = RunOnMesh(
      {2},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto a,
                            BuildLlama(config, runtime, mesh, Seeded(1)));
        DT_ASSIGN_OR_RETURN(auto b,
                            BuildLlama(config, runtime, mesh, Seeded(2)));
        EXPECT_FALSE(SameValues(*a, *b));
        DT_ASSIGN_OR_RETURN(StateDict state, nn::GetStateDict(*a));
        EXPECT_EQ(state.size(), a->NamedSlots().size());
        EXPECT_EQ(state.begin()->first, "layers.0.attention.wk.weight");
        // Shares storage: no copy.
        EXPECT_EQ(state.at("norm.weight").ToLocal().storage(),
                  a->norm().weight().ToLocal().storage());
        DT_RETURN_IF_ERROR(nn::LoadStateDict(*b, state));
        EXPECT_TRUE(SameValues(*a, *b));
        std::mt19937 rng(3);
        DT_ASSIGN_OR_RETURN(
            DTensor tokens,
            nn_testing::Replicated(runtime, mesh,
                                   nn_testing::RandomTokens({2, 5}, 64, rng)));
        DT_ASSIGN_OR_RETURN(DTensor ya, (*a)(tokens));
        DT_ASSIGN_OR_RETURN(DTensor yb, (*b)(tokens));
        EXPECT_TRUE(AllClose(ya.ToLocal(), yb.ToLocal(), 0, 0));
        // A tree without values takes the state dict's DTensors as they are.
        DT_ASSIGN_OR_RETURN(auto fresh, Transformer::Create(config));
        EXPECT_FALSE(nn::GetStateDict(*fresh).ok());
        DT_RETURN_IF_ERROR(nn::LoadStateDict(*fresh, state));
        EXPECT_TRUE(SameValues(*a, *fresh));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// A replicated f64 state loaded into a sharded f32 model: every slot keeps
// its layout and dtype, with the loaded values.
TEST(StateDictTest, LoadingKeepsTheSlotsShardingAndDtype) {
  const nn::LlamaConfig config = nn_testing::TinyConfig();
  InitOptions sharded = Seeded(2);
  sharded.sharding = [](absl::string_view, const Shape& shape) {
    return Sharding::Parse(shape.size() == 1 ? "R,S(0)" : "S(1),S(0)",
                           static_cast<int64_t>(shape.size()));
  };
  const absl::Status status = RunOnMesh(
      {2, 2},
      [&](std::shared_ptr<Runtime> runtime,
          const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto source,
                            BuildLlama(config, runtime, mesh, Seeded(1)));
        DT_ASSIGN_OR_RETURN(StateDict state, nn::GetStateDict(*source));
        for (auto& [name, value] : state) {
          DT_ASSIGN_OR_RETURN(value, ops::To(value, DType::kF64));
        }
        DT_ASSIGN_OR_RETURN(auto target,
                            BuildLlama(config, runtime, mesh, sharded));
        DT_RETURN_IF_ERROR(nn::LoadStateDict(*target, state));
        for (const nn::NamedSlot& named : target->NamedSlots()) {
          const DTensor& value = named.slot->value;
          EXPECT_EQ(value.dtype(), DType::kF32) << named.name;
          EXPECT_EQ(value.sharding().ToString(),
                    named.slot->shape.size() == 1 ? "R,S(0)" : "S(1),S(0)")
              << named.name;
        }
        EXPECT_TRUE(SameValues(*source, *target));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(StateDictTest, ErrorsNameEveryBadKeyAndChangeNothing) {
  const nn::LlamaConfig config = nn_testing::TinyConfig();
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  std::unique_ptr<Transformer> model =
      *BuildLlama(config, runtime, mesh, Seeded(1));
  const StateDict good = *nn::GetStateDict(*model);
  const auto meta = [&](const DeviceMesh& m, Shape shape) {
    return *DTensor::FromSpec(
        runtime, *DTensorSpec::Create(
                     m, std::vector<Placement>(m.ndim(), Placement::Shard(0)),
                     shape, DType::kF32));
  };

  StateDict state = good;
  state.erase("norm.weight");
  state.erase("layers.1.ffn_norm.weight");
  state["layers.9.ffn_norm.weight"] = good.at("norm.weight");
  state["output.weight"] = meta(mesh, {64, 16});
  state["tok_embeddings.weight"] = DTensor();
  const DeviceMesh other = *DeviceMesh::Create({2, 2});
  state["layers.0.attention.wq.weight"] = meta(other, {32, 32});
  // Valid on its own: it would be redistributed into a new DTensor.
  state["layers.0.feed_forward.w1.weight"] = meta(mesh, {96, 32});
  const absl::Status status = nn::LoadStateDict(*model, state);
  ASSERT_FALSE(status.ok());
  const std::string message(status.message());
  for (const std::string& needle :
       {std::string("missing keys [layers.1.ffn_norm.weight, norm.weight]"),
        std::string("unexpected keys [layers.9.ffn_norm.weight]"),
        std::string("output.weight: expected shape [64, 32], got [64, 16]"),
        std::string("tok_embeddings.weight: the DTensor is undefined"),
        std::string("layers.0.attention.wq.weight: the DTensor is on")}) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << "no \"" << needle << "\" in " << message;
  }
  // Nothing changed, not even the valid entry.
  EXPECT_EQ(
      (*model->FindSlot("layers.0.feed_forward.w1.weight"))->value.spec_ptr(),
      good.at("layers.0.feed_forward.w1.weight").spec_ptr());

  // Not strict: missing and unexpected keys are ignored, the rest loads.
  StateDict partial = good;
  partial.erase("norm.weight");
  partial["extra.weight"] = good.at("norm.weight");
  partial["output.weight"] = meta(mesh, {64, 32});
  nn::LoadOptions lenient;
  lenient.strict = false;
  EXPECT_FALSE(nn::LoadStateDict(*model, partial).ok());
  ASSERT_TRUE(nn::LoadStateDict(*model, partial, lenient).ok());
  EXPECT_NE(model->output().weight().spec_ptr(),
            good.at("output.weight").spec_ptr());
  // Loaded into the slot's layout (Replicate), not the given S(0).
  EXPECT_EQ(model->output().weight().sharding().ToString(), "R");
  // Shapes are checked even when not strict.
  partial["output.weight"] = meta(mesh, {64, 31});
  EXPECT_FALSE(nn::LoadStateDict(*model, partial, lenient).ok());
}

}  // namespace
}  // namespace dtensor
