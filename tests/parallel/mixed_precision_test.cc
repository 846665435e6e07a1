// Mixed precision (dtensor/parallel/mixed_precision.h): the plan key and its
// errors; 200 steps of the tiny Llama in bf16 against the f32 single-rank
// program, on one rank and on dp x tp in-process ranks (FSDP and
// replication); what the modules compute in and the gradients' dtype; the
// reductions in reduce_dtype (their bytes against a hand derivation); the
// checkpoint of the f32 masters and its resumed continuation.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/base/text_file.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/nn/llama.h"
#include "dtensor/parallel/checkpoint.h"
#include "dtensor/parallel/checkpoint_metadata.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/mixed_precision_policy.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/generator.h"
#include "gtest/gtest.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int kCurveSteps = 200;

// The loss-curve tolerances, absolute (bf16's error is relative to the
// logits, not to the loss). bf16 keeps 8 significant bits: rounding a value
// is off by up to u = 2^-8 relative. The loss logsumexp(z) - z_target moves
// by at most 2 max|dz| when the logits z move by dz, so rounding logits of
// magnitude up to ~12 (a trained model's confident predictions) alone moves
// a step's loss by up to 2 * 12 * u ~ 0.09: kStepAtol = 0.1 per step.
// Those errors are independent between steps (other batches), so a mean
// over kWindow steps is within 0.1 / sqrt(10) ~ 0.03 unless the two runs
// drift apart, which is what kWindowAtol bounds. Measured (CPU, one rank and
// dp x tp): at most 0.035 on a step and 0.012 on a 10-step mean; the loss
// falls from 4.3 to ~0.2, so a run that trains wrongly in bf16 (a gradient
// lost or never cast back, masters updated in bf16 so that small updates
// vanish) leaves the f32 curve by far more.
constexpr double kStepAtol = 0.1;
constexpr size_t kWindow = 10;
constexpr double kWindowAtol = 0.03;

// The model: 2 layers of width 32, vocabulary 64 (tp = 2 divides every
// dim), batch 4 x seq 8.
nn::LlamaConfig Config() {
  nn::LlamaConfig c;
  c.n_layers = 2;
  c.dim = 32;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 64;
  c.multiple_of = 16;
  c.max_seq_len = 16;
  c.init_std = 0.1;
  return c;
}
constexpr int64_t kBatch = 8;
constexpr int64_t kSeq = 16;

// A learnable batch for `step`: uniform tokens, each target the sum of its
// token and the one before (mod vocab), so that the model has to use
// attention and the loss falls well below ln(vocab).
absl::StatusOr<std::pair<Tensor, Tensor>> StepBatch(int step) {
  const int64_t vocab = Config().vocab_size;
  Generator generator(99, static_cast<uint64_t>(step));
  std::vector<int64_t> tokens, targets;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t i = 0; i < kSeq; ++i) {
      tokens.push_back(generator.NextU32() % vocab);
      const int64_t previous = i == 0 ? 0 : tokens[tokens.size() - 2];
      targets.push_back((tokens.back() + (previous % 2)) % vocab);
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(tokens, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(targets, {kBatch, kSeq}));
  return std::make_pair(std::move(t), std::move(y));
}

LlamaTrainerOptions TrainerOptions() {
  LlamaTrainerOptions options;
  options.config = Config();
  options.seed = 5;
  options.adamw.learning_rate = 3e-3;
  return options;
}

// Called on every rank after `step` with the step's phase counters.
using StepCheck = std::function<absl::Status(LlamaTrainer&, int step,
                                             const LlamaTrainer::PhaseComms&)>;

// Trains steps [first, first + steps) on every rank of `mesh`; rank 0's
// losses. `before` (if set) runs on each rank's trainer first (a checkpoint
// load), `after` after the last step (a save).
struct TrainRun {
  int first = 0;
  int steps = kCurveSteps;
  StepCheck check;
  std::function<absl::Status(LlamaTrainer&)> before;
  std::function<absl::Status(LlamaTrainer&)> after;
  Device device = Device::CPU();
};

