// The collectives of one training step of the tiny Llama under each shipped
// plan on dp=2,tp=2, counted separately in the forward, backward and
// optimizer phases (LlamaTrainer::Forward / Backward / Update), by mesh dims
// and kind, against the numbers derived from the plan in docs/comm_counts.md.
// Each row states the derived count and, separately, the known
// inefficiencies the engine adds on top (docs/comm_counts.md, "Known
// inefficiencies"): fixing one makes this test fail until its excess entry is
// set to zero. With context parallelism (cp alone, and dp x cp x tp), the
// collectives over the cp dim against their derivation: the ring's permutes
// and their bytes, the loss's all-reduce and the gradient buckets, nothing
// gathering the logits or moving the activations.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/sequence_blocks.h"
#include "dtensor/parallel/context_parallel.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace parallel {
namespace {

// Collectives by "<mesh dims>/<kind>": "tp/all_gather", "dp/all_reduce",
// "dp+tp/all_reduce" (one collective over both dims). Absent keys are 0.
using Counts = std::map<std::string, int64_t>;

struct PhaseCounts {
  Counts forward;
  Counts backward;
  Counts update;
};

// One shipped plan: what it needs per step (derived in docs/comm_counts.md)
// and what the engine issues on top of that today (negative: fewer), both
// for a model of `layers` blocks.
struct PlanRow {
  std::string plan;
  std::function<PhaseCounts(int64_t layers)> derived;
  std::function<PhaseCounts(int64_t layers)> excess;
};

Counts Sum(const Counts& a, const Counts& b) {
  Counts sum = a;
  for (const auto& [key, n] : b) sum[key] += n;
  for (auto it = sum.begin(); it != sum.end();) {
    it = it->second == 0 ? sum.erase(it) : std::next(it);
  }
  return sum;
}

PhaseCounts Sum(const PhaseCounts& a, const PhaseCounts& b) {
  return {Sum(a.forward, b.forward), Sum(a.backward, b.backward),
          Sum(a.update, b.update)};
}

// The plan families (the "tp" objects). A block has 9 parameters (wq, wk, wv,
// wo, w1, w2, w3 and two norm weights); the model adds tok_embeddings, norm
// and output. Every family leaves the 2L + 1 norm weights replicated on tp,
// and their gradients partial on tp (their outputs feed colwise inputs, whose
// gradients are partial on tp) and on dp: they are synced over dp+tp (see
// NormPart). The other 7L + 2 parameters are sharded on tp and synced over dp
// alone (by the dp mode).
enum class Family { kTp, kTpSp, kTpSpLossParallel };

PhaseCounts TpPart(Family family, int64_t L) {
  PhaseCounts c;
  switch (family) {
    case Family::kTp:
      // Rowwise wo, w2 and tok_embeddings (vocab-parallel): partial outputs
      // all-reduced; colwise output: the vocab-sharded logits gathered. The
      // mean loss: the count all-reduced on dp (cross_entropy kernel).
      c.forward = {{"tp/all_reduce", 2 * L + 1},
                   {"tp/all_gather", 1},
                   {"dp/all_reduce", 1}};
      // The partial gradients of the 2L + 1 colwise inputs (attention, feed
      // forward, output) made whole where a rowwise backward (w2, wo, the
      // embedding) reads them; the logits gather's conjugate is a slice.
      c.backward = {{"tp/all_reduce", 2 * L + 1}};
      return c;
    case Family::kTpSp:
      // Embedding, wo and w2 reduce-scatter to S(1); attention, feed forward
      // (prepare_input) and output gather their S(1) input once each, and
      // the vocab-sharded logits are gathered.
      c.forward = {{"tp/reduce_scatter", 2 * L + 1},
                   {"tp/all_gather", 2 * L + 2},
                   {"dp/all_reduce", 1}};
      // The conjugates: gathers of the reduce-scatters, reduce-scatters of
      // the 2L + 1 input gathers (the logits gather's is a slice).
      c.backward = {{"tp/all_gather", 2 * L + 1},
                    {"tp/reduce_scatter", 2 * L + 1}};
      return c;
    case Family::kTpSpLossParallel:
      // As tp_sp, but the logits stay vocab-sharded: the vocab-parallel
      // cross_entropy all-reduces the row max and (sum of exp, target
      // logit) on tp.
      c.forward = {{"tp/reduce_scatter", 2 * L + 1},
                   {"tp/all_gather", 2 * L + 1},
                   {"tp/all_reduce", 2},
                   {"dp/all_reduce", 1}};
      c.backward = {{"tp/all_gather", 2 * L + 1},
                    {"tp/reduce_scatter", 2 * L + 1}};
      return c;
  }
  return c;
}

// The model's gradients are far below the default bucket of 25 MiB: (9L +
// 3) parameters of at most 64 x 96 f32 values each, under 1 MiB for L <= 3.
// So under replicate every gradient partial on the same mesh dims shares one
// bucket: one all-reduce per set of dims (dtensor/parallel/gradient_buckets.h).
constexpr int64_t kBucketsPerDims = 1;

// The 2L + 1 norm gradients, partial on dp and tp: replicate all-reduces
// them in one bucket over dp+tp; fsdp completes each on its own (one
// all-reduce over dp+tp each: the planner's cheapest way to reach S(0) on
// dp from partial on dp and tp, then a local slice).
PhaseCounts NormPart(bool fsdp, int64_t L) {
  PhaseCounts c;
  c.backward = {{"dp+tp/all_reduce", fsdp ? 2 * L + 1 : kBucketsPerDims}};
  return c;
}

// The dp dim's parameter collectives besides the norms' (see above):
// replicate all-reduces the 7L + 2 tp-sharded gradients in one bucket; fsdp
// gathers all 9L + 3 parameters before each module's forward (a group per
// module owning parameters, one parameter each) and again in backward, and
// reduce-scatters the 7L + 2 gradients, one bucket per group.
PhaseCounts DpPart(bool fsdp, int64_t L) {
  PhaseCounts c;
  if (!fsdp) {
    c.backward = {{"dp/all_reduce", kBucketsPerDims}};
    return c;
  }
  c.forward = {{"dp/all_gather", 9 * L + 3}};
  c.backward = {{"dp/all_gather", 9 * L + 3}, {"dp/reduce_scatter", 7 * L + 2}};
  return c;
}

// The known inefficiencies (docs/comm_counts.md): none today. cross_entropy's
// backward reads the count and the log-sum-exp its forward computed, so it
// neither all-reduces the target count on dp again nor recomputes the softmax
// statistics over the vocab shards (loss parallel).
PhaseCounts Excess(Family) { return PhaseCounts(); }

// The rows: every family under both dp modes. AdamW updates every shard
// where it lies, so no row has an optimizer collective.
std::vector<PlanRow> Rows() {
  const std::pair<std::string, Family> families[] = {
      {"tp", Family::kTp},
      {"tp_sp", Family::kTpSp},
      {"tp_sp_loss_parallel", Family::kTpSpLossParallel}};
  std::vector<PlanRow> rows;
  for (const auto& [name, family] : families) {
    for (const bool fsdp : {false, true}) {
      rows.push_back({absl::StrCat(name, fsdp ? "_fsdp" : "_dp"),
                      [family = family, fsdp](int64_t L) {
                        return Sum(Sum(TpPart(family, L), NormPart(fsdp, L)),
                                   DpPart(fsdp, L));
                      },
                      [family = family](int64_t) { return Excess(family); }});
    }
  }
  return rows;
}

std::string ToString(const Counts& counts) {
  return absl::StrCat("{",
                      absl::StrJoin(counts, ", ",
                                    [](std::string* out, const auto& entry) {
                                      absl::StrAppend(out, entry.first, ": ",
                                                      entry.second);
                                    }),
                      "}");
}

// The collectives `counter` saw, keyed by the names of their mesh dims.
Counts CountsOf(const CommCounter& counter, const DeviceMesh& mesh) {
  Counts counts;
  for (const CommCounter::Event& event : counter.events()) {
    if (event.kind == CommKind::kLocal) continue;
    std::vector<std::string> dims;
    for (int64_t d : event.mesh_dims) dims.push_back(mesh.dim_names()[d]);
    counts[absl::StrCat(absl::StrJoin(dims, "+"), "/",
                        CommKindName(event.kind))] += 1;
  }
  return counts;
}

nn::LlamaConfig Config(int64_t layers) {
  nn::LlamaConfig config;
  config.dim = 32;
  config.n_layers = layers;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 64;
  config.multiple_of = 32;
  config.max_seq_len = 16;
  return config;
}

// How a shipped plan is changed before the step: its tp part alone ("dp":
// "none"), and context parallelism over the mesh's "cp" dim.
struct PlanChange {
  bool tp_only = false;
  bool dp_only = false;
  std::optional<ops::SequenceOrder> cp;
};

// One step on `mesh_flag` (default dp=2,tp=2); rank 0's counts per phase,
// and with `counters` its collectives themselves.
absl::StatusOr<PhaseCounts> MeasureStep(
    const std::string& plan_name, int64_t layers,
    const std::string& mesh_flag = "dp=2,tp=2", const PlanChange& change = {},
    LlamaTrainer::PhaseComms* counters = nullptr) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return absl::NotFoundError("TEST_SRCDIR is not set");
  DT_ASSIGN_OR_RETURN(
      Plan plan, LoadPlanFile(absl::StrCat(srcdir, "/dtensor/parallel/plans/",
                                           plan_name, ".json")));
  if (change.tp_only) plan.dp = DataParallel::kNone;
  if (change.dp_only) plan.tp.clear();
  if (change.cp.has_value()) {
    plan.context_parallel = ContextParallelPlan{"cp", *change.cp};
  }
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(mesh_flag));
  LlamaTrainerOptions options;
  options.config = Config(layers);
  PhaseCounts result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(
        auto trainer,
        LlamaTrainer::Create(Runtime::ForRank(groups), mesh, plan, options));
    if (trainer->parameters().size() != static_cast<size_t>(9 * layers + 3)) {
      return absl::InternalError(
          absl::StrCat("the derivation assumes 9 * layers + 3 parameters, the "
                       "model has ",
                       trainer->parameters().size()));
    }
    std::vector<int64_t> ids(4 * 8);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7 + 3) % 64;
    DT_ASSIGN_OR_RETURN(Tensor tokens, Tensor::FromVector(ids, {4, 8}));
    DT_ASSIGN_OR_RETURN(LlamaTrainer::Batch batch,
                        trainer->MakeBatch(tokens, tokens));
    LlamaTrainer::PhaseComms comms;
    DT_RETURN_IF_ERROR(trainer->StepCounted(batch, comms).status());
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = {CountsOf(comms.forward, mesh), CountsOf(comms.backward, mesh),
                CountsOf(comms.update, mesh)};
      if (counters != nullptr) *counters = std::move(comms);
    }
    return absl::OkStatus();
  }));
  return result;
}

