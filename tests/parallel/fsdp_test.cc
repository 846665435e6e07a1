// Data parallelism from the plan's "dp": replicate and fsdp, alone and with
// tensor parallelism on 2-D meshes: one forward and backward step equals the
// one-rank model with the same seed (every parameter's gradient, in its
// parameter's layout); FSDP gathers each parameter before its module's
// Forward and frees the copy after (observed through weak handles on the
// storage while the tape is alive); the collectives of an FSDP step, counted
// under a metadata-only runtime; grouped FSDP with prefetch against plain
// FSDP, in values and in the order of its collectives.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/optim_sgd.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/storage.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"
#include "tests/parallel/style_test_util.h"

namespace dtensor {
namespace parallel_testing {
namespace {

constexpr char kTp[] = R"("tp": {
  "layers.*.attention.wq": "colwise", "layers.*.attention.wk": "colwise",
  "layers.*.attention.wv": "colwise", "layers.*.attention.wo": "rowwise",
  "layers.*.feed_forward.w1": "colwise", "layers.*.feed_forward.w3": "colwise",
  "layers.*.feed_forward.w2": "rowwise", "tok_embeddings": "rowwise",
  "output": "loss_parallel"})";

std::string Plan(const std::string& dp) {
  return absl::StrCat("{", kTp, R"(, "dp": ")", dp, R"("})");
}

TEST(FsdpTest, ReplicateAndFsdpOn2DMeshesMatchOneRank) {
  auto one = LlamaStep(Mesh({1}, {"tp"}), std::nullopt);
  ASSERT_TRUE(one.ok()) << one.status();
  for (const char* dp : {"replicate", "fsdp"}) {
    for (int64_t tp : {1, 2}) {
      SCOPED_TRACE(absl::StrCat(dp, " dp=2 tp=", tp));
      auto many = LlamaStep(Mesh({2, tp}, {"dp", "tp"}), Plan(dp));
      ASSERT_TRUE(many.ok()) << many.status();
      ExpectSameStep(*many, *one);
    }
  }
  // Without tensor parallelism: a 1-D dp mesh of 4.
  auto fsdp = LlamaStep(Mesh({4}, {"dp"}), R"({"dp": "fsdp"})");
  ASSERT_TRUE(fsdp.ok()) << fsdp.status();
  ExpectSameStep(*fsdp, *one);
}

// What one rank saw of FSDP in a forward pass on dp=2 x tp=2.
struct Seen {
  int64_t gathered = 0;        // Parameters its modules' Forwards saw.
  int64_t gathered_on_dp = 0;  // ... of them Replicate on dp.
  int64_t sharded_after = 0;   // Slots S(0) on dp after each Forward.
  int64_t alive_after_forward = 0;
  int64_t alive_after_backward = 0;
};

absl::Status ObserveFsdp(ProcessGroups& groups, const DeviceMesh& mesh,
                         Seen& seen) {
  auto runtime = Runtime::ForRank(groups);
  DT_ASSIGN_OR_RETURN(parallel::Plan plan, parallel::ParsePlan(Plan("fsdp")));
  DT_ASSIGN_OR_RETURN(auto model,
                      nn::BuildLlama(nn_testing::TinyConfig(), runtime, mesh));
  DT_RETURN_IF_ERROR(parallel::ParallelizeModule(*model, mesh, plan));
  std::vector<DTensor> params;
  for (const nn::NamedSlot& named : model->NamedParameters()) {
    if (!named.slot->value.sharding().placement(0).is_shard()) {
      return absl::InternalError(absl::StrCat(named.name, " is not sharded"));
    }
    params.push_back(named.slot->value);
  }
  std::vector<std::weak_ptr<Storage>> gathered;
  std::mutex mu;  // Hooks run on this rank's thread only; for clarity.
  for (const nn::NamedModule& named : model->NamedModules()) {
    nn::Module* module = named.module;
    if (module->slots().empty()) continue;
    // Added after ParallelizeModule's: they run after its gather and after
    // its release (an exit hook).
    module->AddInputHook([&, module](const DTensor& x) {
      std::lock_guard<std::mutex> lock(mu);
      for (const nn::TensorSlot& slot : module->slots()) {
        ++seen.gathered;
        if (slot.value.sharding().placement(0).is_replicate()) {
          ++seen.gathered_on_dp;
        }
        gathered.push_back(slot.value.ToLocal().storage());
      }
      return absl::StatusOr<DTensor>(x);
    });
    module->AddExitHook([&, module] {
      for (const nn::TensorSlot& slot : module->slots()) {
        if (slot.value.sharding().placement(0).is_shard()) ++seen.sharded_after;
      }
    });
  }
  const auto count_alive = [&] {
    int64_t alive = 0;
    for (const auto& storage : gathered) alive += storage.expired() ? 0 : 1;
    return alive;
  };
  DT_ASSIGN_OR_RETURN(
      Tensor ids, Tensor::FromVector(std::vector<int64_t>(4 * 8, 5), {4, 8}));
  DT_ASSIGN_OR_RETURN(
      DTensor tokens,
      DTensor::Distribute(runtime, ids, mesh,
                          {Placement::Shard(0), Placement::Replicate()}));
  nn::GradientTape tape;
  DTensor loss;
  {
    nn::GradientTape::Scope scope(tape);
    DT_ASSIGN_OR_RETURN(DTensor logits, (*model)(tokens));
    DT_ASSIGN_OR_RETURN(loss, ops::Sum(logits));
  }
  DT_RETURN_IF_ERROR(nn_testing::FlushCollectives(runtime, mesh));
  seen.alive_after_forward = count_alive();
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(loss, params));
  DT_RETURN_IF_ERROR(nn_testing::FlushCollectives(runtime, mesh));
  seen.alive_after_backward = count_alive();
  return absl::OkStatus();
}

