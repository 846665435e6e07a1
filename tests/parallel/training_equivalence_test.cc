// Training equivalence: for the same seed and data, N AdamW steps of the tiny
// Llama parallelized by every shipped plan, on 1-D and 2-D meshes of 1, 2 and
// 4 in-process ranks, give the losses, gradients and parameters of the same
// model trained on one rank with no plan (docs/comm_counts.md, "Training
// equivalence", states the tolerance and what the cases cover).
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/ops/sequence_blocks.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/testing/token_batch.h"
#include "gtest/gtest.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int kSteps = 4;

// How close a run must come to the f32 one-rank reference, per dtype.
// Losses: |run - reference| <= atol + rtol * |reference|. Gradients (every
// step) and parameters (after the last): the same elementwise bound, or, with
// `norm_rtol` > 0, per tensor ||run - reference||_2 <= norm_rtol *
// ||reference||_2 (bf16 rounds a near-zero element to a relative error of
// O(1), so only the tensor as a whole has a meaningful relative error).
struct Tolerances {
  double loss_rtol, loss_atol;
  double grad_rtol, grad_atol;
  double param_rtol, param_atol;
  double grad_norm_rtol = 0;
  double param_norm_rtol = 0;
};

// AdamW's update lr * m / (sqrt(v) + eps) is scale-free: for an element whose
// gradient stays near 0 (as small as its f32 rounding error) the update
// direction is noise. eps = 1e-5 (below every gradient that matters, ~1e-3)
// bounds that sensitivity by lr / eps; with the default 1e-8 such elements
// moved by up to lr / 70 in 4 steps.
constexpr double kLearningRate = 1e-2;
constexpr double kAdamEps = 1e-5;
// f32 tolerances. The parallel run sums the same terms in another order
// (partial sums per shard, then a collective), so losses and gradients differ
// by a few f32 ulps per reduction, and from step 1 on also by the parameter
// differences: measured at most ~1e-6 on the loss (~4.2) and ~1.4e-6 on a
// gradient element. A lost shard, a missing or doubled reduction or a wrong
// layout is off by O(1) relative, far above both. Parameters get an absolute
// tolerance of lr / 20 (measured below 5e-5; see kAdamEps): a wrong gradient
// moves most elements by O(lr) per step, and the gradients are compared
// directly besides.
constexpr Tolerances kF32 = {
    /*loss_rtol=*/1e-5,  /*loss_atol=*/1e-6,
    /*grad_rtol=*/1e-4,  /*grad_atol=*/1e-5,
    /*param_rtol=*/1e-4, /*param_atol=*/kLearningRate / 20};
// f32 on a GPU: the device kernels sum in other orders (tiles, warp
// shuffles, atomics in the embedding backward) and use the device's exp and
// log (a few ulps), so each bound is 10 times the CPU's.
constexpr Tolerances kF32OnGpu = {10 * kF32.loss_rtol,  10 * kF32.loss_atol,
                                  10 * kF32.grad_rtol,  10 * kF32.grad_atol,
                                  10 * kF32.param_rtol, 10 * kF32.param_atol};
// bf16 (parameters, activations and gradients; the f32 reference): the loss
// is a bf16 value (half an ulp near 4 is 0.4 %); gradient tensors differ by
// about 2 % at step 0 and, as the parameters drift apart, up to 12 % at step
// 3; parameters after 4 steps by 2 % (measured on both shapes, one rank and
// dp=2,tp=2, CPU). A lost shard or a missing or doubled reduction is off by
// 50-100 % of a gradient's norm, and shifts the loss of the next steps.
constexpr Tolerances kBf16 = {
    /*loss_rtol=*/1e-2,      /*loss_atol=*/0,
    /*grad_rtol=*/0,         /*grad_atol=*/0,
    /*param_rtol=*/0,        /*param_atol=*/0,
    /*grad_norm_rtol=*/0.25,
    /*param_norm_rtol=*/0.05};

