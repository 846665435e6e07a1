// cross_entropy over N-d logits [d0, ..., dk, C] against targets [d0, ...,
// dk] (dtensor/ops/vocab_ops.h), against plain loops over the rows in double
// written here: random meshes (1-D to 3-D), random layouts of every leading
// dim, uneven sizes, every strategy of the registry op; the class dim sharded
// under LossParallelScope with the leading dims sharded too, its loss and
// gradient (GradientTape) checked on in-process ranks and its collectives
// counted; metadata-only (explain's view) counting the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// What the loops below compute from full logits and targets.
struct Reference {
  std::vector<double> losses;  // per row, 0 where ignored
  std::vector<double> lse;     // per row
  std::vector<double> grad;    // d(loss)/d(logits) for a mean or sum
  int64_t count = 0;
  double total = 0;
};

// Row i of the logits is elements [i * C, (i + 1) * C) of the row-major
// data: the leading dims flattened.
absl::StatusOr<Reference> Loops(const Tensor& logits, const Tensor& target,
                                int64_t ignore_index, Reduction reduction) {
  DT_ASSIGN_OR_RETURN(Tensor x, logits.To(DType::kF64));
  DT_ASSIGN_OR_RETURN(Tensor t, target.To(DType::kI64));
  DT_ASSIGN_OR_RETURN(const std::vector<double> values,
                      x.Contiguous().ToVector<double>());
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> labels,
                      t.Contiguous().ToVector<int64_t>());
  const int64_t c = logits.shape().back();
  const int64_t rows = static_cast<int64_t>(labels.size());
  Reference ref;
  ref.losses.assign(rows, 0.0);
  ref.lse.assign(rows, 0.0);
  ref.grad.assign(rows * c, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    double max = -INFINITY;
    for (int64_t j = 0; j < c; ++j) max = std::max(max, values[i * c + j]);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(values[i * c + j] - max);
    ref.lse[i] = max + std::log(sum);
    if (labels[i] == ignore_index) continue;
    ref.losses[i] = ref.lse[i] - values[i * c + labels[i]];
    ref.total += ref.losses[i];
    ++ref.count;
  }
  // Unnormalised for a sum; divided by the count for a mean.
  const double scale = reduction == Reduction::kMean ? 1.0 / ref.count : 1.0;
  for (int64_t i = 0; i < rows; ++i) {
    if (labels[i] == ignore_index) continue;
    for (int64_t j = 0; j < c; ++j) {
      const double p = std::exp(values[i * c + j] - ref.lse[i]);
      ref.grad[i * c + j] = scale * (p - (j == labels[i] ? 1.0 : 0.0));
    }
  }
  return ref;
}

// The registry op's three outputs (loss, count, log-sum-exp) from the loops.
absl::StatusOr<std::vector<Tensor>> ReferenceOutputs(const Full& in,
                                                     Reduction reduction,
                                                     int64_t ignore_index) {
  DT_ASSIGN_OR_RETURN(const Reference ref,
                      Loops(in[0], in[1], ignore_index, reduction));
  Tensor loss;
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(loss, Tensor::FromVector(ref.losses, in[1].shape()));
  } else {
    const double value =
        reduction == Reduction::kSum
            ? ref.total
            : (ref.count == 0 ? std::nan("") : ref.total / ref.count);
    loss = Tensor::Scalar(value, DType::kF64);
  }
  DT_ASSIGN_OR_RETURN(loss, loss.To(in[0].dtype()));
  DT_ASSIGN_OR_RETURN(Tensor lse, Tensor::FromVector(ref.lse, in[1].shape()));
  DT_ASSIGN_OR_RETURN(
      lse, lse.To(in[0].dtype() == DType::kF64 ? DType::kF64 : DType::kF32));
  return std::vector<Tensor>{
      std::move(loss), Tensor::Scalar(ref.count, DType::kI64), std::move(lse)};
}

// Targets in [0, classes), a quarter of them `ignore_index`.
Tensor RandomTargets(const Shape& shape, int64_t classes, int64_t ignore_index,
                     std::mt19937& rng) {
  std::vector<int64_t> values(NumElements(shape));
  for (int64_t& v : values) {
    v = rng() % 4 == 0 ? ignore_index : static_cast<int64_t>(rng() % classes);
  }
  const DType dtype = rng() % 2 == 0 ? DType::kI64 : DType::kI32;
  return *Tensor::FromVector(values, shape)->To(dtype);
}

