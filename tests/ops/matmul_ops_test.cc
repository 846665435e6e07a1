// Matrix products on DTensors: randomized property tests (the gathered result
// equals the tensor layer's product of the gathered inputs) and the layouts
// users expect, with their communication counted.
#include "dtensor/ops/matmul_ops.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckCases;
using testing_util::MetaTensor;
using testing_util::OpCase;
using testing_util::PartialOpsFor;
using testing_util::RandomMeshShape;
using testing_util::RandomShape;
using testing_util::RandomSharding;
using testing_util::RandomTensor;

constexpr double kTol = 1e-4;

// A case with inputs of `shapes` (an empty optional marks an absent input),
// random values and random layouts (Partial included).
OpCase MakeCase(const std::vector<std::optional<Shape>>& shapes, DType dtype,
                int64_t mesh_ndim, std::mt19937& rng) {
  OpCase c;
  for (const std::optional<Shape>& shape : shapes) {
    if (!shape.has_value()) {
      c.inputs.emplace_back();
      c.shardings.emplace_back();
      continue;
    }
    c.inputs.push_back(RandomTensor(*shape, dtype, -2, 2, rng));
    c.shardings.push_back(RandomSharding(mesh_ndim,
                                         static_cast<int64_t>(shape->size()),
                                         PartialOpsFor(dtype), rng));
  }
  return c;
}

// Runs `make_case` on several random meshes; each case on every rank.
void CheckRandom(const std::function<OpCase(int64_t, std::mt19937&)>& make_case,
                 const testing_util::DTensorCall& call,
                 const testing_util::ReferenceCall& reference, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int mesh_round = 0; mesh_round < 6; ++mesh_round) {
    const std::vector<int64_t> mesh_shape = RandomMeshShape(rng);
    std::vector<OpCase> cases;
    for (int k = 0; k < 12; ++k) {
      cases.push_back(make_case(static_cast<int64_t>(mesh_shape.size()), rng));
    }
    const absl::Status status =
        CheckCases(mesh_shape, cases, call, reference, kTol, kTol);
    ASSERT_TRUE(status.ok()) << status;
  }
}

testing_util::DTensorCall Wrap(
    std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)> f) {
  return [f](const std::vector<DTensor>& in)
             -> absl::StatusOr<std::vector<DTensor>> {
    absl::StatusOr<DTensor> out = f(in);
    if (!out.ok()) return out.status();
    return std::vector<DTensor>{*std::move(out)};
  };
}

testing_util::ReferenceCall WrapRef(
    std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)> f) {
  return [f](const std::vector<Tensor>& in)
             -> absl::StatusOr<std::vector<Tensor>> {
    absl::StatusOr<Tensor> out = f(in);
    if (!out.ok()) return out.status();
    return std::vector<Tensor>{*std::move(out)};
  };
}

TEST(MatmulPropertyTest, MatmulWithBatchDimsMatchesTheTensorLayer) {
  CheckRandom(
      [](int64_t mesh_ndim, std::mt19937& rng) {
        const int64_t ra = 1 + rng() % 4, rb = 1 + rng() % 4;
        const int64_t m = 1 + rng() % 5, k = rng() % 6, n = 1 + rng() % 5;
        // Batch dims: the longer operand's, some broadcast (size 1) in one.
        const Shape batch = RandomShape(
            std::max(ra, rb) - 2 > 0 ? std::max(ra, rb) - 2 : 0, 3, rng);
        const auto operand = [&](int64_t rank, Shape tail) {
          Shape shape;
          const int64_t nbatch = std::max<int64_t>(rank - 2, 0);
          for (int64_t d = 0; d < nbatch; ++d) {
            const int64_t full = batch[batch.size() - nbatch + d];
            shape.push_back(rng() % 3 == 0 ? 1 : full);
          }
          shape.insert(shape.end(), tail.begin(), tail.end());
          return shape;
        };
        const Shape a = ra == 1 ? Shape{k} : operand(ra, {m, k});
        const Shape b = rb == 1 ? Shape{k} : operand(rb, {k, n});
        return MakeCase({a, b}, rng() % 4 == 0 ? DType::kF64 : DType::kF32,
                        mesh_ndim, rng);
      },
      Wrap([](const std::vector<DTensor>& in) {
        return ops::Matmul(in[0], in[1]);
      }),
      WrapRef(
          [](const std::vector<Tensor>& in) { return Matmul(in[0], in[1]); }),
      11);
}