// The model shapes. kEven: tp = 2 and 4 divide heads, kv heads, the hidden
// dim and the vocabulary; the batch and sequence split evenly over dp and
// (sequence parallel) tp. kUneven: 6 heads and 3 kv heads of dim 6 (for
// tp = 2 the kv projections split inside a head, for tp = 4 the query heads
// split 2/2/1/1 and inside heads), vocabulary 67 (embedding rows and
// loss-parallel logits 34/33 or 17/17/17/16), hidden dim 95, sequence
// 7 (sequence-parallel shards 4/3, 2/2/2/1) and batch 3 (dp shards 2/1 and
// 1/1/1/0, one rank with no rows). The engine's strategies are correct for
// every uneven split (docs/ops.md, "Uneven shards"), so every shipped plan
// "allows" all of these: none needs divisibility, at worst an op gathers.
enum class Shapes { kEven, kUneven };

struct ShapeSpec {
  nn::LlamaConfig config;
  int64_t batch;
  int64_t seq;
};

ShapeSpec SpecOf(Shapes shapes) {
  ShapeSpec spec;
  nn::LlamaConfig& c = spec.config;
  c.n_layers = 2;
  c.multiple_of = 16;
  c.max_seq_len = 16;
  c.init_std = 0.1;
  if (shapes == Shapes::kEven) {
    c.dim = 32;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.vocab_size = 64;
    spec.batch = 4;
    spec.seq = 8;
  } else {
    c.dim = 36;
    c.n_heads = 6;
    c.n_kv_heads = 3;
    c.vocab_size = 67;
    c.multiple_of = 1;
    c.ffn_dim_multiplier = 0.99;  // Hidden dim 95.
    spec.batch = 3;
    spec.seq = 7;
  }
  return spec;
}

std::string ShapesName(Shapes shapes) {
  return shapes == Shapes::kEven ? "Even" : "Uneven";
}

// Which part of a shipped plan runs: all of it on a 2-D dp x tp mesh, only its
// tp part (dp: none) on a 1-D tp mesh, only its dp part (tp: {}) on a 1-D dp
// mesh.
enum class Part { kAll, kTpOnly, kDpOnly };

struct Case {
  std::string plan;  // File name in parallel/plans/ without ".json".
  Part part;
  std::string mesh;  // A --mesh flag.
  Shapes shapes;
  // With a sequence order: the plan's context parallelism over the mesh's
  // "cp" dim, in that order.
  std::optional<ops::SequenceOrder> cp = std::nullopt;
};

// "tp_sp_dp", "tp_sp_tp_part", "fsdp_dp_part".
std::string PartLabel(const Case& c) {
  switch (c.part) {
    case Part::kAll:
      return c.plan;
    case Part::kTpOnly:
      return c.plan.substr(0, c.plan.rfind('_')) + "_tp_part";
    case Part::kDpOnly:
      return c.plan.substr(c.plan.rfind('_') + 1) + "_dp_part";
  }
  return c.plan;
}

// PartLabel, then "_cp_balanced" or "_cp_contiguous" with context
// parallelism.
std::string CaseLabel(const Case& c) {
  if (!c.cp.has_value()) return PartLabel(c);
  return PartLabel(c) + (*c.cp == ops::SequenceOrder::kBalanced
                             ? "_cp_balanced"
                             : "_cp_contiguous");
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string mesh;
  for (char ch : c.mesh) mesh += std::isalnum(ch) ? ch : '_';
  return absl::StrCat(CaseLabel(c), "_", mesh, "_", ShapesName(c.shapes));
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << CaseLabel(c) << " on " << c.mesh << ", " << ShapesName(c.shapes)
      << " shapes";
}

absl::StatusOr<Plan> LoadCasePlan(const Case& c) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return absl::NotFoundError("TEST_SRCDIR is not set");
  DT_ASSIGN_OR_RETURN(
      Plan plan, LoadPlanFile(absl::StrCat(srcdir, "/dtensor/parallel/plans/",
                                           c.plan, ".json")));
  if (c.part == Part::kTpOnly) plan.dp = DataParallel::kNone;
  if (c.part == Part::kDpOnly) plan.tp.clear();
  if (c.cp.has_value())
    plan.context_parallel = ContextParallelPlan{"cp", *c.cp};
  return plan;
}