// A random call on logits of 1 to 5 dims (0 to 4 leading dims of sizes 0 to
// 5, so uneven over most meshes), 1 to 7 classes, each reduction; the
// reference is the loss alone or, with `all_outputs`, every output.
OpCall NdCall(std::mt19937& rng, bool all_outputs) {
  Shape shape = RandomShape(rng() % 5, 5, rng);
  const int64_t classes = 1 + rng() % 7;
  const Shape target_shape = shape;
  shape.push_back(classes);
  const Reduction reduction = static_cast<Reduction>(rng() % 3);
  const int64_t ignore_index =
      rng() % 2 == 0 ? -100 : static_cast<int64_t>(rng() % classes);
  OpCall c;
  c.op = "cross_entropy";
  c.description =
      absl::StrCat(c.op, " ", ShapeToString(shape), " reduction ",
                   static_cast<int>(reduction), " ignore_index ", ignore_index);
  c.inputs = {RandomTensor(shape, rng() % 3 == 0 ? DType::kF64 : DType::kF32,
                           -3, 3, rng),
              RandomTargets(target_shape, classes, ignore_index, rng)};
  c.args.AddInt(static_cast<int64_t>(reduction)).AddInt(ignore_index);
  c.call = OneOutput([reduction, ignore_index](const In& in) {
    return ops::CrossEntropy(in[0], in[1], reduction, ignore_index);
  });
  c.reference = [reduction, ignore_index,
                 all_outputs](const Full& in) -> absl::StatusOr<Full> {
    DT_ASSIGN_OR_RETURN(Full outputs,
                        ReferenceOutputs(in, reduction, ignore_index));
    if (!all_outputs) outputs.resize(1);
    return outputs;
  };
  return c;
}

// Random meshes and layouts (Partial inputs too) through ops::CrossEntropy,
// and every strategy of the registry op with all three outputs.
TEST(CrossEntropyNdPropertyTest, MatchesLoopsOverTheRows) {
  const absl::Status status = CheckOpProperties(
      41, [](std::mt19937& rng) { return NdCall(rng, false); }, 1e-4,
      {/*sharding_rounds=*/6, 10, 24, /*max_strategies=*/48},
      [](std::mt19937& rng) { return NdCall(rng, true); });
  EXPECT_TRUE(status.ok()) << status;
}

// One loss-parallel case: the logits' placements (the class dim, the last,
// sharded on at least one mesh dim), the target's following them (Replicate
// where the classes are sharded).
struct LossParallelCase {
  std::vector<int64_t> mesh;
  Shape shape;
  std::vector<Placement> logits;
  Reduction reduction;

  std::string Name() const {
    std::vector<std::string> p;
    for (const Placement& x : logits) p.push_back(x.ToString());
    return absl::StrCat("mesh ", absl::StrJoin(mesh, "x"), " logits ",
                        ShapeToString(shape), " ", absl::StrJoin(p, ","),
                        " reduction ", static_cast<int>(reduction));
  }
};

// Every mesh dim Replicate or sharding a random dim; one random mesh dim
// shards the classes. Shapes uneven on most meshes.
LossParallelCase DrawLossParallelCase(std::mt19937& rng) {
  LossParallelCase c;
  c.mesh = testing_util::RandomMeshShape(rng);
  c.shape = RandomShape(1 + rng() % 3, 5, rng);
  for (int64_t& d : c.shape) d = std::max<int64_t>(d, 1);
  c.shape.push_back(3 + rng() % 9);
  const int64_t rank = static_cast<int64_t>(c.shape.size());
  for (size_t m = 0; m < c.mesh.size(); ++m) {
    const int64_t choice = rng() % (rank + 1);
    c.logits.push_back(choice == rank ? Placement::Replicate()
                                      : Placement::Shard(choice));
  }
  c.logits[rng() % c.mesh.size()] = Placement::Shard(rank - 1);
  c.reduction = rng() % 2 == 0 ? Reduction::kMean : Reduction::kSum;
  return c;
}