struct Case {
  PlanRow row;
  int64_t layers;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.row.plan << " with " << c.layers << " layers";
}

class CommCountsTest : public ::testing::TestWithParam<Case> {};

TEST_P(CommCountsTest, OneStepIssuesTheDerivedCollectives) {
  const Case& c = GetParam();
  absl::StatusOr<PhaseCounts> measured = MeasureStep(c.row.plan, c.layers);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const PhaseCounts derived = c.row.derived(c.layers);
  const PhaseCounts excess = c.row.excess(c.layers);
  EXPECT_EQ(ToString(measured->forward),
            ToString(Sum(derived.forward, excess.forward)))
      << "forward; derived " << ToString(derived.forward);
  EXPECT_EQ(ToString(measured->backward),
            ToString(Sum(derived.backward, excess.backward)))
      << "backward; derived " << ToString(derived.backward);
  EXPECT_EQ(ToString(measured->update),
            ToString(Sum(derived.update, excess.update)))
      << "optimizer; derived " << ToString(derived.update);
}

// 2 and 3 layers: the per-block terms of the derivation are checked too.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const PlanRow& row : Rows()) {
    for (int64_t layers : {2, 3}) cases.push_back({row, layers});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(ShippedPlans, CommCountsTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat(info.param.row.plan, "_",
                                               info.param.layers, "_layers");
                         });