// What one run observes: the loss and every parameter's full gradient at each
// step, and every full parameter after the last step (rank 0's view).
struct Trajectory {
  std::vector<double> losses;
  std::vector<std::vector<std::vector<float>>> grads;  // [step][param]
  std::vector<std::vector<float>> params;
};

absl::StatusOr<std::vector<float>> Gathered(const DTensor& x) {
  DT_ASSIGN_OR_RETURN(Tensor full, x.FullTensor());
  return full.ToVector<float>().value();
}

// Trains kSteps steps on every rank of `mesh` under `plan`, each rank's
// tensors on `device`, the model in `dtype`.
absl::StatusOr<Trajectory> Train(const DeviceMesh& mesh, const Plan& plan,
                                 Shapes shapes, Device device = Device::CPU(),
                                 DType dtype = DType::kF32) {
  const ShapeSpec spec = SpecOf(shapes);
  LlamaTrainerOptions options;
  options.device = device;
  options.dtype = dtype;
  options.config = spec.config;
  options.seed = 7;
  options.adamw.learning_rate = kLearningRate;
  options.adamw.eps = kAdamEps;
  Trajectory result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(
        auto trainer,
        LlamaTrainer::Create(Runtime::ForRank(groups), mesh, plan, options));
    Trajectory mine;
    for (int step = 0; step < kSteps; ++step) {
      // Uniform tokens from (1234, step): the same for every run.
      Generator generator(1234, static_cast<uint64_t>(step));
      DT_ASSIGN_OR_RETURN(
          testing::TokenBatch data,
          testing::UniformTokenBatch(generator, spec.config.vocab_size,
                                     spec.batch, spec.seq));
      DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                          trainer->MakeBatch(data.tokens, data.targets));
      DT_ASSIGN_OR_RETURN(DTensor loss, trainer->Forward(batch));
      DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, trainer->Backward(loss));
      DT_ASSIGN_OR_RETURN(std::vector<float> loss_value, Gathered(loss));
      mine.losses.push_back(loss_value.at(0));
      mine.grads.emplace_back();
      for (const DTensor& grad : grads) {
        DT_ASSIGN_OR_RETURN(std::vector<float> g, Gathered(grad));
        mine.grads.back().push_back(std::move(g));
      }
      DT_RETURN_IF_ERROR(trainer->Update(grads));
    }
    for (const DTensor& param : trainer->parameters()) {
      DT_ASSIGN_OR_RETURN(std::vector<float> p, Gathered(param));
      mine.params.push_back(std::move(p));
    }
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(mine);
    }
    return absl::OkStatus();
  }));
  return result;
}

// The reference: the same model and data on one rank, no plan.
const Trajectory& Reference(Shapes shapes) {
  static std::mutex mu;
  static auto* cache = new std::map<Shapes, Trajectory>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(shapes);
  if (it == cache->end()) {
    absl::StatusOr<Trajectory> reference =
        Train(*DeviceMesh::Create({1}, {"r"}), Plan(), shapes);
    EXPECT_TRUE(reference.ok()) << reference.status();
    it = cache
             ->emplace(shapes,
                       reference.ok() ? *std::move(reference) : Trajectory())
             .first;
  }
  return it->second;
}

