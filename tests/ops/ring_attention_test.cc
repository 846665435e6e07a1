// Ring attention (dtensor/ops/ring_attention.h) on in-process ranks against
// the single-rank program: ScaledDotProductAttention and its backward on the
// whole tensors. Over cp = 2 and 4, both sequence orders, causal or not,
// uneven lengths, grouped-query heads and a dp x cp mesh
// (ring_attention_case.h; ring_attention_gloo_test runs the same cases over
// Gloo); the collectives counted against the ring's derivation; bad layouts
// named.
#include "dtensor/ops/ring_attention.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "gtest/gtest.h"
#include "tests/ops/ring_attention_case.h"

namespace dtensor::ops {
namespace {

using testing::CheckRingCase;
using testing::RingCase;
using testing::RingCases;

// Runs every case of `world_size` ranks on in-process ranks.
void CheckCases(int64_t world_size) {
  for (const RingCase& c : RingCases(world_size)) {
    LocalCluster cluster(world_size);
    const absl::Status status = cluster.Run(
        [&](ProcessGroups& groups) { return CheckRingCase(groups, c); });
    EXPECT_TRUE(status.ok()) << status;
  }
}

// cp = 2; cp = 4 and dp = 2 x cp = 2, uneven lengths on cp = 4.
TEST(RingAttentionTest, MatchesOneRankOnEveryLayout) {
  CheckCases(2);
  CheckCases(4);
}

// Metadata-only (explain's view): the output's spec and the ring's
// transfers, by hand: k blocks [2, 2, 1, 4, 8] and v blocks [2, 2, 1, 4, 4]
// of f64 (1024 + 512 bytes) pass 3 times forward; backward passes them 3
// times and their f64 gradients 4 times.
TEST(RingAttentionTest, MetadataOnlyCountsTheRing) {
  auto runtime = Runtime::MetadataOnly(/*rank=*/1);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  std::vector<DTensor> in;
  for (const Shape& shape :
       {Shape{2, 2, 2, 16, 8}, Shape{2, 2, 1, 16, 8}, Shape{2, 2, 1, 16, 4}}) {
    in.push_back(*DTensor::FromSpec(
        runtime,
        *DTensorSpec::Create(mesh, {Placement::Shard(3)}, shape, DType::kF64)));
  }
  const RingAttentionOptions options{0, SequenceOrder::kBalanced, true};
  CommCounter forward, backward;
  absl::StatusOr<RingAttentionResult> out;
  {
    CommCounter::Scope scope(forward);
    out = RingAttention(in[0], in[1], in[2], options);
  }
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->out.shape(), (Shape{2, 2, 2, 16, 4}));
  EXPECT_EQ(out->out.placements(), in[0].placements());
  {
    CommCounter::Scope scope(backward);
    ASSERT_TRUE(RingAttentionBackward(in[0], in[1], in[2], out->out, Tensor(),
                                      out->out, options)
                    .ok());
  }
  EXPECT_EQ(forward.count(CommKind::kPermute), 6);
  EXPECT_EQ(forward.bytes(CommKind::kPermute), 3 * (1024 + 512));
  EXPECT_EQ(backward.count(CommKind::kPermute), 14);
  EXPECT_EQ(backward.bytes(CommKind::kPermute), 7 * (1024 + 512));
}

TEST(RingAttentionTest, NamesLayoutsItCannotRun) {
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  LocalCluster cluster(2);
  const std::vector<absl::Status> statuses =
      cluster.RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(const Tensor q,
                            Tensor::Ones({2, 2, 2, 10, 8}, DType::kF64));
        DT_ASSIGN_OR_RETURN(
            const DTensor replicated,
            DTensor::Distribute(runtime, q, mesh, {Placement::Replicate()}));
        DT_ASSIGN_OR_RETURN(
            const DTensor sharded,
            DTensor::Distribute(runtime, q, mesh, {Placement::Shard(3)}));
        const absl::StatusOr<RingAttentionResult> not_sharded =
            RingAttention(replicated, replicated, replicated,
                          {0, SequenceOrder::kContiguous});
        if (not_sharded.ok() || not_sharded.status().message().find(
                                    "Shard(3)") == std::string::npos) {
          return absl::InternalError(absl::StrCat(
              "replicated sequence: ", not_sharded.status().ToString()));
        }
        const absl::StatusOr<RingAttentionResult> uneven_balanced =
            RingAttention(sharded, sharded, sharded,
                          {0, SequenceOrder::kBalanced});
        if (uneven_balanced.ok() || uneven_balanced.status().message().find(
                                        "10") == std::string::npos) {
          return absl::InternalError(absl::StrCat(
              "length 10 balanced: ", uneven_balanced.status().ToString()));
        }
        const absl::StatusOr<RingAttentionResult> bad_dim = RingAttention(
            sharded, sharded, sharded, {3, SequenceOrder::kContiguous});
        if (bad_dim.ok()) return absl::InternalError("mesh dim 3 accepted");
        return absl::OkStatus();
      });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace dtensor::ops
