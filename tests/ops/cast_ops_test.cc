// dtype conversion of DTensors: randomized property tests (random meshes,
// dtype pairs, even and uneven shards, Partial inputs) against the tensor
// layer on the gathered input, under random layouts and under every
// strategy; which Partials pass through.
#include "dtensor/ops/cast_ops.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/comm_counter.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kBF16,
                             DType::kF16, DType::kI32, DType::kI64,
                             DType::kBool};

// Values every dtype holds exactly, so that conversions and the Partial
// terms' sums are exact: multiples of 0.75 in [-3, 3] for floats (zeros
// included), integers in [-5, 5], random bools.
Tensor ExactValues(const Shape& shape, DType dtype, std::mt19937& rng) {
  if (dtype == DType::kBool || !IsFloatingPoint(dtype)) {
    return RandomTensor(shape, dtype, -5, 5, rng);
  }
  const Tensor whole =
      *RandomTensor(shape, DType::kI64, -4, 4, rng).To(DType::kF64);
  return *(*Mul(whole, 0.75)).To(dtype);
}

OpCall ToCall(std::mt19937& rng) {
  const DType from = kDTypes[rng() % 7];
  const DType to = kDTypes[rng() % 7];
  OpCall c;
  c.op = "to";
  c.description = absl::StrCat("to ", std::string(DTypeName(from)), " -> ",
                               std::string(DTypeName(to)));
  c.inputs = {ExactValues(RandomShape(rng() % 4, 6, rng), from, rng)};
  c.args.AddInt(static_cast<int64_t>(to));
  c.call = OneOutput([to](const In& in) { return ops::To(in[0], to); });
  c.reference = OneReference([to](const Full& in) { return in[0].To(to); });
  return c;
}

TEST(CastPropertyTest, ToMatchesTheTensorLayer) {
  const absl::Status status = CheckOpProperties(
      61, ToCall, 1e-6,
      {/*sharding_rounds=*/5, /*calls_per_mesh=*/12, /*strategy_calls=*/24});
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CastCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  for (const OpDef* op : ops::CastOps()) EXPECT_EQ(op->name, "to");
}

MetaOutcome Convert(const std::string& sharding, DType from, DType to) {
  return RunOnMeta({4}, {{{8, 6}, sharding, from}},
                   [to](const In& in) { return ops::To(in[0], to); });
}

TEST(CastShardingTest, ShardsStayAndPartialsPassWhereConversionCommutes) {
  MetaOutcome o = Convert("S(1)", DType::kF32, DType::kBF16);
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // Widening keeps sums; narrowing would round every term, so it reduces
  // first.
  o = Convert("P(sum)", DType::kF32, DType::kF64);
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = Convert("P(sum)", DType::kF32, DType::kBF16);
  EXPECT_EQ(o.sharding.find("P"), std::string::npos) << o.sharding;
  EXPECT_GE(o.comms.total_collectives(), 1);
  // Nondecreasing conversions keep max and min.
  o = Convert("P(max)", DType::kF32, DType::kI32);
  EXPECT_EQ(o.sharding, "P(max)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // i64 -> i32 wraps, x != 0 is not monotone.
  o = Convert("P(max)", DType::kI64, DType::kI32);
  EXPECT_GE(o.comms.total_collectives(), 1);
  o = Convert("P(min)", DType::kF32, DType::kBool);
  EXPECT_GE(o.comms.total_collectives(), 1);
}

TEST(CastErrorTest, AnUnknownDTypeIsAnErrorNamingIt) {
  const MetaOutcome o = Convert("R", DType::kF32, static_cast<DType>(9));
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("9"), std::string::npos) << o.status;
}

}  // namespace
}  // namespace dtensor