// Whether `actual` matches `expected` within the tolerance; the message names
// the first element that does not.
::testing::AssertionResult Close(const std::vector<float>& actual,
                                 const std::vector<float>& expected,
                                 double rtol, double atol,
                                 const std::string& what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << actual.size() << " elements, expected "
           << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(double{actual[i]} - expected[i]);
    if (!(diff <= atol + rtol * std::fabs(double{expected[i]}))) {
      return ::testing::AssertionFailure()
             << what << "[" << i << "] = " << actual[i] << ", expected "
             << expected[i] << " (diff " << diff << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Whether ||actual - expected||_2 <= rtol * ||expected||_2.
::testing::AssertionResult CloseInNorm(const std::vector<float>& actual,
                                       const std::vector<float>& expected,
                                       double rtol, const std::string& what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << actual.size() << " elements, expected "
           << expected.size();
  }
  double diff = 0;
  double norm = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    diff +=
        (double{actual[i]} - expected[i]) * (double{actual[i]} - expected[i]);
    norm += double{expected[i]} * expected[i];
  }
  if (std::sqrt(diff) <= rtol * std::sqrt(norm)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << what << ": relative error " << std::sqrt(diff / norm)
         << " in norm, above " << rtol;
}

// Close, or CloseInNorm where `norm_rtol` is positive.
::testing::AssertionResult TensorClose(const std::vector<float>& actual,
                                       const std::vector<float>& expected,
                                       double rtol, double atol,
                                       double norm_rtol,
                                       const std::string& what) {
  if (norm_rtol > 0) return CloseInNorm(actual, expected, norm_rtol, what);
  return Close(actual, expected, rtol, atol, what);
}

// Expects `run`'s losses, gradients and final parameters to match those of
// the one-rank f32 reference of `shapes` within `tol`.
void ExpectMatchesReference(const Trajectory& run, Shapes shapes,
                            const Tolerances& tol = kF32) {
  const Trajectory& reference = Reference(shapes);
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  const ShapeSpec spec = SpecOf(shapes);
  auto names = nn::Transformer::Create(spec.config);
  ASSERT_TRUE(names.ok());
  std::vector<std::string> fqns;
  for (const nn::NamedSlot& named : (*names)->NamedParameters()) {
    fqns.push_back(named.name);
  }
  ASSERT_EQ(run.params.size(), fqns.size());
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_TRUE(Close({static_cast<float>(run.losses[step])},
                      {static_cast<float>(reference.losses[step])},
                      tol.loss_rtol, tol.loss_atol,
                      absl::StrCat("loss of step ", step)));
    for (size_t p = 0; p < fqns.size(); ++p) {
      EXPECT_TRUE(TensorClose(run.grads[step][p], reference.grads[step][p],
                              tol.grad_rtol, tol.grad_atol, tol.grad_norm_rtol,
                              absl::StrCat("step ", step, " grad ", fqns[p])));
    }
  }
  for (size_t p = 0; p < fqns.size(); ++p) {
    EXPECT_TRUE(TensorClose(
        run.params[p], reference.params[p], tol.param_rtol, tol.param_atol,
        tol.param_norm_rtol,
        absl::StrCat("param ", fqns[p], " after ", kSteps, " steps")));
  }
}

class TrainingEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingEquivalenceTest, MatchesOneRankWithoutPlan) {
  const Case& c = GetParam();
  absl::StatusOr<DeviceMesh> mesh = ParseMeshFlag(c.mesh);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  absl::StatusOr<Plan> plan = LoadCasePlan(c);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Trajectory> run = Train(*mesh, *plan, c.shapes);
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectMatchesReference(*run, c.shapes);
}

// The whole model in bf16 against the f32 reference within kBf16: one rank
// and the 2-D plans that shard parameters and the loss (FSDP's gathers and
// reduce-scatters and the vocab-parallel loss then run in bf16).
TEST(Bf16TrainingTest, MatchesTheF32ReferenceWithinBf16Tolerances) {
  for (Shapes shapes : {Shapes::kEven, Shapes::kUneven}) {
    for (const Case& c :
         {Case{"", Part::kAll, "r=1", shapes},
          Case{"tp_sp_fsdp", Part::kAll, "dp=2,tp=2", shapes},
          Case{"tp_sp_loss_parallel_dp", Part::kAll, "dp=2,tp=2", shapes}}) {
      SCOPED_TRACE(absl::StrCat(ShapesName(shapes), " ", c.mesh, " ", c.plan));
      absl::StatusOr<DeviceMesh> mesh = ParseMeshFlag(c.mesh);
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      absl::StatusOr<Plan> plan = c.plan.empty() ? Plan() : LoadCasePlan(c);
      ASSERT_TRUE(plan.ok()) << plan.status();
      absl::StatusOr<Trajectory> run =
          Train(*mesh, *plan, shapes, Device::CPU(), DType::kBF16);
      ASSERT_TRUE(run.ok()) << run.status();
      ExpectMatchesReference(*run, shapes, kBf16);
    }
  }
}

