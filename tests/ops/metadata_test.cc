// Metadata-only mode: a chain of ops (a tensor-parallel MLP with a softmax
// and a loss) on a (64, 8) mesh, and a 3-D 4096-rank version of it, gives
// the layouts and collective counts a real run gives on a small mesh; the
// op counter's memory estimate matches the chunk rule.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/op_counter.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// What a chain run yields on one rank: every op output's layout in order and
// the collectives by kind.
struct Trace {
  std::vector<std::string> shardings;
  std::map<CommKind, int64_t> counts;
};

// Makes an input of `shape` laid out by `sharding` (real data or metadata).
using MakeInput = std::function<absl::StatusOr<DTensor>(
    const Shape& shape, const std::string& sharding)>;

// Sizes of one chain: batch, hidden, feed-forward.
struct Sizes {
  int64_t batch, hidden, ffn;
};

// `layers` blocks of: h = x @ w1 + b1 (colwise); g = gelu(h); p =
// softmax(g) over the tensor-parallel dim 1 (amax, sub, exp, sum, div: two
// all-reduces of the row statistics); y = p @ w2 (rowwise: a partial sum) +
// x; x = relu(y) (a reduce-scatter); then the mean as a loss. Tensors are
// split over the data mesh dims by `data_dims` (weights: `data_replicated`)
// and over the last, tensor-parallel mesh dim as the block says. The
// collectives all run over the last mesh dim, so their count does not
// depend on the mesh's size.
absl::StatusOr<Trace> RunChain(const MakeInput& make, const Sizes& s,
                               const std::string& data_dims,
                               const std::string& data_replicated, int layers) {
  Trace trace;
  CommCounter counter;
  CommCounter::Scope scope(counter);
  const auto record = [&](const DTensor& t) {
    trace.shardings.push_back(t.sharding().ToString());
  };
  DT_ASSIGN_OR_RETURN(DTensor x, make({s.batch, s.hidden}, data_dims + ",R"));
  for (int layer = 0; layer < layers; ++layer) {
    DT_ASSIGN_OR_RETURN(DTensor w1,
                        make({s.hidden, s.ffn}, data_replicated + ",S(1)"));
    DT_ASSIGN_OR_RETURN(DTensor b1, make({s.ffn}, data_replicated + ",S(0)"));
    DT_ASSIGN_OR_RETURN(DTensor w2,
                        make({s.ffn, s.hidden}, data_replicated + ",S(0)"));
    DT_ASSIGN_OR_RETURN(DTensor h, ops::Mm(x, w1));
    record(h);
    DT_ASSIGN_OR_RETURN(h, ops::Add(h, b1));
    record(h);
    DT_ASSIGN_OR_RETURN(DTensor g, ops::Gelu(h));
    record(g);
    DT_ASSIGN_OR_RETURN(DTensor m, ops::Amax(g, {1}, true));
    record(m);
    DT_ASSIGN_OR_RETURN(DTensor shifted, ops::Sub(g, m));
    record(shifted);
    DT_ASSIGN_OR_RETURN(DTensor e, ops::Exp(shifted));
    record(e);
    DT_ASSIGN_OR_RETURN(DTensor z, ops::Sum(e, {1}, true));
    record(z);
    DT_ASSIGN_OR_RETURN(DTensor p, ops::Div(e, z));
    record(p);
    DT_ASSIGN_OR_RETURN(DTensor y, ops::Mm(p, w2));
    record(y);
    DT_ASSIGN_OR_RETURN(y, ops::Add(y, x));
    record(y);
    DT_ASSIGN_OR_RETURN(x, ops::Relu(y));
    record(x);
  }
  DT_ASSIGN_OR_RETURN(DTensor loss, ops::Mean(x));
  record(loss);
  for (const CommCounter::Event& event : counter.events()) {
    if (event.kind != CommKind::kLocal) ++trace.counts[event.kind];
  }
  return trace;
}

absl::StatusOr<Trace> RunMetadata(const std::vector<int64_t>& mesh_shape,
                                  const Sizes& sizes,
                                  const std::string& data_dims,
                                  const std::string& data_replicated,
                                  int layers, OpCounter* ops = nullptr) {
  auto runtime = Runtime::MetadataOnly(0);
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  std::optional<OpCounter::Scope> scope;
  if (ops != nullptr) scope.emplace(*ops);
  return RunChain(
      [&](const Shape& shape, const std::string& sharding) {
        return testing_util::MetaTensor(runtime, mesh, shape, sharding);
      },
      sizes, data_dims, data_replicated, layers);
}

// The chain on in-process ranks with data; rank 0's trace.
absl::StatusOr<Trace> RunReal(const std::vector<int64_t>& mesh_shape,
                              const Sizes& sizes, const std::string& data_dims,
                              const std::string& data_replicated, int layers) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  Trace trace;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    std::mt19937 rng(7);
    DT_ASSIGN_OR_RETURN(
        Trace mine,
        RunChain(
            [&](const Shape& shape,
                const std::string& sharding_text) -> absl::StatusOr<DTensor> {
              const Tensor full =
                  testing_util::RandomTensor(shape, DType::kF32, -1, 1, rng);
              DT_ASSIGN_OR_RETURN(
                  Sharding sharding,
                  Sharding::Parse(sharding_text,
                                  static_cast<int64_t>(shape.size())));
              return DTensor::Distribute(runtime, full, mesh,
                                         sharding.placements(),
                                         sharding.shard_order());
            },
            sizes, data_dims, data_replicated, layers));
    if (groups.rank() == 0) trace = std::move(mine);
    return absl::OkStatus();
  }));
  return trace;
}