absl::Status ExpectClose(const std::vector<double>& got,
                         const std::vector<double>& want,
                         const std::string& what) {
  if (got.size() != want.size()) {
    return absl::InternalError(absl::StrCat(what, ": ", got.size(),
                                            " values, expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-9 + 1e-9 * std::fabs(want[i]))) {
      return absl::InternalError(
          absl::StrCat(what, "[", i, "] = ", got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

// The collectives the forward may issue: the row max and the (sum of exp,
// target logit) over the class dims, and a mean's (sum, count) over the
// mesh dims sharding a leading dim; nothing moves the logits.
int64_t ExpectedForwardAllReduces(const LossParallelCase& c) {
  bool rows_sharded = false;
  for (const Placement& p : c.logits) {
    rows_sharded |=
        p.is_shard() && p.dim() + 1 < static_cast<int64_t>(c.shape.size());
  }
  return 2 + (c.reduction == Reduction::kMean && rows_sharded ? 1 : 0);
}

// Runs the case on in-process ranks under LossParallelScope with a tape and
// checks the loss, d loss / d logits (f64, against the loops) and the
// collectives: forward only the kernel's all-reduces, backward none.
void CheckLossParallel(const LossParallelCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t classes = c.shape.back();
  const Tensor logits = RandomTensor(c.shape, DType::kF64, -3, 3, rng);
  const Shape target_shape(c.shape.begin(), c.shape.end() - 1);
  // Redrawn until some target counts (a mean of none is NaN).
  Tensor target;
  Reference ref;
  do {
    target = RandomTargets(target_shape, classes, -100, rng);
    ref = *Loops(logits, target, -100, c.reduction);
  } while (ref.count == 0);
  const double want_loss =
      c.reduction == Reduction::kSum ? ref.total : ref.total / ref.count;
  std::vector<Placement> target_placements = c.logits;
  for (Placement& p : target_placements) {
    if (p.is_shard() && p.dim() == static_cast<int64_t>(c.shape.size()) - 1) {
      p = Placement::Replicate();
    }
  }
  const DeviceMesh mesh = *DeviceMesh::Create(c.mesh);
  LocalCluster cluster(mesh.size());
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(
            DTensor x, DTensor::Distribute(runtime, logits, mesh, c.logits));
        DT_ASSIGN_OR_RETURN(
            DTensor t,
            DTensor::Distribute(runtime, target, mesh, target_placements));
        nn::GradientTape tape;
        CommCounter forward, backward;
        DTensor loss;
        {
          nn::GradientTape::Scope record(tape);
          CommCounter::Scope count(forward);
          ops::LossParallelScope loss_parallel;
          DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(x, t, c.reduction));
        }
        std::vector<DTensor> grads;
        {
          CommCounter::Scope count(backward);
          DT_ASSIGN_OR_RETURN(grads, tape.Gradient(loss, {x}));
        }
        const int64_t all_reduces = ExpectedForwardAllReduces(c);
        if (forward.count(CommKind::kAllReduce) != all_reduces ||
            forward.total_collectives() != all_reduces ||
            backward.total_collectives() != 0) {
          return absl::InternalError(absl::StrCat(
              "forward ", forward.total_collectives(), " collectives (",
              forward.count(CommKind::kAllReduce), " all-reduces), expected ",
              all_reduces, "; backward ", backward.total_collectives()));
        }
        if (grads[0].sharding() != x.sharding()) {
          return absl::InternalError(
              absl::StrCat("gradient ", grads[0].spec().ToString()));
        }
        DT_ASSIGN_OR_RETURN(const Tensor full_loss, loss.FullTensor());
        DT_ASSIGN_OR_RETURN(const double got_loss, full_loss.Item());
        DT_RETURN_IF_ERROR(ExpectClose({got_loss}, {want_loss}, "loss"));
        DT_ASSIGN_OR_RETURN(const Tensor full_grad, grads[0].FullTensor());
        DT_ASSIGN_OR_RETURN(const std::vector<double> g,
                            full_grad.Contiguous().ToVector<double>());
        return ExpectClose(g, ref.grad, "d loss / d logits");
      });
  EXPECT_TRUE(status.ok()) << c.Name() << ": " << status;
}

TEST(CrossEntropyNdLossParallelTest,
     RandomLayoutsMatchLoopsWithoutMovingLogits) {
  std::mt19937 rng(43);
  for (int i = 0; i < 24; ++i) {
    const LossParallelCase c = DrawLossParallelCase(rng);
    CheckLossParallel(c, 100 + i);
  }
}

// The Llama layout of a context-parallel step: logits [batch, seq, vocab]
// with the batch on dp, the sequence on cp and the vocab on tp.
TEST(CrossEntropyNdLossParallelTest, BatchOnDpSequenceOnCpVocabOnTp) {
  for (const Reduction reduction : {Reduction::kMean, Reduction::kSum}) {
    CheckLossParallel(
        {{2, 2, 2},
         {3, 7, 11},
         {Placement::Shard(0), Placement::Shard(1), Placement::Shard(2)},
         reduction},
        7);
  }
}

// Metadata-only (explain's view) of the same layout at Llama scale: logits
// [8, 4097, 32000] f32 on dp=2 x cp=4 x tp=4. The batch (4 rows per rank)
// and sequence (1025 on the first ranks: 4097 over 4) give 4100 rows per
// rank: the max all-reduces 4100 floats over tp, the (sum of exp, target
// logit) 8200, and the mean's (sum, count) 16 bytes over dp+cp. Without the
// scope the cheapest strategy keeps the logits in place as well.
TEST(CrossEntropyNdShardingTest, MetadataOnlyCountsTheKernelsReductions) {
  const Shape shape = {8, 4097, 32000};
  for (const bool scoped : {true, false}) {
    const MetaOutcome o = RunOnMeta(
        {2, 4, 4},
        {{shape, "S(0),S(1),S(2)"}, {{8, 4097}, "S(0),S(1),R", DType::kI64}},
        [scoped](const In& in) -> absl::StatusOr<DTensor> {
          if (!scoped) return ops::CrossEntropy(in[0], in[1]);
          ops::LossParallelScope loss_parallel;
          return ops::CrossEntropy(in[0], in[1]);
        });
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.sharding, "R,R,R");
    std::vector<std::vector<int64_t>> dims;
    for (const CommCounter::Event& e : o.comms.events()) {
      if (e.kind == CommKind::kLocal) continue;
      EXPECT_EQ(e.kind, CommKind::kAllReduce);
      dims.push_back(e.mesh_dims);
    }
    EXPECT_EQ(dims, (std::vector<std::vector<int64_t>>{{2}, {2}, {0, 1}}))
        << "scoped " << scoped;
    const auto ring = [](int64_t n, double bytes) {
      return 2.0 * (n - 1) / n * bytes;
    };
    EXPECT_DOUBLE_EQ(o.comms.total_bytes(),
                     ring(4, 4100 * 4) + ring(4, 8200 * 4) + ring(8, 16));
  }
}

// Per-row losses keep every leading dim's sharding, with no collective.
TEST(CrossEntropyNdShardingTest, PerRowLossesKeepTheLeadingShardings) {
  const MetaOutcome o = RunOnMeta(
      {2, 3}, {{{4, 9, 16}, "S(0),S(1)"}, {{4, 9}, "S(0),S(1)", DType::kI64}},
      [](const In& in) {
        return ops::CrossEntropy(in[0], in[1], Reduction::kNone);
      });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0),S(1)");
  EXPECT_EQ(o.comms.total_collectives(), 0);
}

TEST(CrossEntropyNdErrorTest, MismatchedLeadingDimsAreNamed) {
  const MetaOutcome o =
      RunOnMeta({2}, {{{4, 5, 6}, "R"}, {{4, 6}, "R", DType::kI64}},
                [](const In& in) { return ops::CrossEntropy(in[0], in[1]); });
  ASSERT_FALSE(o.status.ok());
  EXPECT_NE(o.status.message().find("[4, 6]"), std::string::npos) << o.status;
  EXPECT_NE(o.status.message().find("[4, 5, 6]"), std::string::npos)
      << o.status;
}

}  // namespace
}  // namespace dtensor