// Pure tensor parallelism (a family's tp part, "dp": "none", on tp=2): the
// textbook (Megatron-LM) count, written out here apart from the derivation
// above. Megatron's f (identity forward, all-reduce of the gradient) before
// each column-parallel input and g (all-reduce forward) after each
// row-parallel output; with sequence parallelism f and g become an
// all-gather and a reduce-scatter each way. Norm weights: replicated, their
// gradients summed over the tp group in one flat all-reduce at the end of
// backward (Megatron-LM's _allreduce_layernorm_grads, coalesced), never one
// all-reduce per norm weight.
PhaseCounts Megatron(Family family, int64_t L) {
  // f and g per block: attention and MLP; the model adds the vocab-parallel
  // embedding (g) and the column-parallel output layer (f).
  const int64_t g = 2 * L + 1;
  const int64_t f = 2 * L + 1;
  // The flat all-reduce of the 2L + 1 norm weights' gradients.
  const int64_t norms = 1;
  PhaseCounts c;
  switch (family) {
    case Family::kTp:
      // The output layer's gather_output, whose conjugate is a slice.
      c.forward = {{"tp/all_reduce", g}, {"tp/all_gather", 1}};
      c.backward = {{"tp/all_reduce", f + norms}};
      return c;
    case Family::kTpSp:
      // g as reduce-scatters; f as all-gathers, and the logits gathered.
      c.forward = {{"tp/reduce_scatter", g}, {"tp/all_gather", f + 1}};
      c.backward = {{"tp/all_gather", g},
                    {"tp/reduce_scatter", f},
                    {"tp/all_reduce", norms}};
      return c;
    case Family::kTpSpLossParallel:
      // The vocab-parallel cross entropy: max, then (sum of exp, target).
      c.forward = {
          {"tp/reduce_scatter", g}, {"tp/all_gather", f}, {"tp/all_reduce", 2}};
      c.backward = {{"tp/all_gather", g},
                    {"tp/reduce_scatter", f},
                    {"tp/all_reduce", norms}};
      return c;
  }
  return c;
}

