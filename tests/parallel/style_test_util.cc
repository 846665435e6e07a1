#include "tests/parallel/style_test_util.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/llama.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace parallel_testing {
namespace {

constexpr int64_t kBatch = 4, kSeq = 8;

// The batch layout: S(0) on "dp" when the mesh has it, else Replicate.
std::vector<Placement> BatchSharding(const DeviceMesh& mesh) {
  std::vector<Placement> sharding(mesh.ndim(), Placement::Replicate());
  absl::StatusOr<int64_t> dp = mesh.DimIndex("dp");
  if (dp.ok()) sharding[*dp] = Placement::Shard(0);
  return sharding;
}

// One rank's step; fills `mine`.
absl::Status RankStep(ProcessGroups& groups, const DeviceMesh& mesh,
                      const std::optional<parallel::Plan>& plan,
                      const AfterParallelize& after, StepResult& mine) {
  auto runtime = Runtime::ForRank(groups);
  const nn::LlamaConfig config = nn_testing::TinyConfig();
  DT_ASSIGN_OR_RETURN(auto model, nn::BuildLlama(config, runtime, mesh));
  if (plan) {
    DT_RETURN_IF_ERROR(parallel::ParallelizeModule(*model, mesh, *plan));
  }
  if (after) DT_RETURN_IF_ERROR(after(*model));
  std::vector<int64_t> ids, targets;
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    ids.push_back((i * 7 + 3) % config.vocab_size);
    targets.push_back((i * 5 + 1) % config.vocab_size);
  }
  DT_ASSIGN_OR_RETURN(Tensor ids_full, Tensor::FromVector(ids, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(Tensor targets_full,
                      Tensor::FromVector(targets, {kBatch * kSeq}));
  const std::vector<Placement> sharding = BatchSharding(mesh);
  DT_ASSIGN_OR_RETURN(DTensor tokens,
                      DTensor::Distribute(runtime, ids_full, mesh, sharding));
  DT_ASSIGN_OR_RETURN(DTensor labels, DTensor::Distribute(runtime, targets_full,
                                                          mesh, sharding));
  DTensor loss;
  DT_ASSIGN_OR_RETURN(
      ModelStep step,
      ForwardBackward(
          *model, tokens,
          [&](const DTensor& logits) -> absl::StatusOr<DTensor> {
            DT_ASSIGN_OR_RETURN(
                DTensor flat,
                ops::Reshape(logits, {kBatch * kSeq, config.vocab_size}));
            DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(flat, labels));
            return loss;
          }));
  mine.grads = std::move(step.grads);
  DT_ASSIGN_OR_RETURN(Tensor logits_full, step.output.FullTensor());
  DT_ASSIGN_OR_RETURN(Tensor loss_full, loss.FullTensor());
  mine.logits = logits_full.ToVector<float>().value();
  mine.loss = loss_full.ToVector<float>().value()[0];
  return absl::OkStatus();
}

}  // namespace

absl::Status InitializeAndParallelize(
    nn::Module& model, std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh,
    const std::optional<parallel::Plan>& plan) {
  DT_RETURN_IF_ERROR(nn::Initialize(model, std::move(runtime), mesh));
  if (!plan) return absl::OkStatus();
  return parallel::ParallelizeModule(model, mesh, *plan);
}

absl::StatusOr<DTensor> DistributeReplicated(std::shared_ptr<Runtime> runtime,
                                             const Tensor& full,
                                             const DeviceMesh& mesh) {
  return DTensor::Distribute(
      std::move(runtime), full, mesh,
      std::vector<Placement>(mesh.ndim(), Placement::Replicate()));
}

absl::StatusOr<std::map<std::string, std::vector<float>>> FullGradients(
    nn::GradientTape& tape, const DTensor& loss,
    const std::vector<nn::NamedSlot>& named) {
  std::vector<DTensor> params;
  for (const nn::NamedSlot& slot : named) params.push_back(slot.slot->value);
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(loss, params));
  std::map<std::string, std::vector<float>> full_grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (grads[i].sharding() != params[i].sharding()) {
      return absl::InternalError(absl::StrCat(
          "the gradient of ", named[i].name, " is ", grads[i].spec().ToString(),
          ", its parameter ", params[i].spec().ToString()));
    }
    DT_ASSIGN_OR_RETURN(Tensor full, grads[i].FullTensor());
    full_grads[named[i].name] = full.ToVector<float>().value();
  }
  return full_grads;
}

absl::StatusOr<ModelStep> ForwardBackward(nn::Module& model,
                                          const DTensor& input,
                                          const LossOf& loss_of) {
  // The parameters before the step: a gradient is taken for these values.
  const std::vector<nn::NamedSlot> named = model.NamedParameters();
  ModelStep step;
  nn::GradientTape tape;
  DTensor loss;
  {
    nn::GradientTape::Scope scope(tape);
    {
      CommCounter::Scope count(step.forward);
      DT_ASSIGN_OR_RETURN(step.output, model(input));
    }
    DT_ASSIGN_OR_RETURN(loss, loss_of(step.output));
  }
  DT_ASSIGN_OR_RETURN(step.grads, FullGradients(tape, loss, named));
  return step;
}

absl::StatusOr<StepResult> LlamaStep(const DeviceMesh& mesh,
                                     const std::optional<std::string>& plan,
                                     const AfterParallelize& after) {
  std::optional<parallel::Plan> parsed;
  if (plan) {
    DT_ASSIGN_OR_RETURN(parsed, parallel::ParsePlan(*plan));
  }
  return RankZeroResult<StepResult>(
      mesh, [&](ProcessGroups& groups, StepResult& mine) {
        return RankStep(groups, mesh, parsed, after, mine);
      });
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what, double abs_tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 5; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= abs_tol + 1e-4 * std::fabs(want[i]))) {
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
      ++failures;
    }
  }
}

void ExpectSameStep(const StepResult& got, const StepResult& want) {
  ExpectClose(got.logits, want.logits, "logits");
  EXPECT_NEAR(got.loss, want.loss, 1e-5 + 1e-5 * std::fabs(want.loss));
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [name, grad] : want.grads) {
    auto found = got.grads.find(name);
    ASSERT_NE(found, got.grads.end()) << name;
    ExpectClose(found->second, grad, name);
  }
}

DeviceMesh Mesh(std::vector<int64_t> shape, std::vector<std::string> names) {
  return *DeviceMesh::Create(std::move(shape), std::move(names));
}

}  // namespace parallel_testing
}  // namespace dtensor
