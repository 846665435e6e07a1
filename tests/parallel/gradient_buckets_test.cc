// GradientBuckets (dtensor/parallel/gradient_buckets.h) against the unbucketed
// result: each gradient redistributed on its own to its parameter's layout.
// Random gradients Partial(sum) (bit-exact) and Partial(avg) (within f32
// rounding) over random mesh dims, random sizes and bucket sizes; the number
// of all-reduces derived from the sizes; FSDP gradients reduce-scattered in
// buckets; buckets started during the backward pass; accumulation that
// communicates once; argument errors.
#include "dtensor/parallel/gradient_buckets.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/comm_owner.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn_testing::RandomF32;
using nn_testing::Replicated;
using nn_testing::RunOnMesh;

// A gradient to bucket: its parameter's shape, the mesh dims it is Partial
// on and its reduce op.
struct GradCase {
  Shape shape;
  std::vector<int64_t> partial_dims;
};

// Random cases (the same on every rank: `seed` only).
std::vector<GradCase> RandomCases(int64_t mesh_ndim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<GradCase> cases(std::uniform_int_distribution<int>(1, 9)(rng));
  for (GradCase& c : cases) {
    c.shape = {std::uniform_int_distribution<int64_t>(1, 7)(rng),
               std::uniform_int_distribution<int64_t>(1, 5)(rng)};
    // A non-empty subset of the mesh dims.
    const int64_t mask = std::uniform_int_distribution<int64_t>(
        1, (int64_t{1} << mesh_ndim) - 1)(rng);
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      if (mask & (int64_t{1} << m)) c.partial_dims.push_back(m);
    }
  }
  return cases;
}

// The all-reduces GradientBuckets must issue for `cases` given in order:
// gradients of the same mesh dims share a bucket until it holds at least
// `bucket_bytes` (the first bucket of each set of dims: at least
// `first_bucket_bytes`, if smaller); then one all-reduce per bucket, partly
// filled ones too.
int64_t ExpectedAllReduces(const std::vector<GradCase>& cases,
                           int64_t bucket_bytes, int64_t first_bucket_bytes) {
  std::map<std::vector<int64_t>, int64_t> open_bytes;
  std::map<std::vector<int64_t>, int64_t> closed;
  int64_t count = 0;
  for (const GradCase& c : cases) {
    int64_t& bytes = open_bytes[c.partial_dims];
    bytes += NumElements(c.shape) * 4;
    const int64_t limit = closed[c.partial_dims] == 0
                              ? std::min(bucket_bytes, first_bucket_bytes)
                              : bucket_bytes;
    if (bytes >= limit) {
      ++count;
      ++closed[c.partial_dims];
      open_bytes.erase(c.partial_dims);
    }
  }
  return count + static_cast<int64_t>(open_bytes.size());
}

absl::StatusOr<DTensor> PartialGrad(std::shared_ptr<Runtime> runtime,
                                    const DeviceMesh& mesh, const GradCase& c,
                                    ReduceOp op, std::mt19937& rng) {
  std::vector<Placement> placements(mesh.ndim(), Placement::Replicate());
  for (int64_t m : c.partial_dims) placements[m] = Placement::Partial(op);
  FromLocalOptions options;
  options.global_shape = c.shape;
  return DTensor::FromLocal(runtime, RandomF32(c.shape, -1, 1, rng), mesh,
                            placements, options);
}

// |got - want| <= 2 ulp-ish for avg, equal bits for sum.
absl::Status Compare(const DTensor& got, const DTensor& want, bool exact,
                     size_t index) {
  if (got.sharding() != want.sharding()) {
    return absl::InternalError(absl::StrCat("gradient ", index, " layout ",
                                            got.sharding().ToString(), " vs ",
                                            want.sharding().ToString()));
  }
  const std::vector<float> a = got.ToLocal().ToVector<float>().value();
  const std::vector<float> b = want.ToLocal().ToVector<float>().value();
  if (a.size() != b.size()) return absl::InternalError("size mismatch");
  for (size_t i = 0; i < a.size(); ++i) {
    const float tol = exact ? 0.0f : 1e-6f * (1 + std::abs(b[i]));
    if (!(std::abs(a[i] - b[i]) <= tol)) {
      return absl::InternalError(absl::StrCat("gradient ", index, " element ",
                                              i, ": ", a[i], " vs ", b[i]));
    }
  }
  return absl::OkStatus();
}