std::string Describe(const Trace& t) {
  std::vector<std::string> counts;
  for (const auto& [kind, n] : t.counts) {
    counts.push_back(absl::StrCat(CommKindName(kind), "=", n));
  }
  return absl::StrCat(absl::StrJoin(t.shardings, " | "), "\n",
                      absl::StrJoin(counts, ", "));
}

TEST(MetadataTest, LargeMeshMetadataMatchesASmallRealRun) {
  // Divisible by both meshes alike, so that the cost ties break the same.
  const Sizes large{1024, 64, 256};
  const Sizes small{16, 8, 32};
  absl::StatusOr<Trace> big = RunMetadata({64, 8}, large, "S(0)", "R", 2);
  ASSERT_TRUE(big.ok()) << big.status();
  absl::StatusOr<Trace> real = RunReal({4, 2}, small, "S(0)", "R", 2);
  ASSERT_TRUE(real.ok()) << real.status();
  absl::StatusOr<Trace> meta_small = RunMetadata({4, 2}, small, "S(0)", "R", 2);
  ASSERT_TRUE(meta_small.ok()) << meta_small.status();
  EXPECT_EQ(big->shardings, real->shardings)
      << "metadata (64, 8):\n"
      << Describe(*big) << "\nreal (4, 2):\n"
      << Describe(*real);
  EXPECT_EQ(big->counts, real->counts) << Describe(*big) << "\n"
                                       << Describe(*real);
  EXPECT_EQ(meta_small->shardings, real->shardings);
  EXPECT_EQ(meta_small->counts, real->counts);
  // The tensor-parallel block as users know it: the colwise product is
  // sharded on features, the row max a Partial(max) all-reduced for the
  // subtraction, the rowwise product a partial sum that the residual joins
  // locally and relu reduce-scatters; the next block gathers it again.
  ASSERT_EQ(big->shardings.size(), 2u * 11 + 1);
  EXPECT_EQ(big->shardings[0], "S(0),S(1)");
  EXPECT_EQ(big->shardings[3], "S(0),P(max)");
  EXPECT_EQ(big->shardings[4], "S(0),S(1)");
  EXPECT_EQ(big->shardings[8], "S(0),P(sum)");
  EXPECT_EQ(big->shardings[9], "S(0),P(sum)");
  EXPECT_EQ(big->shardings[22], "P(sum),P(sum)");
  const std::map<CommKind, int64_t> expected = {{CommKind::kAllReduce, 4},
                                                {CommKind::kReduceScatter, 2},
                                                {CommKind::kAllGather, 1}};
  EXPECT_EQ(big->counts, expected) << Describe(*big);
}

TEST(MetadataTest, AModelOnFourThousandRanksMatchesAnEightRankRun) {
  // dp x cp x tp = 8 x 64 x 8: the batch split over dp and cp.
  const Sizes large{1024, 64, 256};
  const Sizes small{16, 8, 32};
  absl::StatusOr<Trace> big =
      RunMetadata({8, 64, 8}, large, "S(0),S(0)", "R,R", 8);
  ASSERT_TRUE(big.ok()) << big.status();
  absl::StatusOr<Trace> real = RunReal({2, 2, 2}, small, "S(0),S(0)", "R,R", 8);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(big->shardings, real->shardings) << Describe(*big) << "\n"
                                             << Describe(*real);
  EXPECT_EQ(big->counts, real->counts) << Describe(*big) << "\n"
                                       << Describe(*real);
  EXPECT_EQ(big->shardings.size(), 8u * 11 + 1);
}

TEST(MetadataTest, OpCounterEstimatesEachRanksOutputBytes) {
  const Sizes sizes{1024, 64, 256};
  OpCounter ops;
  absl::StatusOr<Trace> trace =
      RunMetadata({64, 8}, sizes, "S(0)", "R", 1, &ops);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(ops.total(), 12);
  EXPECT_EQ(ops.count("mm"), 2);
  // h = x @ w1: [1024, 256] split 64 x 8 -> 16 x 32 floats on every rank.
  EXPECT_EQ(ops.events()[0].op, "mm");
  EXPECT_EQ(ops.events()[0].local_bytes, 16 * 32 * 4);
  // y = g @ w2: [1024, 64] split 64 ways, partial over tp: 16 x 64 floats.
  EXPECT_EQ(ops.events()[8].op, "mm");
  EXPECT_EQ(ops.events()[8].local_bytes, 16 * 64 * 4);
  // The row max: [1024, 1] split 64 ways.
  EXPECT_EQ(ops.events()[3].local_bytes, 16 * 4);
  int64_t total = 0, peak = 0;
  for (const OpCounter::Event& e : ops.events()) {
    total += e.local_bytes;
    peak = std::max(peak, e.local_bytes);
  }
  EXPECT_EQ(ops.total_local_bytes(), total);
  EXPECT_EQ(ops.peak_local_bytes(), peak);
  EXPECT_EQ(LocalBytes(*ops.events()[0].outputs[0], 511).value(), 16 * 32 * 4);
}

}  // namespace
}  // namespace dtensor