// The same steps with every tensor on a GPU (one rank), in f32 and in bf16,
// against the CPU's f32 reference within that dtype's device tolerances.
// Needs a CUDA device (built with --config=cuda; the gpu-tagged target);
// skips with a message otherwise.
TEST(OneGpuTrainingTest, MatchesTheCpuReference) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  for (Shapes shapes : {Shapes::kEven, Shapes::kUneven}) {
    for (const auto& [dtype, tolerances] :
         {std::pair{DType::kF32, kF32OnGpu}, std::pair{DType::kBF16, kBf16}}) {
      SCOPED_TRACE(
          absl::StrCat(ShapesName(shapes), " ", std::string(DTypeName(dtype))));
      absl::StatusOr<Trajectory> run =
          Train(*DeviceMesh::Create({1}, {"r"}), Plan(), shapes,
                Device::CUDA(0), dtype);
      ASSERT_TRUE(run.ok()) << run.status();
      ExpectMatchesReference(*run, shapes, tolerances);
    }
  }
}

// Context parallelism (ring attention over "cp") alone, beside dp (replicate
// or FSDP) and beside tp (with and without sequence parallelism): balanced
// order on the even shapes (sequence 8 over 2 * cp chunks), contiguous order
// on both (the uneven sequence of 7 splits 4/3).
void AddContextParallelCases(std::vector<Case>& cases) {
  constexpr auto kBalanced = ops::SequenceOrder::kBalanced;
  constexpr auto kContiguous = ops::SequenceOrder::kContiguous;
  cases.push_back(
      {"tp_dp", Part::kDpOnly, "dp=1,cp=4", Shapes::kEven, kBalanced});
  cases.push_back(
      {"tp_dp", Part::kDpOnly, "dp=2,cp=2", Shapes::kEven, kBalanced});
  cases.push_back(
      {"tp_fsdp", Part::kDpOnly, "dp=2,cp=2", Shapes::kEven, kContiguous});
  cases.push_back(
      {"tp_dp", Part::kTpOnly, "cp=2,tp=2", Shapes::kEven, kBalanced});
  cases.push_back(
      {"tp_sp_fsdp", Part::kAll, "dp=2,cp=2,tp=2", Shapes::kEven, kBalanced});
  cases.push_back(
      {"tp_dp", Part::kDpOnly, "dp=2,cp=2", Shapes::kUneven, kContiguous});
  cases.push_back(
      {"tp_sp_dp", Part::kAll, "dp=2,cp=2,tp=2", Shapes::kUneven, kContiguous});
}

// Every shipped plan on the 2-D meshes (4 ranks; 2 ranks with one dim of
// size 1), its tp part on 1-D tp meshes, its dp part on 1-D dp meshes; the
// each with the even and the uneven shapes.
std::vector<Case> AllCases() {
  const std::vector<std::string> families = {"tp", "tp_sp",
                                             "tp_sp_loss_parallel"};
  std::vector<Case> cases;
  for (Shapes shapes : {Shapes::kEven, Shapes::kUneven}) {
    for (const std::string& family : families) {
      for (const char* dp : {"_dp", "_fsdp"}) {
        for (const char* mesh : {"dp=2,tp=2", "dp=1,tp=2", "dp=2,tp=1"}) {
          cases.push_back({family + dp, Part::kAll, mesh, shapes});
        }
      }
      // The tp part is the same in _dp and _fsdp.
      for (const char* mesh : {"tp=2", "tp=4"}) {
        cases.push_back({family + "_dp", Part::kTpOnly, mesh, shapes});
      }
    }
    // The dp part is the same in every family.
    for (const char* plan : {"tp_dp", "tp_fsdp"}) {
      for (const char* mesh : {"dp=2", "dp=4"}) {
        cases.push_back({plan, Part::kDpOnly, mesh, shapes});
      }
    }
  }
  AddContextParallelCases(cases);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(ShippedPlans, TrainingEquivalenceTest,
                         ::testing::ValuesIn(AllCases()), CaseName);

}  // namespace
}  // namespace parallel
}  // namespace dtensor