// Each case's gradient was added under the owner &case: every all-reduce
// lists its owners' shares, each case once over all buckets with the bytes
// an all-reduce of its gradient alone receives, 2 (n - 1) / n times its
// size on n ranks; the shares add up to the bucket's bytes.
absl::Status CheckShares(const CommCounter& counter, const DeviceMesh& mesh,
                         const std::vector<GradCase>& cases) {
  std::map<const void*, double> bytes_of;
  for (const CommCounter::Event& event : counter.events()) {
    double sum = 0;
    for (const CommCounter::Event::Share& share : event.shares) {
      if (bytes_of.count(share.owner) != 0) {
        return absl::InternalError("an owner listed twice");
      }
      bytes_of[share.owner] = share.bytes;
      sum += share.bytes;
    }
    if (std::abs(sum - event.bytes) > 1e-9 * event.bytes) {
      return absl::InternalError(
          absl::StrCat("shares of ", sum, " bytes in ", event.bytes, " bytes"));
    }
  }
  for (const GradCase& c : cases) {
    double n = 1;
    for (int64_t m : c.partial_dims) n *= mesh.shape()[m];
    const double want = 2 * (n - 1) / n * NumElements(c.shape) * 4;
    if (bytes_of[&c] != want) {
      return absl::InternalError(
          absl::StrCat("a gradient of ", NumElements(c.shape),
                       " floats: ", bytes_of[&c], " bytes, want ", want));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRandomBuckets(std::shared_ptr<Runtime> runtime,
                                const DeviceMesh& mesh, uint32_t seed,
                                ReduceOp op) {
  const std::vector<GradCase> cases = RandomCases(mesh.ndim(), seed);
  // The bucket size is the same on every rank; the gradients' terms differ.
  std::mt19937 shared(seed);
  const int64_t bucket_bytes = std::max<int64_t>(
      std::uniform_int_distribution<int64_t>(4, 200)(shared) & ~int64_t{3}, 4);
  const int64_t first_bucket_bytes =
      std::uniform_int_distribution<int64_t>(1, 100)(shared);
  std::mt19937 rng(seed * 31 + runtime->rank());
  std::vector<DTensor> params;
  std::vector<DTensor> grads;
  for (const GradCase& c : cases) {
    DT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(c.shape, DType::kF32));
    DT_ASSIGN_OR_RETURN(DTensor param, Replicated(runtime, mesh, zeros));
    params.push_back(param);
    DT_ASSIGN_OR_RETURN(DTensor grad, PartialGrad(runtime, mesh, c, op, rng));
    grads.push_back(grad);
  }
  parallel::GradientBuckets buckets(params, bucket_bytes, first_bucket_bytes);
  CommCounter counter;
  std::vector<DTensor> got;
  {
    CommCounter::Scope counting(counter);
    for (size_t i = 0; i < grads.size(); ++i) {
      CommOwner::Scope owner(&cases[i]);
      DT_RETURN_IF_ERROR(buckets.Add(i, grads[i]));
    }
    DT_ASSIGN_OR_RETURN(got, buckets.Finish());
  }
  DT_RETURN_IF_ERROR(CheckShares(counter, mesh, cases));
  const int64_t expected =
      ExpectedAllReduces(cases, bucket_bytes, first_bucket_bytes);
  if (counter.count(CommKind::kAllReduce) != expected ||
      counter.total_collectives() != expected) {
    return absl::InternalError(
        absl::StrCat("seed ", seed, ": ", counter.total_collectives(),
                     " collectives, ", counter.count(CommKind::kAllReduce),
                     " all-reduces; expected ", expected, " all-reduces"));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    DT_ASSIGN_OR_RETURN(DTensor want,
                        grads[i].Redistribute(params[i].sharding()));
    DT_RETURN_IF_ERROR(Compare(got[i], want, op == ReduceOp::kSum, i));
  }
  return absl::OkStatus();
}

TEST(GradientBucketsTest, RandomBucketsEqualOneRedistributionEach) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2}, std::vector<int64_t>{4},
        std::vector<int64_t>{2, 2}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(absl::StrCat("mesh ", shape.size(), "-D of ", shape.back(),
                                  ", ", ReduceOpName(op), ", seed ", seed));
        const absl::Status status = RunOnMesh(
            shape,
            [&](std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh) {
              return CheckRandomBuckets(runtime, mesh, seed, op);
            });
        EXPECT_TRUE(status.ok()) << status;
      }
    }
  }
}