TEST(FsdpTest, ForwardRunsOnGatheredCopiesThatAreFreedAfterward) {
  const DeviceMesh mesh = Mesh({2, 2}, {"dp", "tp"});
  std::vector<Seen> seen(mesh.size());
  LocalCluster cluster(mesh.size());
  ASSERT_TRUE(cluster
                  .Run([&](ProcessGroups& groups) {
                    return ObserveFsdp(groups, mesh, seen[groups.rank()]);
                  })
                  .ok());
  const int64_t params = 3 + 9 * nn_testing::TinyConfig().n_layers;
  for (const Seen& s : seen) {
    EXPECT_EQ(s.gathered, params);
    EXPECT_EQ(s.gathered_on_dp, params);
    EXPECT_EQ(s.sharded_after, params);
    // The tape keeps none of the gathered copies.
    EXPECT_EQ(s.alive_after_forward, 0);
    EXPECT_EQ(s.alive_after_backward, 0);
  }
}

// The collectives rank 0 issues on mesh dim `dp` in forward and in backward
// of one FSDP step, under a metadata-only runtime: all-gathers on dp alone,
// and the reductions (reduce-scatter, all-reduce) over dp and possibly other
// dims with it.
struct DpCollectives {
  int64_t forward_gathers = 0, backward_gathers = 0;
  int64_t backward_scatters = 0, backward_reductions = 0;
  int64_t other_on_dp = 0;
};

int64_t CountOn(const std::vector<CommCounter::Event>& events, CommKind kind,
                int64_t dim) {
  int64_t n = 0;
  for (const CommCounter::Event& e : events) {
    if (e.kind == kind && e.mesh_dims == std::vector<int64_t>{dim}) ++n;
  }
  return n;
}

// The collectives of one pass each, in the order issued.
struct StepOrder {
  std::vector<CommCounter::Event> forward, backward;
};

// The collectives rank 0 issues in the last of `steps` forward and backward
// steps of the tiny Llama parallelized by `plan` under a metadata-only
// runtime, tokens [8, 8] sharded on dp; the loss: a cross entropy of the
// logits against labels sharded alike, or with `sum_loss` their sum.
StepOrder MetadataSteps(const DeviceMesh& mesh, const std::string& plan,
                        int steps, bool sum_loss) {
  auto runtime = Runtime::MetadataOnly(0);
  auto model = *nn::BuildLlama(nn_testing::TinyConfig(), runtime, mesh);
  EXPECT_TRUE(
      parallel::ParallelizeModule(*model, mesh, *parallel::ParsePlan(plan))
          .ok());
  std::vector<DTensor> params;
  for (const nn::NamedSlot& named : model->NamedParameters()) {
    params.push_back(named.slot->value);
  }
  std::vector<Placement> sharding(mesh.ndim(), Placement::Replicate());
  sharding[*mesh.DimIndex("dp")] = Placement::Shard(0);
  const DTensor tokens = *DTensor::FromSpec(
      runtime, *DTensorSpec::Create(mesh, sharding, {8, 8}, DType::kI64));
  const DTensor labels = *DTensor::FromSpec(
      runtime, *DTensorSpec::Create(mesh, sharding, {64}, DType::kI64));
  StepOrder order;
  for (int step = 0; step < steps; ++step) {
    nn::GradientTape tape;
    DTensor loss;
    CommCounter forward, backward;
    {
      CommCounter::Scope comm_scope(forward);
      nn::GradientTape::Scope scope(tape);
      const DTensor logits = *(*model)(tokens);
      loss = sum_loss
                 ? *ops::Sum(logits)
                 : *ops::CrossEntropy(*ops::Reshape(logits, {64, 64}), labels);
    }
    {
      CommCounter::Scope comm_scope(backward);
      EXPECT_TRUE(tape.Gradient(loss, params).ok());
    }
    order = {forward.events(), backward.events()};
  }
  return order;
}