// Against the sum over the rows of outer products, in loops written here.
absl::StatusOr<Tensor> RowOuterProducts(const Tensor& g, const Tensor& x) {
  const int64_t out = g.shape().back(), in = x.shape().back();
  DT_ASSIGN_OR_RETURN(Tensor g64, g.To(DType::kF64));
  DT_ASSIGN_OR_RETURN(Tensor x64, x.To(DType::kF64));
  DT_ASSIGN_OR_RETURN(const std::vector<double> gv,
                      g64.Contiguous().ToVector<double>());
  DT_ASSIGN_OR_RETURN(const std::vector<double> xv,
                      x64.Contiguous().ToVector<double>());
  const int64_t rows = out == 0 ? 0 : static_cast<int64_t>(gv.size()) / out;
  std::vector<double> sums(out * in, 0.0);
  for (int64_t r = 0; r < rows && in > 0; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        sums[o * in + i] += gv[r * out + o] * xv[r * in + i];
      }
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor result, Tensor::FromVector(sums, {out, in}));
  return result.To(g.dtype());
}

// Any number of leading dims, each in any layout (Partial too).
TEST(MatmulPropertyTest, LinearWeightGradSumsTheRowsOuterProducts) {
  CheckRandom(
      [](int64_t mesh_ndim, std::mt19937& rng) {
        const Shape lead = RandomShape(rng() % 4, 4, rng);
        Shape g = lead, x = lead;
        g.push_back(1 + rng() % 5);
        x.push_back(1 + rng() % 5);
        return MakeCase({g, x}, rng() % 4 == 0 ? DType::kF64 : DType::kF32,
                        mesh_ndim, rng);
      },
      Wrap([](const std::vector<DTensor>& in) {
        return ops::LinearWeightGrad(in[0], in[1]);
      }),
      WrapRef([](const std::vector<Tensor>& in) {
        return RowOuterProducts(in[0], in[1]);
      }),
      14);
}

TEST(MatmulPropertyTest, MmAndBmmMatchTheTensorLayer) {
  CheckRandom(
      [](int64_t mesh_ndim, std::mt19937& rng) {
        const int64_t m = 1 + rng() % 6, k = rng() % 7, n = 1 + rng() % 6;
        if (rng() % 2 == 0) {
          return MakeCase({Shape{m, k}, Shape{k, n}}, DType::kF32, mesh_ndim,
                          rng);
        }
        const int64_t b = 1 + rng() % 4;
        return MakeCase({Shape{b, m, k}, Shape{b, k, n}}, DType::kF32,
                        mesh_ndim, rng);
      },
      Wrap([](const std::vector<DTensor>& in) {
        return in[0].shape().size() == 2 ? ops::Mm(in[0], in[1])
                                         : ops::Bmm(in[0], in[1]);
      }),
      WrapRef(
          [](const std::vector<Tensor>& in) { return Matmul(in[0], in[1]); }),
      12);
}

TEST(MatmulPropertyTest, LinearWithAndWithoutBiasMatchesTheTensorLayer) {
  CheckRandom(
      [](int64_t mesh_ndim, std::mt19937& rng) {
        Shape x = RandomShape(rng() % 3, 4, rng);
        const int64_t in = 1 + rng() % 6, out = 1 + rng() % 6;
        x.push_back(in);
        std::optional<Shape> bias;
        if (rng() % 2 == 0) bias = Shape{out};
        return MakeCase({x, Shape{out, in}, bias}, DType::kF32, mesh_ndim, rng);
      },
      Wrap([](const std::vector<DTensor>& in) {
        return ops::Linear(in[0], in[1], in[2]);
      }),
      WrapRef([](const std::vector<Tensor>& in) {
        return Linear(in[0], in[1], in[2]);
      }),
      13);
}

