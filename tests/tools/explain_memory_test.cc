// EstimateStepMemory's transient in backward: the largest kept tensor, or the
// tensors rebuilt at once (an FSDP group's gathered parameters; with
// prefetch two groups), with the byte counts worked out by hand.
#include "tools/explain_memory.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// A replicated f32 tensor of `bytes` bytes (a multiple of 4), data-less.
DTensor OfBytes(const std::shared_ptr<Runtime>& runtime, int64_t bytes) {
  const DeviceMesh mesh = *DeviceMesh::Create({2}, {"dp"});
  return *DTensor::FromSpec(
      runtime, *DTensorSpec::Create(mesh, {Placement::Replicate()}, {bytes / 4},
                                    DType::kF32));
}

TEST(ExplainMemoryTest, TransientIsTheLargestTensorOrTheGroupsRebuiltAtOnce) {
  auto runtime = Runtime::MetadataOnly(0);
  const DTensor param = OfBytes(runtime, 4000);
  const int group_a = 0, group_b = 0;  // Two rebuild-group keys.
  using Held = nn::GradientTape::HeldTensor;
  const std::vector<Held> held = {
      {OfBytes(runtime, 100), false, nullptr},  // an activation, kept
      {param, false, nullptr},                  // a parameter: not counted
      {OfBytes(runtime, 100), true, &group_a},  // group a: 100 + 200
      {OfBytes(runtime, 200), true, &group_a},
      {OfBytes(runtime, 248), true, &group_b},  // group b: 248
      {OfBytes(runtime, 120), true, nullptr},   // rebuilt alone: 120
  };
  const std::vector<DTensor> params = {param};
  const std::vector<DTensor> grads = {param};
  auto one = EstimateStepMemory(params, grads, held, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->parameters, 4000);
  EXPECT_EQ(one->gradients, 4000);
  EXPECT_EQ(one->optimizer_state, 8000);
  EXPECT_EQ(one->peak_activations, 100 + 300);  // kept + group a
  auto two = EstimateStepMemory(params, grads, held, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->peak_activations, 100 + 300 + 248);  // + group b, prefetched
  // Where a kept tensor is larger than the groups in flight, it is the
  // transient (its gradient).
  std::vector<Held> big = held;
  big.push_back({OfBytes(runtime, 1000), false, nullptr});
  auto large = EstimateStepMemory(params, grads, big, 2);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(large->peak_activations, 100 + 1000 + 1000);
}

}  // namespace
}  // namespace dtensor