DpCollectives MetadataStep(const DeviceMesh& mesh, const std::string& plan) {
  const int64_t dp = *mesh.DimIndex("dp");
  const StepOrder step = MetadataSteps(mesh, plan, 1, /*sum_loss=*/false);
  DpCollectives c;
  c.forward_gathers = CountOn(step.forward, CommKind::kAllGather, dp);
  c.backward_gathers = CountOn(step.backward, CommKind::kAllGather, dp);
  c.backward_scatters = CountOn(step.backward, CommKind::kReduceScatter, dp);
  for (const std::vector<CommCounter::Event>* events :
       {&step.forward, &step.backward}) {
    for (const CommCounter::Event& e : *events) {
      const bool on_dp = std::find(e.mesh_dims.begin(), e.mesh_dims.end(),
                                   dp) != e.mesh_dims.end();
      if (!on_dp || e.kind == CommKind::kLocal) continue;
      const bool reduction =
          e.kind == CommKind::kReduceScatter || e.kind == CommKind::kAllReduce;
      if (events == &step.backward && reduction) {
        ++c.backward_reductions;
      } else if (e.kind != CommKind::kAllGather || e.mesh_dims.size() != 1) {
        ++c.other_on_dp;
      }
    }
  }
  return c;
}

TEST(FsdpTest, OneGatherPerParameterForwardAndBackwardOneReduceScatter) {
  const int64_t params = 3 + 9 * nn_testing::TinyConfig().n_layers;
  // dp alone: per parameter, forward one all-gather; backward one all-gather
  // (the re-gather) and one reduce-scatter; besides, the loss's reductions.
  const DpCollectives dp = MetadataStep(Mesh({4}, {"dp"}), R"({"dp": "fsdp"})");
  EXPECT_EQ(dp.forward_gathers, params);
  EXPECT_EQ(dp.backward_gathers, params);
  EXPECT_EQ(dp.backward_scatters, params);
  EXPECT_LE(dp.backward_reductions, params + 1);
  EXPECT_LE(dp.other_on_dp, 1);
  // With tp: the gathers stay on dp alone (dp shards inside tp's shard); a
  // gradient partial on dp and tp may be completed by one collective over
  // both (an all-reduce of a small norm weight, or a reduce-scatter).
  const DpCollectives two_d =
      MetadataStep(Mesh({2, 4}, {"dp", "tp"}), Plan("fsdp"));
  EXPECT_EQ(two_d.forward_gathers, params);
  EXPECT_EQ(two_d.backward_gathers, params);
  EXPECT_GE(two_d.backward_reductions, params);
  EXPECT_LE(two_d.backward_reductions, params + 1);
  EXPECT_LE(two_d.other_on_dp, 1);
}

// A first forward and backward, then one SGD step on every parameter: the
// step LlamaStep measures after it is a second one, whose forward takes the
// gathers prefetched in it, of parameters that changed since the first (a
// gather prefetched from the old values would show in its results).
absl::Status FirstStepThenSgd(nn::Module& model) {
  std::vector<DTensor> params;
  for (const nn::NamedSlot& named : model.NamedParameters()) {
    params.push_back(named.slot->value);
  }
  const DTensor& any = params.front();
  std::vector<Placement> sharding(any.mesh().ndim(), Placement::Replicate());
  sharding[0] = Placement::Shard(0);  // dp is mesh dim 0 here.
  DT_ASSIGN_OR_RETURN(
      Tensor ids, Tensor::FromVector(std::vector<int64_t>(4 * 8, 3), {4, 8}));
  DT_ASSIGN_OR_RETURN(
      DTensor tokens,
      DTensor::Distribute(any.runtime(), ids, any.mesh(), sharding));
  nn::GradientTape tape;
  DTensor loss;
  {
    nn::GradientTape::Scope scope(tape);
    DT_ASSIGN_OR_RETURN(DTensor logits, model(tokens));
    DT_ASSIGN_OR_RETURN(loss, ops::Sum(logits));
  }
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(loss, params));
  nn::SgdOptions sgd;
  sgd.learning_rate = 0.1;
  DT_ASSIGN_OR_RETURN(auto optimizer, nn::Sgd::Create(params, sgd));
  return optimizer->Step(grads);
}

