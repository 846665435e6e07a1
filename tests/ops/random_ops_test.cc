// dropout on DTensors: randomized property tests (random meshes, even and
// uneven shards, Partial inputs, seeds, offsets) against a reference written
// here from the Philox stream of each element's global index; the result
// does not depend on the layout.
#include "dtensor/ops/random_ops.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::DistributeWithTerms;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;
using testing_util::TestSharding;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// Element i of the row-major tensor survives when draw offset + i of the
// seed's stream is >= p, and is then scaled by 1 / (1 - p).
Tensor ReferenceDropout(const Tensor& x, double p, uint64_t seed,
                        uint64_t offset) {
  const std::vector<double> in = x.ToVector<double>().value();
  std::vector<double> out(in.size(), 0.0);
  for (size_t i = 0; i < in.size(); ++i) {
    Generator generator(seed, offset + i);
    if (p < 1 && generator.NextUniformFloat() >= p) out[i] = in[i] / (1 - p);
  }
  return *Tensor::FromVector(out, x.shape())->To(x.dtype());
}

OpCall DropoutCall(std::mt19937& rng) {
  static const double kP[] = {0.0, 0.25, 0.5, 0.9, 1.0};
  const double p = kP[rng() % 5];
  const uint64_t seed = (uint64_t{rng()} << 32) | rng();
  const uint64_t offset = rng() % 3 == 0 ? 0 : rng() % 1000;
  OpCall c;
  c.op = "dropout";
  c.description =
      absl::StrCat("dropout p ", p, " seed ", seed, " offset ", offset);
  c.inputs = {RandomTensor(RandomShape(rng() % 4, 7, rng),
                           rng() % 3 == 0 ? DType::kF64 : DType::kF32, -3, 3,
                           rng)};
  c.args.AddScalar(p)
      .AddInt(static_cast<int64_t>(seed))
      .AddScalar(static_cast<double>(offset));
  c.call = OneOutput(
      [=](const In& in) { return ops::Dropout(in[0], p, seed, offset); });
  c.reference = OneReference([=](const Full& in) -> absl::StatusOr<Tensor> {
    return ReferenceDropout(in[0], p, seed, offset);
  });
  return c;
}

TEST(RandomPropertyTest, DropoutMatchesThePhiloxStreamOfGlobalIndices) {
  const absl::Status status = CheckOpProperties(
      71, DropoutCall, 1e-5, {/*sharding_rounds=*/5, /*calls_per_mesh=*/12});
  EXPECT_TRUE(status.ok()) << status;
}

TEST(RandomPropertyTest, DropoutDoesNotDependOnTheLayout) {
  // 5 x 7 on a 2 x 3 mesh: uneven, nested and transposed nestings.
  const DeviceMesh mesh = *DeviceMesh::Create({2, 3});
  std::mt19937 rng(73);
  const Tensor x = RandomTensor({5, 7}, DType::kF32, -3, 3, rng);
  const std::vector<TestSharding> shardings = {
      {{Placement::Replicate(), Placement::Replicate()}, {}},
      {{Placement::Shard(0), Placement::Shard(1)}, {}},
      {{Placement::Shard(1), Placement::Shard(0)}, {}},
      {{Placement::Shard(0), Placement::Shard(0)}, {{1, 0}, {}}},
      {{Placement::Replicate(), Placement::Shard(1)}, {}},
  };
  LocalCluster cluster(mesh.size());
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        Tensor first;
        for (const TestSharding& sharding : shardings) {
          DT_ASSIGN_OR_RETURN(DTensor input,
                              DistributeWithTerms(runtime, x, mesh, sharding));
          DT_ASSIGN_OR_RETURN(DTensor out, ops::Dropout(input, 0.5, 1234));
          DT_ASSIGN_OR_RETURN(Tensor full, out.FullTensor());
          if (!first.defined()) {
            first = full;
          } else if (!AllClose(full, first, 0, 0)) {
            return absl::InternalError(
                absl::StrCat("layout ", sharding.ToString(), " gives\n",
                             full.ToString(), "\nnot\n", first.ToString()));
          }
        }
        // Another seed or offset draws other numbers.
        DT_ASSIGN_OR_RETURN(
            DTensor input, DistributeWithTerms(runtime, x, mesh, shardings[1]));
        DT_ASSIGN_OR_RETURN(DTensor other, ops::Dropout(input, 0.5, 1235));
        DT_ASSIGN_OR_RETURN(Tensor other_full, other.FullTensor());
        DT_ASSIGN_OR_RETURN(DTensor later, ops::Dropout(input, 0.5, 1234, 35));
        DT_ASSIGN_OR_RETURN(Tensor later_full, later.FullTensor());
        if (AllClose(other_full, first, 0, 0) ||
            AllClose(later_full, first, 0, 0)) {
          return absl::InternalError(
              "another seed or offset gave the same mask");
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(RandomPropertyTest, DropoutDropsAboutAFractionP) {
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  LocalCluster cluster(mesh.size());
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(Tensor ones, Tensor::Ones({100, 101}, DType::kF32));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, ones, mesh, {Placement::Shard(1)}));
        DT_ASSIGN_OR_RETURN(DTensor out, ops::Dropout(x, 0.3, 99));
        DT_ASSIGN_OR_RETURN(Tensor full, out.FullTensor());
        int64_t dropped = 0;
        const std::vector<float> host_values = full.ToVector<float>().value();
        for (float v : host_values) dropped += v == 0;
        const double fraction = static_cast<double>(dropped) / full.numel();
        if (fraction < 0.28 || fraction > 0.32) {
          return absl::InternalError(absl::StrCat("dropped ", fraction));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(RandomShardingTest, DropoutKeepsShardsAndPartials) {
  for (const char* sharding :
       {"S(0),S(1)", "S(1)[1],S(1)[0]", "P(sum),S(0)", "P(max),R"}) {
    const MetaOutcome o =
        RunOnMeta({2, 2}, {{{8, 6}, sharding}},
                  [](const In& in) { return ops::Dropout(in[0], 0.1, 7); });
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, sharding);
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
}

TEST(RandomErrorTest, BadArgumentsAreErrorsNamingTheValue) {
  const auto check = [](DType dtype, double p, uint64_t offset,
                        const std::string& text) {
    const MetaOutcome o =
        RunOnMeta({2}, {{{4}, "R", dtype}}, [p, offset](const In& in) {
          return ops::Dropout(in[0], p, 1, offset);
        });
    ASSERT_FALSE(o.status.ok());
    EXPECT_NE(o.status.message().find(text), std::string::npos) << o.status;
  };
  check(DType::kF32, 1.5, 0, "1.5");
  check(DType::kF32, -0.1, 0, "-0.1");
  check(DType::kI64, 0.5, 0, "i64");
  check(DType::kF32, 0.5, uint64_t{1} << 60, "offset");
}

}  // namespace
}  // namespace dtensor