absl::StatusOr<std::vector<double>> Train(const DeviceMesh& mesh,
                                          const Plan& plan,
                                          const TrainRun& run = TrainRun()) {
  std::vector<double> losses;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    LlamaTrainerOptions options = TrainerOptions();
    options.device = run.device;
    DT_ASSIGN_OR_RETURN(
        auto trainer,
        LlamaTrainer::Create(Runtime::ForRank(groups), mesh, plan, options));
    if (run.before) DT_RETURN_IF_ERROR(run.before(*trainer));
    std::vector<double> mine;
    for (int step = run.first; step < run.first + run.steps; ++step) {
      DT_ASSIGN_OR_RETURN(auto data, StepBatch(step));
      DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                          trainer->MakeBatch(data.first, data.second));
      LlamaTrainer::PhaseComms comms;
      DT_ASSIGN_OR_RETURN(DTensor loss, trainer->StepCounted(batch, comms));
      DT_ASSIGN_OR_RETURN(Tensor value, loss.FullTensor());
      mine.push_back(value.Item().value_or(NAN));
      if (run.check) DT_RETURN_IF_ERROR(run.check(*trainer, step, comms));
    }
    if (run.after) DT_RETURN_IF_ERROR(run.after(*trainer));
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      losses = std::move(mine);
    }
    return absl::OkStatus();
  }));
  return losses;
}

DeviceMesh OneRank() { return *DeviceMesh::Create({1}, {"r"}); }

// The f32 single-rank program's curve (computed once).
const std::vector<double>& ReferenceCurve() {
  static const std::vector<double>* curve = [] {
    absl::StatusOr<std::vector<double>> losses = Train(OneRank(), Plan());
    EXPECT_TRUE(losses.ok()) << losses.status();
    return new std::vector<double>(losses.ok() ? *losses
                                               : std::vector<double>());
  }();
  return *curve;
}

// The mean loss of steps [i, i + kWindow) of `losses`.
double WindowMean(const std::vector<double>& losses, size_t i) {
  double sum = 0;
  for (size_t k = i; k < i + kWindow; ++k) sum += losses[k];
  return sum / kWindow;
}

void ExpectNearReferenceCurve(const std::vector<double>& losses) {
  const std::vector<double>& reference = ReferenceCurve();
  ASSERT_EQ(losses.size(), reference.size());
  ASSERT_EQ(reference.size(), static_cast<size_t>(kCurveSteps));
  double worst_step = 0;
  double worst_window = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    const double diff = std::fabs(losses[i] - reference[i]);
    worst_step = std::max(worst_step, diff);
    EXPECT_LE(diff, kStepAtol)
        << "step " << i << ": bf16 " << losses[i] << ", f32 " << reference[i];
    if (i + kWindow > losses.size()) continue;
    const double expected = WindowMean(reference, i);
    const double window = std::fabs(WindowMean(losses, i) - expected);
    worst_window = std::max(worst_window, window);
    EXPECT_LE(window, kWindowAtol)
        << "steps " << i << ".." << i + kWindow - 1 << ": mean bf16 "
        << WindowMean(losses, i) << ", f32 " << expected;
  }
  // The curve learned: a run that did not train would pass the bounds
  // above too easily. And the run computed in bf16: f32 would match
  // exactly.
  EXPECT_LT(reference.back(), 0.1 * reference.front());
  EXPECT_GT(worst_step, 0);
  std::printf(
      "bf16 against f32 over %d steps: largest step difference %.4f, "
      "largest difference of %zu-step means %.4f\n",
      kCurveSteps, worst_step, kWindow, worst_window);
}

Plan WithPolicy(Plan plan, MixedPrecisionPolicy policy) {
  plan.mixed_precision = policy;
  return plan;
}

absl::StatusOr<Plan> ShippedPlan(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return absl::NotFoundError("TEST_SRCDIR is not set");
  return LoadPlanFile(
      absl::StrCat(srcdir, "/dtensor/parallel/plans/", name, ".json"));
}