struct TpCase {
  std::string plan;
  Family family;
  int64_t layers;
};

void PrintTo(const TpCase& c, std::ostream* os) {
  *os << c.plan << " tp part with " << c.layers << " layers";
}

class PureTpCommCountsTest : public ::testing::TestWithParam<TpCase> {};

TEST_P(PureTpCommCountsTest, OneStepIssuesMegatronsCollectives) {
  const TpCase& c = GetParam();
  absl::StatusOr<PhaseCounts> measured =
      MeasureStep(c.plan, c.layers, "tp=2", {/*tp_only=*/true});
  ASSERT_TRUE(measured.ok()) << measured.status();
  const PhaseCounts want = Megatron(c.family, c.layers);
  EXPECT_EQ(ToString(measured->forward), ToString(want.forward));
  EXPECT_EQ(ToString(measured->backward), ToString(want.backward));
  EXPECT_EQ(ToString(measured->update), ToString(want.update));
}

INSTANTIATE_TEST_SUITE_P(
    ShippedFamilies, PureTpCommCountsTest,
    ::testing::Values(
        TpCase{"tp_dp", Family::kTp, 2}, TpCase{"tp_dp", Family::kTp, 3},
        TpCase{"tp_sp_dp", Family::kTpSp, 2},
        TpCase{"tp_sp_dp", Family::kTpSp, 3},
        TpCase{"tp_sp_loss_parallel_dp", Family::kTpSpLossParallel, 2},
        TpCase{"tp_sp_loss_parallel_dp", Family::kTpSpLossParallel, 3}),
    [](const ::testing::TestParamInfo<TpCase>& info) {
      return absl::StrCat(info.param.plan, "_", info.param.layers, "_layers");
    });

// ---- Context parallelism (docs/comm_counts.md, "Context parallelism"). ----

// A step with context parallelism over the mesh's "cp" dim (balanced order;
// the sequence of 8 divides by 2 * cp for cp <= 4).
struct CpCase {
  std::string plan;
  std::string mesh;  // "cp=2", "dp=2,cp=2,tp=2", ...
  PlanChange change;
  int64_t layers;
};

void PrintTo(const CpCase& c, std::ostream* os) {
  *os << c.plan << " on " << c.mesh << " with " << c.layers << " layers";
}

// The size of mesh dim `name` in a --mesh flag (1 when absent).
int64_t DimSize(const std::string& mesh_flag, const std::string& name) {
  absl::StatusOr<DeviceMesh> mesh = ParseMeshFlag(mesh_flag);
  if (!mesh.ok()) return 1;
  for (size_t d = 0; d < mesh->dim_names().size(); ++d) {
    if (mesh->dim_names()[d] == name) return mesh->shape()[d];
  }
  return 1;
}