TEST(MatmulPropertyTest, AddmmMatchesTheTensorLayer) {
  CheckRandom(
      [](int64_t mesh_ndim, std::mt19937& rng) {
        const int64_t m = 1 + rng() % 5, k = rng() % 6, n = 1 + rng() % 5;
        const std::vector<Shape> biases = {{n}, {m, n}, {1, n}, {m, 1}, {}};
        return MakeCase(
            {biases[rng() % biases.size()], Shape{m, k}, Shape{k, n}},
            DType::kF32, mesh_ndim, rng);
      },
      Wrap([](const std::vector<DTensor>& in) {
        // A bias of odd rank takes beta 0.5 and alpha 2, the others the
        // defaults (the reference decides alike).
        const bool scaled = in[0].shape().size() % 2 == 1;
        return scaled ? ops::Addmm(in[0], in[1], in[2], 0.5, 2.0)
                      : ops::Addmm(in[0], in[1], in[2]);
      }),
      WrapRef([](const std::vector<Tensor>& in) -> absl::StatusOr<Tensor> {
        const bool scaled = in[0].dim() % 2 == 1;
        absl::StatusOr<Tensor> product = Matmul(in[1], in[2]);
        if (!product.ok()) return product;
        if (!scaled) return Add(in[0], *product);
        absl::StatusOr<Tensor> bias = Mul(in[0], 0.5);
        absl::StatusOr<Tensor> scaled_product = Mul(*product, 2.0);
        return Add(*bias, *scaled_product);
      }),
      14);
}

// ---- The layouts users expect (1-D mesh of 4 unless said). ----

struct Outcome {
  std::string sharding;
  int64_t collectives = 0;
};

// Runs `call` on metadata-only DTensors of (shape, layout) pairs; the output
// layout and the collectives the call ran.
Outcome RunMeta(
    const std::vector<int64_t>& mesh_shape,
    const std::vector<std::pair<Shape, std::string>>& inputs,
    const std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)>&
        call) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create(mesh_shape);
  std::vector<DTensor> tensors;
  for (const auto& [shape, sharding] : inputs) {
    absl::StatusOr<DTensor> t = MetaTensor(runtime, mesh, shape, sharding);
    EXPECT_TRUE(t.ok()) << t.status();
    tensors.push_back(*t);
  }
  CommCounter counter;
  absl::StatusOr<DTensor> out;
  {
    CommCounter::Scope scope(counter);
    out = call(tensors);
  }
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return {out->sharding().ToString(), counter.total_collectives()};
}

std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)> MmCall() {
  return [](const std::vector<DTensor>& in) { return ops::Mm(in[0], in[1]); };
}

// Batch on dp and sequence on cp (the activations of a context-parallel
// step), out on tp: the weight gradient is Partial(sum) on dp and cp and
// sharded on tp, with no communication.
TEST(MatmulShardingTest, LinearWeightGradKeepsEveryLeadingShardLocal) {
  const Outcome o = RunMeta(
      {2, 2, 2}, {{{4, 8, 16}, "S(0),S(1),S(2)"}, {{4, 8, 32}, "S(0),S(1),R"}},
      [](const std::vector<DTensor>& in) {
        return ops::LinearWeightGrad(in[0], in[1]);
      });
  EXPECT_EQ(o.sharding, "P(sum),P(sum),S(0)");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, RowShardedTimesReplicatedIsRowSharded) {
  const Outcome o = RunMeta({4}, {{{12, 8}, "S(0)"}, {{8, 4}, "R"}}, MmCall());
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, ReplicatedTimesColumnShardedIsColumnSharded) {
  const Outcome o = RunMeta({4}, {{{12, 8}, "R"}, {{8, 4}, "S(1)"}}, MmCall());
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, ContractionShardedIsPartialSumWithoutCommunication) {
  const Outcome o =
      RunMeta({4}, {{{12, 8}, "S(1)"}, {{8, 4}, "S(0)"}}, MmCall());
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, ReplicatedTimesReplicatedStaysReplicated) {
  const Outcome o = RunMeta({4}, {{{12, 8}, "R"}, {{8, 4}, "R"}}, MmCall());
  EXPECT_EQ(o.sharding, "R");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, PartialTimesReplicatedStaysPartial) {
  EXPECT_EQ(RunMeta({4}, {{{12, 8}, "P"}, {{8, 4}, "R"}}, MmCall()).sharding,
            "P(sum)");
  EXPECT_EQ(
      RunMeta({4}, {{{12, 8}, "R"}, {{8, 4}, "P(avg)"}}, MmCall()).sharding,
      "P(avg)");
}

TEST(MatmulShardingTest, BatchDimsShardedAlikeStaySharded) {
  const Outcome o = RunMeta(
      {4}, {{{8, 6, 5}, "S(0)"}, {{8, 5, 3}, "S(0)"}},
      [](const std::vector<DTensor>& in) { return ops::Bmm(in[0], in[1]); });
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_EQ(o.collectives, 0);
  // A broadcast batch dim is Replicate in the operand that broadcasts it.
  const Outcome b = RunMeta(
      {4}, {{{8, 6, 5}, "S(0)"}, {{1, 5, 3}, "R"}},
      [](const std::vector<DTensor>& in) { return ops::Matmul(in[0], in[1]); });
  EXPECT_EQ(b.sharding, "S(0)");
  EXPECT_EQ(b.collectives, 0);
}