TEST(MixedPrecisionPlanTest, ParsesThePolicy) {
  absl::StatusOr<Plan> plan = ParsePlan(
      R"({"dp": "fsdp", "mixed_precision": {"param_dtype": "bf16",
          "reduce_dtype": "f32", "output_dtype": "f32"}})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->mixed_precision.has_value());
  EXPECT_EQ(plan->mixed_precision->param_dtype, DType::kBF16);
  EXPECT_EQ(plan->mixed_precision->reduce_dtype, DType::kF32);
  EXPECT_EQ(plan->mixed_precision->output_dtype, DType::kF32);
  plan = ParsePlan(R"({"mixed_precision": {"param_dtype": "bf16"}})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->mixed_precision->reduce_dtype.has_value());
  EXPECT_FALSE(ParsePlan("{}")->mixed_precision.has_value());
}

TEST(MixedPrecisionPlanTest, BadValuesNameThemselves) {
  for (const auto& [json, named] :
       std::vector<std::pair<std::string, std::string>>{
           {R"({"param_dtype": "fp8"})", "fp8"},
           {R"({"reduce_dtype": "bfloat16"})", "bfloat16"},
           {R"({"param_dtype": "f16"})", "f16"},
           {R"({"output_dtype": "i32"})", "i32"},
           {R"({"compute_dtype": "bf16"})", "compute_dtype"},
           {R"({"param_dtype": 16})", "param_dtype"},
           {R"("bf16")", "mixed_precision"}}) {
    absl::StatusOr<Plan> plan =
        ParsePlan(absl::StrCat(R"({"mixed_precision": )", json, "}"));
    ASSERT_FALSE(plan.ok()) << json;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(plan.status().message(), named))
        << plan.status();
  }
  EXPECT_TRUE(absl::StrContains(
      ParseMixedPrecisionDType("--mixed-precision", "fp16").status().message(),
      "fp16"));
}

// A plan built in code with a dtype no policy takes fails at parallelize
// time, naming it, and leaves the model as it was.
TEST(MixedPrecisionPlanTest, CodePlanWithBadDTypeFailsAtParallelize) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = OneRank();
  auto model = nn::BuildLlama(Config(), runtime, mesh, nn::InitOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  MixedPrecisionPolicy policy;
  policy.param_dtype = DType::kBF16;
  policy.reduce_dtype = DType::kI32;
  const absl::Status status =
      ParallelizeModule(**model, mesh, WithPolicy(Plan(), policy));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "reduce_dtype i32"))
      << status;
  for (const nn::NamedModule& named : (*model)->NamedModules()) {
    EXPECT_EQ(named.module->num_input_hooks(), 0) << named.name;
  }
}

TEST(MixedPrecisionCurveTest, OneRankStaysNearTheF32Curve) {
  absl::StatusOr<std::vector<double>> losses =
      Train(OneRank(), WithPolicy(Plan(), ComputeIn(DType::kBF16)));
  ASSERT_TRUE(losses.ok()) << losses.status();
  ExpectNearReferenceCurve(*losses);
}

// dp x tp on in-process ranks, FSDP and replication: the same curve.
TEST(MixedPrecisionCurveTest, DpTimesTpStaysNearTheF32Curve) {
  for (const char* name : {"tp_sp_fsdp", "tp_sp_loss_parallel_dp"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Plan> plan = ShippedPlan(name);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::vector<double>> losses =
        Train(*ParseMeshFlag("dp=2,tp=2"),
              WithPolicy(*plan, ComputeIn(DType::kBF16)));
    ASSERT_TRUE(losses.ok()) << losses.status();
    ExpectNearReferenceCurve(*losses);
  }
}

// The same on a GPU (one rank; the gpu-tagged target): the device's bf16
// casts, kernels and AdamW against the CPU's f32 curve. Skips without a
// CUDA device.
TEST(MixedPrecisionCurveTest, OneGpuStaysNearTheF32Curve) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  TrainRun run;
  run.device = Device::CUDA(0);
  absl::StatusOr<std::vector<double>> losses =
      Train(OneRank(), WithPolicy(Plan(), ComputeIn(DType::kBF16)), run);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ExpectNearReferenceCurve(*losses);
}

