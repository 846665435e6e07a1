// The collectives of one training step of the tiny Llama under each shipped
// plan on dp=2,tp=2, counted separately in the forward, backward and
// optimizer phases (LlamaTrainer::Forward / Backward / Update), by mesh dims
// and kind, against the numbers derived from the plan in docs/comm_counts.md.
// Each row states the derived count and, separately, the known
// inefficiencies the engine adds on top (docs/comm_counts.md, "Known
// inefficiencies"): fixing one makes this test fail until its excess entry is
// set to zero.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "parallel/llama_trainer.h"
#include "parallel/plan.h"
#include "tensor/status_macros.h"
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

// The rows. AdamW updates every shard where it lies, so no row has an
// optimizer collective. A block has 9 parameters (wq, wk, wv, wo, w1, w2, w3
// and two norm weights); the model adds tok_embeddings, norm and output. The
// FSDP plans get their rows when their rework lands (one entry each).
std::vector<PlanRow> Rows() {
  return {
      {"tp_dp",
       [](int64_t L) {
         PhaseCounts c;
         // Rowwise wo and w2: partial outputs all-reduced on tp; the mean
         // loss: sum and count all-reduced on dp (cross_entropy kernel).
         c.forward = {{"tp/all_reduce", 2 * L}, {"dp/all_reduce", 1}};
         // The partial gradients of the colwise inputs made whole where a
         // rowwise backward reads them, but the last (block 0's attention
         // input), which flows partial into the embedding gradient; one
         // gradient all-reduce per parameter: over dp+tp for tok_embeddings
         // and the 2L block norms (partial on tp too), over dp for the rest.
         c.backward = {{"tp/all_reduce", 2 * L - 1},
                       {"dp+tp/all_reduce", 2 * L + 1},
                       {"dp/all_reduce", 7 * L + 2}};
         return c;
       },
       [](int64_t) {
         PhaseCounts c;
         // cross_entropy's backward all-reduces the target count again.
         c.backward = {{"dp/all_reduce", 1}};
         return c;
       }},
      {"tp_sp_dp",
       [](int64_t L) {
         PhaseCounts c;
         // Embedding, wo and w2 reduce-scatter to S(1); attention and feed
         // forward gather their S(1) input once each; the unplanned output
         // makes sequence-sharded logits, flattened for the loss by one
         // all-to-all; the loss over rows sharded on dp and tp.
         c.forward = {{"tp/reduce_scatter", 2 * L + 1},
                      {"tp/all_gather", 2 * L},
                      {"tp/all_to_all", 1},
                      {"dp+tp/all_reduce", 1}};
         // The conjugates: gathers for the 2L + 1 reduce-scatters,
         // reduce-scatters for the 2L gathers, the all-to-all back; the
         // gradients of the norms and of output are partial on tp too.
         c.backward = {{"tp/all_gather", 2 * L + 1},
                       {"tp/reduce_scatter", 2 * L},
                       {"tp/all_to_all", 1},
                       {"dp+tp/all_reduce", 2 * L + 2},
                       {"dp/all_reduce", 7 * L + 1}};
         return c;
       },
       [](int64_t L) {
         PhaseCounts c;
         // wk, wv and w3 gather the input that wq (w1) gathered already.
         c.forward = {{"tp/all_gather", 3 * L}};
         // Their conjugate reduce-scatters; the loss backward's layout
         // changes and a batch-sharded residual gradient converted at each
         // residual add; the count all-reduce.
         c.backward = {{"tp/reduce_scatter", 3 * L},
                       {"tp/all_to_all", 5 + 2 * L},
                       {"dp/all_reduce", 1}};
         return c;
       }},
      {"tp_sp_loss_parallel_dp",
       [](int64_t L) {
         PhaseCounts c;
         // As tp_sp, plus output's S(1) input gathered; vocab-parallel
         // cross-entropy: max and (sum of exp, target logit) all-reduced on
         // tp, sum and count on dp.
         c.forward = {{"tp/reduce_scatter", 2 * L + 1},
                      {"tp/all_gather", 2 * L + 1},
                      {"tp/all_reduce", 2},
                      {"dp/all_reduce", 1}};
         c.backward = {{"tp/all_gather", 2 * L + 1},
                       {"tp/reduce_scatter", 2 * L + 1},
                       {"dp+tp/all_reduce", 2 * L + 1},
                       {"dp/all_reduce", 7 * L + 2}};
         return c;
       },
       [](int64_t L) {
         PhaseCounts c;
         // The redundant gathers as in tp_sp; cross_entropy gathers the
         // vocab-sharded logits instead of its class-sharded strategy.
         c.forward = {{"tp/all_gather", 3 * L + 1}, {"tp/all_reduce", -2}};
         // Their conjugates; cross_entropy's backward recomputes the max
         // and the sum of exp over the vocab shards; the count.
         c.backward = {{"tp/reduce_scatter", 3 * L},
                       {"tp/all_reduce", 2},
                       {"dp/all_reduce", 1}};
         return c;
       }},
  };
}

Counts Sum(const Counts& a, const Counts& b) {
  Counts sum = a;
  for (const auto& [key, n] : b) sum[key] += n;
  for (auto it = sum.begin(); it != sum.end();) {
    it = it->second == 0 ? sum.erase(it) : std::next(it);
  }
  return sum;
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

// One step on dp=2,tp=2; rank 0's counts per phase.
absl::StatusOr<PhaseCounts> MeasureStep(const std::string& plan_name,
                                        int64_t layers) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return absl::NotFoundError("TEST_SRCDIR is not set");
  DT_ASSIGN_OR_RETURN(
      Plan plan, LoadPlanFile(absl::StrCat(srcdir, "/dtensor/parallel/plans/",
                                           plan_name, ".json")));
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag("dp=2,tp=2"));
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
    CommCounter forward, backward, update;
    DTensor loss;
    std::vector<DTensor> grads;
    {
      CommCounter::Scope scope(forward);
      DT_ASSIGN_OR_RETURN(loss, trainer->Forward(batch));
    }
    {
      CommCounter::Scope scope(backward);
      DT_ASSIGN_OR_RETURN(grads, trainer->Backward(loss));
    }
    {
      CommCounter::Scope scope(update);
      DT_RETURN_IF_ERROR(trainer->Update(grads));
    }
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = {CountsOf(forward, mesh), CountsOf(backward, mesh),
                CountsOf(update, mesh)};
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

}  // namespace
}  // namespace parallel
}  // namespace dtensor