// The same values, bit for bit.
void ExpectIdenticalStep(const StepResult& got, const StepResult& want) {
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.grads, want.grads);
}

// Grouped, prefetching FSDP (one flat all-gather per transformer block, the
// next block's in flight while one computes) against plain FSDP (a group per
// module that owns parameters, no prefetch): the same step bit for bit, on
// the second step (after an update) and with tp.
TEST(FsdpTest, GroupedPrefetchingEqualsPlainFsdpAfterAnUpdate) {
  for (int64_t tp : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("dp=2 tp=", tp));
    const DeviceMesh mesh = Mesh({2, tp}, {"dp", "tp"});
    auto plain = LlamaStep(
        mesh,
        absl::StrCat("{", kTp, R"(, "dp": "fsdp", "fsdp_prefetch": false})"),
        FirstStepThenSgd);
    ASSERT_TRUE(plain.ok()) << plain.status();
    auto grouped = LlamaStep(
        mesh,
        absl::StrCat("{", kTp,
                     R"(, "dp": "fsdp", "fsdp_groups": ["layers.*"]})"),
        FirstStepThenSgd);
    ASSERT_TRUE(grouped.ok()) << grouped.status();
    ExpectIdenticalStep(*grouped, *plain);
  }
  // Without tp, on 4 dp ranks; groups nested in groups (the whole block and,
  // inside it, its attention) and a group per leftover module.
  const DeviceMesh mesh = Mesh({4}, {"dp"});
  auto plain = LlamaStep(mesh, R"({"dp": "fsdp", "fsdp_prefetch": false})",
                         FirstStepThenSgd);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto nested = LlamaStep(
      mesh,
      R"({"dp": "fsdp", "fsdp_groups": ["layers.*", "layers.*.attention"]})",
      FirstStepThenSgd);
  ASSERT_TRUE(nested.ok()) << nested.status();
  ExpectIdenticalStep(*nested, *plain);
}

// The position of the n-th event (from 0) of `kind` on mesh dims `dims`.
int64_t Position(const std::vector<CommCounter::Event>& events, CommKind kind,
                 const std::vector<int64_t>& dims, int n) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == kind && events[i].mesh_dims == dims && n-- == 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// Prefetch, seen in the order of the collectives: in forward the second
// group's all-gather is issued before the first group's tensor-parallel
// collective, in backward the previous group's gather before the last
// group's gradient is reduce-scattered; without prefetch, after. One
// all-gather per group and pass, where plain FSDP issues one per module.
TEST(FsdpTest, PrefetchIssuesTheNextGroupsGatherFirst) {
  const DeviceMesh mesh = Mesh({2, 2}, {"dp", "tp"});
  const std::string grouped = R"(, "dp": "fsdp", "fsdp_groups": ["layers.*"])";
  const StepOrder on = MetadataSteps(mesh, absl::StrCat("{", kTp, grouped, "}"),
                                     2, /*sum_loss=*/true);
  const StepOrder off = MetadataSteps(
      mesh, absl::StrCat("{", kTp, grouped, R"(, "fsdp_prefetch": false})"), 2,
      /*sum_loss=*/true);
  const std::vector<int64_t> dp = {0}, tp = {1};
  const CommKind gather = CommKind::kAllGather;
  // Forward: the embedding's gather, the first block's, then the
  // embedding's all-reduce over tp (rowwise) - or the all-reduce first.
  const int64_t tp_first_on = Position(on.forward, CommKind::kAllReduce, tp, 0);
  const int64_t tp_first_off =
      Position(off.forward, CommKind::kAllReduce, tp, 0);
  ASSERT_GE(tp_first_on, 0);
  EXPECT_LT(Position(on.forward, gather, dp, 1), tp_first_on);
  EXPECT_GT(Position(off.forward, gather, dp, 1), tp_first_off);
  // Backward: the output's gather, then the final norm's, then the output
  // weight's reduce-scatter - or the reduce-scatter first.
  const int64_t scatter_on =
      Position(on.backward, CommKind::kReduceScatter, dp, 0);
  const int64_t scatter_off =
      Position(off.backward, CommKind::kReduceScatter, dp, 0);
  ASSERT_GE(scatter_on, 0);
  EXPECT_LT(Position(on.backward, gather, dp, 1), scatter_on);
  EXPECT_GT(Position(off.backward, gather, dp, 1), scatter_off);
  // One gather per group and pass: the embedding, the blocks, the final
  // norm and the output.
  const int64_t groups = 3 + nn_testing::TinyConfig().n_layers;
  for (const StepOrder* order : {&on, &off}) {
    EXPECT_EQ(CountOn(order->forward, gather, 0), groups);
    EXPECT_EQ(CountOn(order->backward, gather, 0), groups);
  }
}

