// Ring attention (dtensor/ops/ring_attention.h) on in-process ranks against
// the single-rank program: ScaledDotProductAttention and its backward on the
// whole tensors. Over cp = 2 and 4, both sequence orders, causal or not,
// uneven lengths, grouped-query heads and a dp x cp mesh; the collectives
// counted against the ring's derivation; bad layouts named.
#include "dtensor/ops/ring_attention.h"

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/indexing.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/reduction.h"
#include "gtest/gtest.h"

namespace dtensor::ops {
namespace {

struct Case {
  std::vector<int64_t> mesh;  // {cp} or {dp, cp}
  SequenceOrder order;
  bool causal;
  int64_t length;
  std::string Name() const {
    return absl::StrCat(
        mesh.size() == 1 ? "cp=" : "dp=", mesh[0],
        mesh.size() == 1 ? "" : absl::StrCat(",cp=", mesh[1]),
        order == SequenceOrder::kBalanced ? " balanced" : " contiguous",
        causal ? " causal" : "", " L=", length);
  }
};

// q [2, kv heads 2, group 2, L, 8]; k, v [2, 2, 1, L, 8 | 4] (grouped-query
// heads broadcast over the group); dout like the output.
struct Full {
  Tensor q, k, v, dout;
};

Full Draw(int64_t length, uint64_t seed) {
  Generator gen(seed);
  const auto draw = [&](Shape shape) {
    return *Tensor::Normal(std::move(shape), 0.0, 1.0, gen, DType::kF64);
  };
  return {draw({2, 2, 2, length, 8}), draw({2, 2, 1, length, 8}),
          draw({2, 2, 1, length, 4}), draw({2, 2, 2, length, 4})};
}

// `t` with its sequence dim (3) in `order` over `cp` (or back, `inverse`).
absl::StatusOr<Tensor> Reordered(const Tensor& t, int64_t cp,
                                 SequenceOrder order, bool inverse) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> positions,
                      SequencePositions(t.size(3), cp, order));
  if (inverse) {
    std::vector<int64_t> back(positions.size());
    for (size_t i = 0; i < positions.size(); ++i) back[positions[i]] = i;
    positions = back;
  }
  DT_ASSIGN_OR_RETURN(const Tensor index,
                      Tensor::FromVector<int64_t>(
                          positions, {static_cast<int64_t>(positions.size())}));
  return IndexSelect(t, 3, index);
}

absl::Status ExpectClose(const Tensor& got, const Tensor& want,
                         const std::string& what) {
  DT_ASSIGN_OR_RETURN(const Tensor diff, Sub(got, want));
  DT_ASSIGN_OR_RETURN(const Tensor abs, Abs(diff));
  DT_ASSIGN_OR_RETURN(const Tensor worst, Max(abs, {}));
  DT_ASSIGN_OR_RETURN(const double error, worst.Item());
  if (!(error < 1e-10)) {
    return absl::InternalError(absl::StrCat(what, ": off by ", error));
  }
  return absl::OkStatus();
}

// Runs the case on in-process ranks and compares with one rank.
void CheckCase(const Case& c) {
  const Full full = Draw(c.length, 11 + c.length);
  const Tensor ref_out =
      *ScaledDotProductAttention(full.q, full.k, full.v, c.causal);
  const AttentionGrads ref = *ScaledDotProductAttentionBackward(
      full.q, full.k, full.v, ref_out, full.dout, c.causal);
  const DeviceMesh mesh = *DeviceMesh::Create(c.mesh);
  const int64_t cp_dim = static_cast<int64_t>(c.mesh.size()) - 1;
  const int64_t cp = c.mesh.back();
  std::vector<Placement> placements(c.mesh.size(), Placement::Shard(0));
  placements[cp_dim] = Placement::Shard(3);
  const RingAttentionOptions options{cp_dim, c.order, c.causal};
  LocalCluster cluster(mesh.size());
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        std::vector<DTensor> in;
        for (const Tensor* t : {&full.q, &full.k, &full.v, &full.dout}) {
          DT_ASSIGN_OR_RETURN(const Tensor ordered,
                              Reordered(*t, cp, c.order, false));
          DT_ASSIGN_OR_RETURN(DTensor d, DTensor::Distribute(runtime, ordered,
                                                             mesh, placements));
          in.push_back(std::move(d));
        }
        CommCounter forward_count, backward_count;
        absl::StatusOr<RingAttentionResult> out;
        {
          CommCounter::Scope scope(forward_count);
          out = RingAttention(in[0], in[1], in[2], options);
        }
        DT_RETURN_IF_ERROR(out.status());
        absl::StatusOr<std::vector<DTensor>> grads;
        {
          CommCounter::Scope scope(backward_count);
          grads = RingAttentionBackward(in[0], in[1], in[2], out->out, out->lse,
                                        in[3], options);
        }
        DT_RETURN_IF_ERROR(grads.status());
        const std::pair<const DTensor*, const Tensor*> checks[] = {
            {&out->out, &ref_out},
            {&(*grads)[0], &ref.dq},
            {&(*grads)[1], &ref.dk},
            {&(*grads)[2], &ref.dv}};
        const char* names[] = {"out", "dq", "dk", "dv"};
        for (int i = 0; i < 4; ++i) {
          DT_ASSIGN_OR_RETURN(const Tensor gathered,
                              checks[i].first->FullTensor());
          DT_ASSIGN_OR_RETURN(const Tensor got,
                              Reordered(gathered, cp, c.order, true));
          DT_RETURN_IF_ERROR(
              ExpectClose(got, *checks[i].second, c.Name() + " " + names[i]));
        }
        // k and v pass cp - 1 times forward; in backward k, v cp - 1 times and
        // their gradients cp times.
        const int64_t forward = cp == 1 ? 0 : 2 * (cp - 1);
        const int64_t backward = cp == 1 ? 0 : 2 * (cp - 1) + 2 * cp;
        if (forward_count.count(CommKind::kPermute) != forward ||
            forward_count.total_collectives() != forward ||
            backward_count.count(CommKind::kPermute) != backward ||
            backward_count.total_collectives() != backward) {
          return absl::InternalError(absl::StrCat(
              c.Name(), ": ", forward_count.total_collectives(), " and ",
              backward_count.total_collectives(), " collectives, expected ",
              forward, " and ", backward));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(RingAttentionTest, MatchesOneRankOnEveryLayout) {
  for (const std::vector<int64_t>& mesh :
       {std::vector<int64_t>{2}, {4}, {2, 2}}) {
    for (const SequenceOrder order :
         {SequenceOrder::kContiguous, SequenceOrder::kBalanced}) {
      for (const bool causal : {false, true}) {
        CheckCase({mesh, order, causal, 16});
      }
    }
  }
}

TEST(RingAttentionTest, UnevenLengthsInContiguousOrder) {
  for (const int64_t length : {7, 9, 3}) {
    for (const bool causal : {false, true}) {
      CheckCase({{4}, SequenceOrder::kContiguous, causal, length});
    }
  }
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
        const Full full = Draw(10, 3);
        DT_ASSIGN_OR_RETURN(const DTensor replicated,
                            DTensor::Distribute(runtime, full.q, mesh,
                                                {Placement::Replicate()}));
        DT_ASSIGN_OR_RETURN(
            const DTensor sharded,
            DTensor::Distribute(runtime, full.q, mesh, {Placement::Shard(3)}));
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