// FSDP: parameters sharded on mesh dim 0 (dp) as dim 0's innermost split,
// on a 2-D mesh also Shard(0) or Replicate on dim 1 (tp); gradients Partial
// on dp and laid out as their parameter on tp. Buckets reduce-scatter them
// (uneven rows included) to what each gradient's own redistribution gives;
// one reduce-scatter per bucket, a bucket closing at its size (counted from
// the local bytes given) or where the FSDP group (the CommOwner) changes.
absl::Status CheckFsdpBuckets(std::shared_ptr<Runtime> runtime,
                              const DeviceMesh& mesh, uint32_t seed,
                              ReduceOp op) {
  std::mt19937 shared(seed);  // The same on every rank.
  const int64_t bucket_bytes =
      std::uniform_int_distribution<int64_t>(1, 50)(shared) * 4;
  std::mt19937 rng(seed * 31 + runtime->rank());
  const int64_t n = std::uniform_int_distribution<int64_t>(1, 8)(shared);
  std::vector<DTensor> params, grads;
  std::vector<int64_t> local_bytes;
  // The FSDP group (CommOwner) each gradient is handed over under: runs of
  // consecutive gradients.
  std::vector<int> group_of(n);
  static const int kGroupTags[8] = {};
  for (int64_t i = 1; i < n; ++i) {
    group_of[i] = group_of[i - 1] + static_cast<int>(shared() % 2);
  }
  for (int64_t i = 0; i < n; ++i) {
    const Shape shape = {std::uniform_int_distribution<int64_t>(1, 9)(shared),
                         std::uniform_int_distribution<int64_t>(1, 4)(shared)};
    std::vector<Placement> placements(mesh.ndim(), Placement::Replicate());
    if (mesh.ndim() == 2 && shared() % 2 == 0) {
      placements[1] = Placement::Shard(0);
    }
    DT_ASSIGN_OR_RETURN(Sharding tp_only,
                        Sharding::FromPlacements(placements, 2));
    DT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(shape, DType::kF32));
    DT_ASSIGN_OR_RETURN(DTensor full, Replicated(runtime, mesh, zeros));
    DT_ASSIGN_OR_RETURN(DTensor param,
                        full.Redistribute(tp_only.WithShardsAppended({0}, 0)));
    placements[0] = Placement::Partial(op);
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(mesh, placements, shape, DType::kF32));
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime->rank()));
    FromLocalOptions options;
    options.global_shape = shape;
    DT_ASSIGN_OR_RETURN(
        DTensor grad,
        DTensor::FromLocal(runtime, RandomF32(block.shape, -1, 1, rng), mesh,
                           placements, options));
    params.push_back(param);
    grads.push_back(grad);
    local_bytes.push_back(block.numel() * 4);
  }
  // Rank 0's local bytes decide nothing alone: every rank's blocks of one
  // gradient have the same size here (Partial on dp, the tp block alike
  // across dp), so the bucket boundaries agree.
  // A bucket starts at its size limit, or before a gradient of another
  // group joins it.
  int64_t expected = 0, open = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (open > 0 && group_of[i] != group_of[i - 1]) {
      ++expected;
      open = 0;
    }
    open += local_bytes[i];
    if (open >= bucket_bytes) {
      ++expected;
      open = 0;
    }
  }
  if (open > 0) ++expected;
  parallel::GradientBuckets buckets(params, bucket_bytes, bucket_bytes);
  CommCounter counter;
  std::vector<DTensor> got;
  {
    CommCounter::Scope counting(counter);
    for (size_t i = 0; i < grads.size(); ++i) {
      CommOwner::Scope owner(&kGroupTags[group_of[i]]);
      DT_RETURN_IF_ERROR(buckets.Add(i, grads[i]));
    }
    DT_ASSIGN_OR_RETURN(got, buckets.Finish());
  }
  if (counter.count(CommKind::kReduceScatter) != expected ||
      counter.total_collectives() != expected) {
    return absl::InternalError(
        absl::StrCat("seed ", seed, ": ", counter.total_collectives(),
                     " collectives, ", counter.count(CommKind::kReduceScatter),
                     " reduce-scatters; expected ", expected));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    DT_ASSIGN_OR_RETURN(DTensor want,
                        grads[i].Redistribute(params[i].sharding()));
    DT_RETURN_IF_ERROR(Compare(got[i], want, op == ReduceOp::kSum, i));
  }
  return absl::OkStatus();
}