// Each group is gathered once per pass, nested groups included (the
// enclosing group's parameters left from its backward gather are used, not
// gathered again).
TEST(FsdpTest, EachGroupIsGatheredOncePerPass) {
  const int64_t layers = nn_testing::TinyConfig().n_layers;
  const DeviceMesh mesh = Mesh({2}, {"dp"});
  for (
      const auto& [plan, groups] : std::vector<std::pair<std::string, int64_t>>{
          {R"({"dp": "fsdp", "fsdp_groups": ["layers.*"]})", 3 + layers},
          {R"({"dp": "fsdp", "fsdp_groups": ["layers.*", "layers.*.attention"]})",
           3 + 2 * layers}}) {
    SCOPED_TRACE(plan);
    for (const int steps : {1, 2}) {
      const StepOrder step = MetadataSteps(mesh, plan, steps, true);
      EXPECT_EQ(CountOn(step.forward, CommKind::kAllGather, 0), groups);
      EXPECT_EQ(CountOn(step.backward, CommKind::kAllGather, 0), groups);
    }
  }
}

// Under LlamaTrainer (GradientBuckets), a group's gradients are
// reduce-scattered as soon as backward hands them over, with one collective:
// the last group's reduce-scatter is issued before the gather prefetched for
// the group two before it, and there is one per group.
TEST(FsdpTest, TrainerReduceScattersEachGroupWhenItsGradientsAreReady) {
  const DeviceMesh mesh = Mesh({2}, {"dp"});
  auto runtime = Runtime::MetadataOnly(0);
  parallel::LlamaTrainerOptions options;
  options.config = nn_testing::TinyConfig();
  auto trainer = parallel::LlamaTrainer::Create(
      runtime, mesh,
      *parallel::ParsePlan(R"({"dp": "fsdp", "fsdp_groups": ["layers.*"]})"),
      options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto batch = (*trainer)->MakeBatchMetadata(4, 8);
  ASSERT_TRUE(batch.ok()) << batch.status();
  CommCounter backward;
  for (int step = 0; step < 2; ++step) {
    auto loss = (*trainer)->Forward(*batch);
    ASSERT_TRUE(loss.ok()) << loss.status();
    backward.Reset();
    std::vector<DTensor> grads;
    {
      CommCounter::Scope counting(backward);
      auto got = (*trainer)->Backward(*loss);
      ASSERT_TRUE(got.ok()) << got.status();
      grads = *std::move(got);
    }
    ASSERT_TRUE((*trainer)->Update(grads).ok());
  }
  const std::vector<int64_t> dp = {0};
  const int64_t first_scatter =
      Position(backward.events(), CommKind::kReduceScatter, dp, 0);
  ASSERT_GE(first_scatter, 0);
  EXPECT_LT(first_scatter,
            Position(backward.events(), CommKind::kAllGather, dp, 2));
  EXPECT_EQ(CountOn(backward.events(), CommKind::kReduceScatter, 0),
            3 + nn_testing::TinyConfig().n_layers);
}

}  // namespace
// A call that fails after a module gathered its parameters (here the
// embedding's lookup rejects float tokens) still gives the slots back their
// sharded parameters: nothing (a checkpoint, the optimizer) sees a gathered
// copy in place of a parameter.
TEST(FsdpTest, AFailedForwardLeavesTheParametersSharded) {
  const DeviceMesh mesh = Mesh({2, 2}, {"dp", "tp"});
  auto runtime = Runtime::MetadataOnly(0);
  auto model = *nn::BuildLlama(nn_testing::TinyConfig(), runtime, mesh);
  ASSERT_TRUE(
      parallel::ParallelizeModule(
          *model, mesh, *parallel::ParsePlan(R"({"tp": {}, "dp": "fsdp"})"))
          .ok());
  const DTensor bad_tokens = *DTensor::FromSpec(
      runtime,
      *DTensorSpec::Create(mesh, {Placement::Shard(0), Placement::Replicate()},
                           {8, 8}, DType::kF32));
  EXPECT_FALSE((*model)(bad_tokens).ok());
  for (const nn::NamedSlot& named : model->NamedParameters()) {
    if (named.slot->shape.empty()) continue;
    EXPECT_TRUE(named.slot->value.sharding().placement(0).is_shard())
        << named.name << " " << named.slot->value.sharding().ToString();
  }
}

}  // namespace parallel_testing
}  // namespace dtensor