// Inside a forward every parameter a module reads is in bf16 (FSDP's
// gathered copies and the casts of replicated and tp-sharded masters);
// outside it the slots hold the f32 masters, which are the optimizer's
// parameters; the gradients backward returns are f32, in the masters'
// shardings; the logits (output_dtype) and the loss are f32.
TEST(MixedPrecisionDTypeTest, ComputeInBf16GradientsAndMastersInF32) {
  for (const char* name : {"tp_sp_fsdp", "tp_dp"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Plan> plan = ShippedPlan(name);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const DeviceMesh mesh = *ParseMeshFlag("dp=2,tp=2");
    LocalCluster cluster(mesh.size());
    const absl::Status status =
        cluster.Run([&](ProcessGroups& groups) -> absl::Status {
          DT_ASSIGN_OR_RETURN(
              auto trainer,
              LlamaTrainer::Create(Runtime::ForRank(groups), mesh,
                                   WithPolicy(*plan, ComputeIn(DType::kBF16)),
                                   TrainerOptions()));
          int64_t seen = 0;
          for (const nn::NamedModule& named : trainer->model().NamedModules()) {
            // Added last, so it runs after the policy's and FSDP's hooks.
            named.module->AddInputHook(
                [module = named.module,
                 &seen](const DTensor& x) -> absl::StatusOr<DTensor> {
                  for (const nn::TensorSlot& slot : module->slots()) {
                    if (!slot.is_parameter) continue;
                    if (slot.value.dtype() != DType::kBF16) {
                      return absl::InternalError(absl::StrCat(
                          slot.name, " computes in ",
                          std::string(DTypeName(slot.value.dtype()))));
                    }
                    ++seen;
                  }
                  return x;
                });
          }
          DT_ASSIGN_OR_RETURN(auto data, StepBatch(0));
          DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                              trainer->MakeBatch(data.first, data.second));
          DT_ASSIGN_OR_RETURN(DTensor loss, trainer->Forward(batch));
          EXPECT_EQ(loss.dtype(), DType::kF32);
          EXPECT_EQ(seen, static_cast<int64_t>(trainer->parameters().size()));
          DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                              trainer->Backward(loss));
          const std::vector<nn::NamedSlot> slots =
              trainer->model().NamedParameters();
          for (size_t i = 0; i < grads.size(); ++i) {
            const DTensor& master = trainer->parameters()[i];
            EXPECT_EQ(master.dtype(), DType::kF32) << slots[i].name;
            EXPECT_EQ(slots[i].slot->value.id(), master.id()) << slots[i].name;
            EXPECT_EQ(grads[i].dtype(), DType::kF32) << slots[i].name;
            EXPECT_EQ(grads[i].ToLocal().dtype(), DType::kF32);
            EXPECT_EQ(grads[i].sharding(), master.sharding()) << slots[i].name;
          }
          return trainer->Update(grads);
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

// One step's collective bytes on dp = 2 against a hand derivation, P the
// model's parameters (every dim 0 is even, so each rank holds P / 2 of FSDP's
// shards): FSDP all-gathers each rank's P / 2 parameters in forward and again
// in backward, (2 - 1) * P / 2 * size(param_dtype) received each time, and
// reduce-scatters the gradients, (2 - 1) / 2 * P * size(reduce_dtype);
// replication all-reduces them, 2 (2 - 1) / 2 * P * size(reduce_dtype).
TEST(MixedPrecisionCommTest, BytesFollowTheDTypes) {
  struct Case {
    std::string plan;
    DType param_dtype;
    DType reduce_dtype;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"dp": "fsdp"})", DType::kF32, DType::kF32},
           {R"({"dp": "fsdp"})", DType::kBF16, DType::kF32},
           {R"({"dp": "fsdp"})", DType::kBF16, DType::kBF16},
           {R"({"dp": "replicate"})", DType::kBF16, DType::kF32},
           {R"({"dp": "replicate"})", DType::kBF16, DType::kBF16}}) {
    const std::string label =
        absl::StrCat(c.plan, " ", std::string(DTypeName(c.param_dtype)), "/",
                     std::string(DTypeName(c.reduce_dtype)));
    SCOPED_TRACE(label);
    MixedPrecisionPolicy policy;
    policy.param_dtype = c.param_dtype;
    policy.reduce_dtype = c.reduce_dtype;
    TrainRun run;
    run.steps = 1;
    run.check = [&](LlamaTrainer& trainer, int,
                    const LlamaTrainer::PhaseComms& comms) {
      const double p = static_cast<double>(trainer.model().NumParameters());
      const double param = static_cast<double>(ElementSize(c.param_dtype));
      const double reduce = static_cast<double>(ElementSize(c.reduce_dtype));
      const bool fsdp = absl::StrContains(c.plan, "fsdp");
      EXPECT_EQ(comms.forward.bytes(CommKind::kAllGather),
                fsdp ? p / 2 * param : 0);
      EXPECT_EQ(comms.backward.bytes(CommKind::kAllGather),
                fsdp ? p / 2 * param : 0);
      EXPECT_EQ(comms.backward.bytes(CommKind::kReduceScatter),
                fsdp ? p / 2 * reduce : 0);
      EXPECT_EQ(comms.backward.bytes(CommKind::kAllReduce),
                fsdp ? 0 : p * reduce);
      return absl::OkStatus();
    };
    absl::StatusOr<std::vector<double>> losses = Train(
        *ParseMeshFlag("dp=2"), WithPolicy(*ParsePlan(c.plan), policy), run);
    EXPECT_TRUE(losses.ok()) << losses.status();
  }
}