TEST(GradientBucketsTest, FsdpBucketsReduceScatterLikeOneRedistributionEach) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2}, std::vector<int64_t>{3},
        std::vector<int64_t>{2, 2}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(absl::StrCat("mesh ", absl::StrJoin(shape, "x"), ", ",
                                  ReduceOpName(op), ", seed ", seed));
        const absl::Status status = RunOnMesh(
            shape,
            [&](std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh) {
              return CheckFsdpBuckets(runtime, mesh, seed, op);
            });
        EXPECT_TRUE(status.ok()) << status;
      }
    }
  }
}

// loss = sum_i sum(x_i * p_i), x_i batch-sharded on a 1-D mesh of 2: each
// p_i's gradient is Partial(sum), ready in reverse order of use.
struct Model {
  std::vector<DTensor> params;
  DTensor loss;
  nn::GradientTape tape;
};

absl::Status BuildModel(std::shared_ptr<Runtime> runtime,
                        const DeviceMesh& mesh, Model& model) {
  std::mt19937 rng(5);  // The same on every rank.
  nn::GradientTape::Scope scope(model.tape);
  for (int i = 0; i < 6; ++i) {
    const int64_t n = 3 + i;
    DT_ASSIGN_OR_RETURN(DTensor p,
                        Replicated(runtime, mesh, RandomF32({n}, -1, 1, rng)));
    DT_ASSIGN_OR_RETURN(
        DTensor full, Replicated(runtime, mesh, RandomF32({4, n}, -1, 1, rng)));
    const Placement shard0[] = {Placement::Shard(0)};
    DT_ASSIGN_OR_RETURN(DTensor x, full.Redistribute(shard0));
    DT_ASSIGN_OR_RETURN(DTensor y, ops::Mul(x, p));
    DT_ASSIGN_OR_RETURN(DTensor term, ops::Sum(y, {0, 1}, false));
    if (model.loss.defined()) {
      DT_ASSIGN_OR_RETURN(model.loss, ops::Add(model.loss, term));
    } else {
      model.loss = term;
    }
    model.params.push_back(p);
  }
  return absl::OkStatus();
}