TEST(MatmulShardingTest, ChoosesPerMeshDimOnATwoDimMesh) {
  // dp x tp: rows on dp, the weight's columns on tp.
  const Outcome o =
      RunMeta({2, 4}, {{{16, 8}, "S(0),R"}, {{8, 12}, "R,S(1)"}}, MmCall());
  EXPECT_EQ(o.sharding, "S(0),S(1)");
  EXPECT_EQ(o.collectives, 0);
}

TEST(MatmulShardingTest, RowwiseLinearIsPartialWithALocalBias) {
  // x sharded on in-features, weight [out, in] sharded on in: the product is
  // a partial sum; the replicated bias joins it locally (one rank keeps it).
  const Outcome o =
      RunMeta({4}, {{{6, 8}, "S(1)"}, {{5, 8}, "S(1)"}, {{5}, "R"}},
              [](const std::vector<DTensor>& in) {
                return ops::Linear(in[0], in[1], in[2]);
              });
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_EQ(o.collectives, 0);
  // Colwise: weight sharded on out features, bias alike: S(last).
  const Outcome c =
      RunMeta({4}, {{{6, 8}, "R"}, {{5, 8}, "S(0)"}, {{5}, "S(0)"}},
              [](const std::vector<DTensor>& in) {
                return ops::Linear(in[0], in[1], in[2]);
              });
  EXPECT_EQ(c.sharding, "S(1)");
  EXPECT_EQ(c.collectives, 0);
}

// A data-parallel weight gradient dW = g^T @ x over the batch: each rank's
// rows give a P(sum) without communication, which one all-reduce completes
// (DistributedDataParallel's). With a replicated g (the seed of a summed
// loss) g^T is sliced locally; x is batch-sharded already, so that P(sum)
// comes from the caller's layouts and is not charged: completing instead
// would cost an all-gather of x now and still leave the gradient to update.
TEST(MatmulShardingTest, DataParallelWeightGradientIsOnePartialSum) {
  struct Case {
    std::vector<int64_t> mesh;
    std::string g_t;
    std::string x;
    std::string dw;
  };
  for (const Case& c :
       std::vector<Case>{{{4}, "S(1)", "S(0)", "P(sum)"},
                         {{4}, "R", "S(0)", "P(sum)"},
                         {{2, 2}, "S(1),S(0)", "S(0),R", "P(sum),S(0)"},
                         {{2, 2}, "R,S(0)", "S(0),R", "P(sum),S(0)"}}) {
    const std::vector<std::pair<Shape, std::string>> inputs = {{{4, 8}, c.g_t},
                                                               {{8, 16}, c.x}};
    const Outcome o = RunMeta(c.mesh, inputs, MmCall());
    EXPECT_EQ(o.sharding, c.dw) << c.g_t << " @ " << c.x;
    EXPECT_EQ(o.collectives, 0) << c.g_t << " @ " << c.x;
    // Read complete (Replicate where it was Partial): one all-reduce.
    const Outcome read =
        RunMeta(c.mesh, inputs,
                [](const std::vector<DTensor>& in) -> absl::StatusOr<DTensor> {
                  absl::StatusOr<DTensor> dw = ops::Mm(in[0], in[1]);
                  if (!dw.ok()) return dw;
                  std::vector<Placement> complete = dw->placements();
                  complete[0] = Placement::Replicate();
                  return dw->Redistribute(complete);
                });
    EXPECT_EQ(read.collectives, 1) << c.g_t << " @ " << c.x;
  }
}

TEST(MatmulShardingTest, MismatchedInnerDimsAreAnErrorNamingTheShapes) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor a = *MetaTensor(runtime, mesh, {4, 3}, "R");
  const DTensor b = *MetaTensor(runtime, mesh, {4, 2}, "R");
  const absl::StatusOr<DTensor> out = ops::Mm(a, b);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("[4, 3]"), std::string::npos)
      << out.status();
  const absl::StatusOr<DTensor> integer =
      ops::Mm(*MetaTensor(runtime, mesh, {4, 3}, "R", DType::kI64),
              *MetaTensor(runtime, mesh, {3, 2}, "R", DType::kI64));
  EXPECT_FALSE(integer.ok());
}

}  // namespace
}  // namespace dtensor