// The checkpoint stores the f32 masters (and f32 optimizer state), and a run
// resumed from it continues as the run that never stopped, bit for bit.
TEST(MixedPrecisionCheckpointTest, StoresF32MastersAndResumesTheSameRun) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/mixed_precision_ckpt");
  absl::StatusOr<Plan> shipped = ShippedPlan("tp_sp_fsdp");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  const Plan plan = WithPolicy(*shipped, ComputeIn(DType::kBF16));
  const DeviceMesh mesh = *ParseMeshFlag("dp=2,tp=2");
  TrainRun whole;
  whole.steps = 6;
  absl::StatusOr<std::vector<double>> uninterrupted = Train(mesh, plan, whole);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status();

  TrainRun first;
  first.steps = 3;
  first.after = [&](LlamaTrainer& trainer) -> absl::Status {
    DT_ASSIGN_OR_RETURN(nn::StateDict state, trainer.State());
    return SaveCheckpoint(dir, state);
  };
  ASSERT_TRUE(Train(mesh, plan, first).ok());
  absl::StatusOr<std::string> text =
      ReadTextFile(dir + "/metadata.json", kMaxCheckpointMetadataBytes);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<CheckpointMetadata> metadata = ParseMetadata(*text);
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  int64_t floating = 0;
  for (const auto& [key, stored] : metadata->tensors) {
    if (stored.dtype == DType::kI64) continue;  // Step counters.
    EXPECT_EQ(stored.dtype, DType::kF32) << key;
    ++floating;
  }
  EXPECT_GT(floating, 0);
  ASSERT_TRUE(metadata->tensors.contains("model.output.weight"));

  TrainRun second;
  second.first = 3;
  second.steps = 3;
  second.before = [&](LlamaTrainer& trainer) -> absl::Status {
    DT_ASSIGN_OR_RETURN(nn::StateDict state, trainer.State());
    DT_RETURN_IF_ERROR(LoadCheckpoint(dir, state));
    EXPECT_EQ(trainer.steps_taken(), 3);
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<double>> resumed = Train(mesh, plan, second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*resumed)[i], (*uninterrupted)[3 + i]) << "step " << 3 + i;
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