TEST(GradientBucketsTest, BackwardStartsBucketsAsGradientsBecomeReady) {
  const absl::Status status = RunOnMesh(
      {2},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        Model model;
        DT_RETURN_IF_ERROR(BuildModel(runtime, mesh, model));
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> want,
                            model.tape.Gradient(model.loss, model.params));
        // Buckets of at least 24 bytes: params 5..0 (8, 7, 6, 5, 4, 3 floats)
        // arrive in reverse order: 5, 4 and 3 fill one each, 2 and 1 share
        // one, 0 is left for Finish.
        parallel::GradientBuckets buckets(model.params, 24);
        std::vector<int64_t> started_at_call;
        nn::GradientOptions options;
        options.keep_propagated_shardings = true;
        options.on_gradient_ready = [&](size_t index, const DTensor& grad) {
          DT_RETURN_IF_ERROR(buckets.Add(index, grad));
          started_at_call.push_back(buckets.num_collectives());
          return absl::OkStatus();
        };
        DT_RETURN_IF_ERROR(
            model.tape.Gradient(model.loss, model.params, options).status());
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> got, buckets.Finish());
        if (buckets.num_collectives() != 5) {
          return absl::InternalError(
              absl::StrCat(buckets.num_collectives(), " all-reduces"));
        }
        if (started_at_call != std::vector<int64_t>{1, 2, 3, 3, 4, 4}) {
          return absl::InternalError(
              absl::StrCat("all-reduces started by each ready gradient: ",
                           absl::StrJoin(started_at_call, ",")));
        }
        for (size_t i = 0; i < got.size(); ++i) {
          DT_RETURN_IF_ERROR(Compare(got[i], want[i], /*exact=*/true, i));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// The tape's hand-over options: after_gradients_ready runs once per point
// where gradients became final (here each parameter at its own record, so
// after each one), and with release_handed_over the pass keeps no gradient it
// handed over (Gradient() returns them undefined; the caller's copy is the
// only one).
TEST(GradientBucketsTest, HandOverCallbacksAndRelease) {
  const absl::Status status = RunOnMesh(
      {2},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        for (const bool release : {false, true}) {
          Model model;
          DT_RETURN_IF_ERROR(BuildModel(runtime, mesh, model));
          std::vector<size_t> handed, after;
          std::vector<DTensor> kept;
          nn::GradientOptions options;
          options.keep_propagated_shardings = true;
          options.on_gradient_ready = [&](size_t index, const DTensor& grad) {
            handed.push_back(index);
            kept.push_back(grad);
            return absl::OkStatus();
          };
          options.after_gradients_ready = [&] {
            after.push_back(handed.size());
            return absl::OkStatus();
          };
          options.release_handed_over = release;
          DT_ASSIGN_OR_RETURN(
              std::vector<DTensor> got,
              model.tape.Gradient(model.loss, model.params, options));
          if (handed != std::vector<size_t>{5, 4, 3, 2, 1, 0} ||
              after != std::vector<size_t>{1, 2, 3, 4, 5, 6}) {
            return absl::InternalError(
                absl::StrCat("handed over ", absl::StrJoin(handed, ","),
                             "; after ", absl::StrJoin(after, ",")));
          }
          for (size_t i = 0; i < got.size(); ++i) {
            if (got[i].defined() == release) {
              return absl::InternalError(
                  absl::StrCat("release ", release, ": gradient ", i,
                               " defined ", got[i].defined()));
            }
          }
          for (const DTensor& grad : kept) {
            // Released: nothing but `kept` holds the local data.
            const long owners = grad.ToLocal().storage().use_count();
            if (release && owners != 1) {
              return absl::InternalError(
                  absl::StrCat("a released gradient has ", owners, " owners"));
            }
          }
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientBucketsTest, AccumulationCommunicatesOnceAtTheLastMicroBatch) {
  const absl::Status status = RunOnMesh(
      {2},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        std::mt19937 rng(11 + runtime->rank());
        const GradCase c{{3, 4}, {0}};
        DT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(c.shape, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor param, Replicated(runtime, mesh, zeros));
        DT_ASSIGN_OR_RETURN(DTensor g1,
                            PartialGrad(runtime, mesh, c, ReduceOp::kSum, rng));
        DT_ASSIGN_OR_RETURN(DTensor g2,
                            PartialGrad(runtime, mesh, c, ReduceOp::kSum, rng));
        parallel::GradientBuckets buckets({param}, 1 << 20);
        CommCounter counter;
        std::vector<DTensor> got;
        {
          CommCounter::Scope counting(counter);
          DT_RETURN_IF_ERROR(buckets.AccumulateWithoutSync({g1}));
          if (counter.total_collectives() != 0) {
            return absl::InternalError("accumulation communicated");
          }
          DT_RETURN_IF_ERROR(buckets.Add(0, g2));
          DT_ASSIGN_OR_RETURN(got, buckets.Finish());
        }
        if (counter.total_collectives() != 1) {
          return absl::InternalError(
              absl::StrCat(counter.total_collectives(), " collectives"));
        }
        DT_ASSIGN_OR_RETURN(DTensor sum, ops::Add(g1, g2));
        DT_ASSIGN_OR_RETURN(DTensor want, sum.Redistribute(param.sharding()));
        return Compare(got[0], want, /*exact=*/true, 0);
      });
  EXPECT_TRUE(status.ok()) << status;
}

// After a failed backward, Abandon starts none of the open buckets (ranks
// that failed at different points hold different ones), waits for a started
// one, and the next step sees only its own gradients.
TEST(GradientBucketsTest, AbandonStartsNoOpenBucket) {
  const absl::Status status = RunOnMesh(
      {2},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        std::mt19937 rng(23 + runtime->rank());
        const GradCase small{{2, 2}, {0}};
        const GradCase large{{8, 8}, {0}};
        DT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros({8, 8}, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor big, Replicated(runtime, mesh, zeros));
        DT_ASSIGN_OR_RETURN(zeros, Tensor::Zeros({2, 2}, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor little, Replicated(runtime, mesh, zeros));
        // 256 bytes: the large gradient fills a bucket, the small one not.
        parallel::GradientBuckets buckets({big, little}, 256);
        DT_ASSIGN_OR_RETURN(DTensor g_big, PartialGrad(runtime, mesh, large,
                                                       ReduceOp::kSum, rng));
        DT_ASSIGN_OR_RETURN(DTensor g_little, PartialGrad(runtime, mesh, small,
                                                          ReduceOp::kSum, rng));
        CommCounter counter;
        {
          CommCounter::Scope counting(counter);
          DT_RETURN_IF_ERROR(buckets.Add(0, g_big));
          DT_RETURN_IF_ERROR(buckets.Add(1, g_little));
          DT_RETURN_IF_ERROR(buckets.Abandon());
        }
        if (counter.total_collectives() != 1 ||
            buckets.num_collectives() != 1) {
          return absl::InternalError(absl::StrCat(
              "abandon: ", counter.total_collectives(), " collectives, ",
              buckets.num_collectives(), " all-reduces (want the full one)"));
        }
        DT_ASSIGN_OR_RETURN(DTensor next, PartialGrad(runtime, mesh, small,
                                                      ReduceOp::kSum, rng));
        DT_RETURN_IF_ERROR(buckets.Add(1, next));
        DT_ASSIGN_OR_RETURN(std::vector<DTensor> got, buckets.Finish());
        DT_ASSIGN_OR_RETURN(DTensor want, next.Redistribute(little.sharding()));
        DT_RETURN_IF_ERROR(Compare(got[1], want, /*exact=*/true, 0));
        const std::vector<float> host_values =
            got[0].ToLocal().ToVector<float>().value();
        for (float v : host_values) {
          if (v != 0) return absl::InternalError("abandoned gradient kept");
        }
        // Micro-batches accumulated before a failed step go with it: the
        // next step has only its own gradient.
        DT_RETURN_IF_ERROR(buckets.AccumulateWithoutSync({DTensor(), next}));
        DT_RETURN_IF_ERROR(buckets.Abandon());
        DT_RETURN_IF_ERROR(buckets.Add(1, next));
        DT_ASSIGN_OR_RETURN(got, buckets.Finish());
        return Compare(got[1], want, /*exact=*/true, 1);
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GradientBucketsTest, ErrorsNameTheGradient) {
  const absl::Status status = RunOnMesh(
      {1},
      [](std::shared_ptr<Runtime> runtime,
         const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros({2, 2}, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor param, Replicated(runtime, mesh, zeros));
        DT_ASSIGN_OR_RETURN(Tensor other, Tensor::Zeros({3}, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor wrong, Replicated(runtime, mesh, other));
        parallel::GradientBuckets buckets({param}, 64);
        absl::Status error = buckets.Add(1, param);
        if (error.ok() || !absl::StrContains(error.message(), "gradient 1")) {
          return absl::InternalError(
              absl::StrCat("out of range: ", error.ToString()));
        }
        error = buckets.Add(0, wrong);
        if (error.ok() || !absl::StrContains(error.message(), "[3]")) {
          return absl::InternalError(absl::StrCat("shape: ", error.ToString()));
        }
        DT_RETURN_IF_ERROR(buckets.Add(0, param));
        error = buckets.Add(0, param);
        if (error.ok() || !absl::StrContains(error.message(), "already")) {
          return absl::InternalError(absl::StrCat("twice: ", error.ToString()));
        }
        return buckets.Finish().status();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