// The collectives of one step over sets of mesh dims that include cp, derived
// from cp and L (docs/comm_counts.md):
// - ring attention, per block: k and v pass cp - 1 times forward; in backward
//   k and v cp - 1 times and their gradients cp times;
// - the mean loss: its sum and count all-reduced once over the mesh dims
//   sharding the batch and the sequence (dp+cp), nothing moving the logits;
// - replicate's gradient sync (every gradient is partial on cp: each rank saw
//   its part of the sequence): one bucket per set of dims, the 7L + 2
//   tp-sharded gradients over dp+cp and the 2L + 1 norms' over dp+cp+tp (with
//   no tp all 9L + 3 share the dp+cp bucket).
// Nothing else runs over cp: no all-gather, no all-to-all.
PhaseCounts CpDerived(const CpCase& c) {
  const int64_t cp = DimSize(c.mesh, "cp");
  const int64_t L = c.layers;
  const bool dp = DimSize(c.mesh, "dp") > 1;
  const bool tp = DimSize(c.mesh, "tp") > 1 && !c.change.dp_only;
  const std::string rows = dp ? "dp+cp" : "cp";
  PhaseCounts counts;
  counts.forward = {{"cp/permute", 2 * (cp - 1) * L},
                    {rows + "/all_reduce", 1}};
  counts.backward = {{"cp/permute", (2 * (cp - 1) + 2 * cp) * L},
                     {rows + "/all_reduce", kBucketsPerDims}};
  if (tp) counts.backward[rows + "+tp/all_reduce"] = kBucketsPerDims;
  return counts;
}

// Only the entries of `counts` whose mesh dims include cp.
Counts OnCp(const Counts& counts) {
  Counts cp;
  for (const auto& [key, n] : counts) {
    const std::string dims = key.substr(0, key.find('/'));
    for (absl::string_view dim : absl::StrSplit(dims, '+')) {
      if (dim == "cp") cp[key] = n;
    }
  }
  return cp;
}

// The bytes a rank receives per ring transfer: a k (or v) block of the
// tiny config [batch / dp, kv heads / tp, 1, seq / cp, head dim] of f32
// (their gradients are f32 too).
double BlockBytes(const CpCase& c) {
  const nn::LlamaConfig config = Config(c.layers);
  const int64_t tp = c.change.dp_only ? 1 : DimSize(c.mesh, "tp");
  return static_cast<double>(
      4 / DimSize(c.mesh, "dp") * (config.kv_heads() / tp) * 8 /
      DimSize(c.mesh, "cp") * (config.dim / config.n_heads) * sizeof(float));
}

class ContextParallelCommCountsTest : public ::testing::TestWithParam<CpCase> {
};

TEST_P(ContextParallelCommCountsTest, OneStepIssuesTheDerivedCpCollectives) {
  const CpCase& c = GetParam();
  LlamaTrainer::PhaseComms comms;
  absl::StatusOr<PhaseCounts> measured =
      MeasureStep(c.plan, c.layers, c.mesh, c.change, &comms);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const PhaseCounts derived = CpDerived(c);
  EXPECT_EQ(ToString(OnCp(measured->forward)), ToString(derived.forward));
  EXPECT_EQ(ToString(OnCp(measured->backward)), ToString(derived.backward));
  EXPECT_EQ(ToString(OnCp(measured->update)), ToString(derived.update));
  for (const CommCounter* phase : {&comms.forward, &comms.backward}) {
    for (const CommCounter::Event& e : phase->events()) {
      if (e.kind == CommKind::kPermute) {
        EXPECT_EQ(e.bytes, BlockBytes(c)) << e.label;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinySteps, ContextParallelCommCountsTest, ::testing::ValuesIn([] {
      const PlanChange cp_alone = {/*tp_only=*/true, /*dp_only=*/true,
                                   ops::SequenceOrder::kBalanced};
      const PlanChange cp_with_plan = {false, false,
                                       ops::SequenceOrder::kBalanced};
      std::vector<CpCase> cases;
      for (int64_t layers : {2, 3}) {
        cases.push_back({"tp_dp", "cp=2", cp_alone, layers});
        cases.push_back({"tp_dp", "cp=4", cp_alone, layers});
        cases.push_back({"tp_dp", "dp=2,cp=2,tp=2", cp_with_plan, layers});
        cases.push_back(
            {"tp_sp_loss_parallel_dp", "dp=2,cp=2,tp=2", cp_with_plan, layers});
      }
      return cases;
    }()),
    [](const ::testing::TestParamInfo<CpCase>& info) {
      std::string mesh;
      for (char ch : info.param.mesh) mesh += std::isalnum(ch) ? ch : '_';
      return absl::StrCat(info.param.plan, "_", mesh, "_", info.param.layers,
                          "_layers");
    });

}  // namespace
}  // namespace parallel
}  // namespace dtensor
