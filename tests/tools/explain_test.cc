// dtensor explain: explain equals reality (the collectives the metadata-only
// step predicts are those a real step on in-process ranks counts, per phase,
// kind and module, on every rank, for every shipped plan), the memory
// estimate against layouts worked out by hand, the shipped model configs
// against Meta's published sizes, warnings, and config errors.
#include "tools/explain.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/nn/llama.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/testing/token_batch.h"
#include "gtest/gtest.h"
#include "tools/explain_config.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

std::string PlansDir() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir == nullptr ? "." : srcdir,
                      "/dtensor/parallel/plans");
}

std::vector<std::string> ShippedPlanPaths() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(PlansDir())) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// What one rank counts: per phase ("forward", "backward", "optimizer") and
// owner ("" for the phase's total, else the owning module's name or
// kOutsideModules), per collective kind: count and bytes.
using Key = std::tuple<std::string, std::string, CommKind>;
using Tally = std::map<Key, std::pair<int64_t, double>>;

void Count(const std::string& phase, const std::string& owner, CommKind kind,
           double bytes, int64_t n, Tally& tally) {
  if (kind == CommKind::kLocal) return;
  auto& t = tally[{phase, owner, kind}];
  t.first += n;
  t.second += bytes * n;
}

// The real step's tally, every rank's, counted by CommCounter while
// LlamaTrainer trains on in-process ranks with data.
absl::StatusOr<std::vector<Tally>> RealTallies(const ExplainRequest& request) {
  std::vector<Tally> tallies(request.mesh.size());
  std::mutex mu;
  LocalCluster cluster(request.mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    parallel::LlamaTrainerOptions options;
    options.config = request.config;
    options.dtype = request.dtype;
    DT_ASSIGN_OR_RETURN(auto trainer, parallel::LlamaTrainer::Create(
                                          Runtime::ForRank(groups),
                                          request.mesh, request.plan, options));
    std::map<const void*, std::string> names;
    for (const nn::NamedModule& m : trainer->model().NamedModules()) {
      names[m.module] = m.name;
    }
    Generator generator(99);
    DT_ASSIGN_OR_RETURN(
        testing::TokenBatch data,
        testing::UniformTokenBatch(generator, request.config.vocab_size,
                                   request.batch, request.seq));
    DT_ASSIGN_OR_RETURN(auto batch,
                        trainer->MakeBatch(data.tokens, data.targets));
    parallel::LlamaTrainer::PhaseComms comms;
    DT_RETURN_IF_ERROR(trainer->StepCounted(batch, comms).status());
    Tally tally;
    for (const auto& [phase, counter] :
         {std::pair<std::string, CommCounter*>{"forward", &comms.forward},
          {"backward", &comms.backward},
          {"optimizer", &comms.update}}) {
      for (const CommCounter::Event& e : counter->events()) {
        Count(phase, "", e.kind, e.bytes, 1, tally);
        if (phase == "optimizer") continue;
        // A gradient bucket counts once under each owner of its tensors,
        // with their bytes.
        std::vector<CommCounter::Event::Share> shares = e.shares;
        if (shares.empty()) shares.push_back({e.owner, e.bytes});
        for (const CommCounter::Event::Share& share : shares) {
          auto name = names.find(share.owner);
          Count(phase, name == names.end() ? kOutsideModules : name->second,
                e.kind, share.bytes, 1, tally);
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    tallies[groups.rank()] = std::move(tally);
    return absl::OkStatus();
  }));
  return tallies;
}

Tally ExplainedTally(const ExplainReport& report) {
  Tally tally;
  for (const auto& [phase, totals] :
       {std::pair<std::string, const CommTotals*>{"forward", &report.forward},
        {"backward", &report.backward},
        {"optimizer", &report.optimizer}}) {
    for (CommKind kind : CommTotals::kKinds) {
      const CommTotals::PerKind& k = totals->of(kind);
      if (k.count == 0) continue;
      auto& t = tally[{phase, "", kind}];
      t.first = k.count;
      t.second = k.bytes_per_rank;
    }
  }
  for (const ModuleReport& m : report.modules) {
    for (const CollectiveSummary& c : m.forward) {
      Count("forward", m.name, c.kind, c.bytes_per_rank, c.count, tally);
    }
    for (const CollectiveSummary& c : m.backward) {
      Count("backward", m.name, c.kind, c.bytes_per_rank, c.count, tally);
    }
  }
  return tally;
}

std::string TallyText(const Tally& tally) {
  std::string text;
  for (const auto& [key, value] : tally) {
    absl::StrAppend(&text, std::get<0>(key), " ", std::get<1>(key), " ",
                    CommKindName(std::get<2>(key)), ": ", value.first, " / ",
                    value.second, " B\n");
  }
  return text;
}

ExplainRequest TinyRequest(const std::string& plan_path) {
  // A context-parallel plan needs its cp mesh dim.
  const parallel::Plan plan = *parallel::LoadPlanFile(plan_path);
  ExplainRequest request{
      "tiny", plan_path, *LoadLlamaConfig("tiny"), plan,
      *ParseMeshFlag(plan.context_parallel ? "dp=2,cp=2,tp=2" : "dp=2,tp=2")};
  request.batch = 2;
  request.seq = 8;
  request.dtype = DType::kF32;
  return request;
}

TEST(ExplainTest, EqualsRealityForEveryShippedPlanAndRank) {
  const std::vector<std::string> plans = ShippedPlanPaths();
  ASSERT_GE(plans.size(), 6u);
  for (const std::string& path : plans) {
    SCOPED_TRACE(path);
    const ExplainRequest request = TinyRequest(path);
    absl::StatusOr<std::vector<Tally>> real = RealTallies(request);
    ASSERT_TRUE(real.ok()) << real.status();
    for (int64_t rank = 0; rank < request.mesh.size(); ++rank) {
      SCOPED_TRACE(absl::StrCat("rank ", rank));
      absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request, rank);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(TallyText(ExplainedTally(*report)), TallyText((*real)[rank]));
      // Every plan communicates (tp at least).
      EXPECT_GT(report->step.collectives, 0);
      EXPECT_EQ(report->step.collectives, report->forward.collectives +
                                              report->backward.collectives +
                                              report->optimizer.collectives);
    }
  }
}

// Parameter bytes of the tiny model under tp_dp on (dp=2, tp=2), worked out
// from the plan by hand: wq, wk, wv, w1, w3 split on out features and wo, w2
// on in features over tp, tok_embeddings and output on vocab rows (halved;
// the tiny sizes are even), the norms replicated.
TEST(ExplainTest, MemoryOfTpDpMatchesHandCount) {
  const ExplainRequest request =
      TinyRequest(absl::StrCat(PlansDir(), "/tp_dp.json"));
  const nn::LlamaConfig& c = request.config;
  const int64_t kv_dim = c.kv_heads() * c.head_dim();
  const int64_t hidden = c.hidden_dim();
  const int64_t per_layer_split = (c.dim * c.dim + 2 * kv_dim * c.dim +
                                   c.dim * c.dim + 3 * hidden * c.dim) /
                                  2;
  const int64_t per_layer_whole = 2 * c.dim;  // Two norms.
  const int64_t elements = c.n_layers * (per_layer_split + per_layer_whole) +
                           c.vocab_size * c.dim + c.dim;
  for (int64_t rank : {0, 3}) {
    absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request, rank);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->memory.parameters, elements * 4);
    EXPECT_EQ(report->memory.gradients, elements * 4);
    EXPECT_EQ(report->memory.optimizer_state, 2 * elements * 4);
    // At least the logits [batch/dp * seq, vocab] f32 are kept.
    EXPECT_GE(report->memory.peak_activations,
              request.batch / 2 * request.seq * c.vocab_size * 4);
  }
  ExplainRequest longer = request;
  longer.seq = 32;
  absl::StatusOr<ExplainReport> short_report = ExplainLlamaStep(request);
  absl::StatusOr<ExplainReport> long_report = ExplainLlamaStep(longer);
  ASSERT_TRUE(short_report.ok() && long_report.ok());
  EXPECT_GT(long_report->memory.peak_activations,
            3 * short_report->memory.peak_activations);
  EXPECT_EQ(long_report->memory.parameters, short_report->memory.parameters);
}

TEST(ExplainTest, WarnsAboutUnevenShardsAndLargeGathers) {
  ExplainRequest request =
      TinyRequest(absl::StrCat(PlansDir(), "/tp_sp_loss_parallel_dp.json"));
  request.config.vocab_size = 255;  // The output's vocab dim splits 128/127.
  absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request);
  ASSERT_TRUE(report.ok()) << report.status();
  bool uneven = false;
  for (const std::string& w : report->warnings) {
    uneven |= absl::StrContains(w, "uneven shards: parameter output.weight") &&
              absl::StrContains(w, "dim 0 of size 255 in 2 shards");
  }
  EXPECT_TRUE(uneven) << absl::StrJoin(report->warnings, "\n");
  for (const std::string& w : report->warnings) {
    EXPECT_FALSE(absl::StrContains(w, "large gather")) << w;
  }

  // The 1B model's replicated embedding and output weights get their
  // gradients back sharded on tp and gathered: 128256 x 2048 bf16 in 8
  // shards, 7/8 of 501 MiB = 438.4 MiB received per rank.
  ExplainRequest big{
      "1b", "tp_dp", *LoadLlamaConfig("1b"),
      *parallel::LoadPlanFile(absl::StrCat(PlansDir(), "/tp_dp.json")),
      *ParseMeshFlag("dp=8,tp=8")};
  big.batch = 8;
  big.seq = 2048;
  report = ExplainLlamaStep(big);
  ASSERT_TRUE(report.ok()) << report.status();
  bool large = false;
  for (const std::string& w : report->warnings) {
    large |= absl::StrContains(w, "large gather") &&
             absl::StrContains(w, "438.4 MiB");
  }
  EXPECT_TRUE(large) << absl::StrJoin(report->warnings, "\n");
}

// Megatron tensor parallelism by hand: each rowwise layer (wo, w2) sums its
// partial output over tp with one all-reduce of its [batch/dp, seq, dim] f32
// block (2 (n-1)/n x 8 KiB received for n = 2); colwise layers communicate
// nothing in forward.
TEST(ExplainTest, AttributesForwardCollectivesToTheirModules) {
  const ExplainRequest request =
      TinyRequest(absl::StrCat(PlansDir(), "/tp_dp.json"));
  absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request);
  ASSERT_TRUE(report.ok()) << report.status();
  const double block_bytes = 1.0 * request.seq * request.config.dim * 4;
  int rowwise = 0;
  for (const ModuleReport& m : report->modules) {
    SCOPED_TRACE(m.name);
    if (absl::EndsWith(m.name, ".wo") || absl::EndsWith(m.name, ".w2")) {
      ++rowwise;
      ASSERT_EQ(m.forward.size(), 1u);
      EXPECT_EQ(m.forward[0].kind, CommKind::kAllReduce);
      EXPECT_EQ(m.forward[0].mesh_dims, std::vector<int64_t>{1});
      EXPECT_EQ(m.forward[0].count, 1);
      EXPECT_DOUBLE_EQ(m.forward[0].bytes_per_rank, block_bytes);
    }
    if (absl::EndsWith(m.name, ".wq") || absl::EndsWith(m.name, ".w1")) {
      EXPECT_TRUE(m.forward.empty());
    }
  }
  EXPECT_EQ(rowwise, 2 * request.config.n_layers);
}

// Data parallelism by replication: every parameter's gradient is summed over
// dp by one all-reduce of its local (tp) shard, owned by the parameter's
// module. For wq ([dim, dim] split on out features over tp = 2, f32) that is
// one dp all-reduce of dim * dim / 2 * 4 bytes (received: 2 (n-1)/n x that
// for n = 2) at the end of its backward.
TEST(ExplainTest, AttributesGradientSynchronizationToTheParameters) {
  const ExplainRequest request =
      TinyRequest(absl::StrCat(PlansDir(), "/tp_dp.json"));
  absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request);
  ASSERT_TRUE(report.ok()) << report.status();
  const double shard_bytes =
      1.0 * request.config.dim * request.config.dim / 2 * 4;
  int checked = 0;
  for (const ModuleReport& m : report->modules) {
    if (!absl::EndsWith(m.name, ".wq")) continue;
    SCOPED_TRACE(m.name);
    ++checked;
    int dp_all_reduces = 0;
    for (const CollectiveSummary& c : m.backward) {
      if (c.kind == CommKind::kAllReduce &&
          c.mesh_dims == std::vector<int64_t>{0}) {
        dp_all_reduces += static_cast<int>(c.count);
        EXPECT_DOUBLE_EQ(c.bytes_per_rank, shard_bytes);
      }
    }
    EXPECT_EQ(dp_all_reduces, 1);
  }
  EXPECT_EQ(checked, request.config.n_layers);
}

TEST(ExplainTest, RejectsARankOutsideTheMesh) {
  const ExplainRequest request =
      TinyRequest(absl::StrCat(PlansDir(), "/tp_dp.json"));
  absl::StatusOr<ExplainReport> report = ExplainLlamaStep(request, 4);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(absl::StrContains(report.status().message(), "rank 4"));
}

// Parameter counts Meta publishes (the 1B one with an untied output layer:
// 1.236B tied + 128256 x 2048), and the hidden dims of the model cards.
TEST(ExplainConfigTest, ShippedConfigsHaveMetasSizes) {
  const std::tuple<const char*, int64_t, int64_t> expected[] = {
      {"1b", 1498482688, 8192},
      {"8b", 8030261248, 14336},
      {"70b", 70553706496, 28672},
      {"405b", 405853388800, 53248},
  };
  for (const auto& [name, params, hidden] : expected) {
    SCOPED_TRACE(name);
    absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig(name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->hidden_dim(), hidden);
    auto model = nn::Transformer::Create(*config);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->NumParameters(), params);
  }
  absl::StatusOr<nn::LlamaConfig> tiny = LoadLlamaConfig("tiny");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->dim, 256);
  EXPECT_EQ(tiny->n_layers, 4);
  EXPECT_EQ(tiny->kv_heads(), 4);
  EXPECT_EQ(tiny->vocab_size, 256);
}

TEST(ExplainConfigTest, ErrorsNameTheValue) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {"{\"dim\": 64, \"n_layerz\": 2}", "unknown key \"n_layerz\""},
      {"{\"dim\": 64.5}", "\"dim\" must be an integer, got 64.5"},
      {"{\"dim\": \"64\"}", "\"dim\" must be a number, got string"},
      {"[1]", "expected an object, got array"},
      {"{\"dim\": 64,", "model config:"},
      {"{\"dim\": 60, \"n_heads\": 8}", "dim 60 is not divisible by n_heads"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<nn::LlamaConfig> config = ParseLlamaConfigJson(c.json);
    ASSERT_FALSE(config.ok()) << c.json;
    EXPECT_TRUE(absl::StrContains(config.status().message(), c.message))
        << config.status();
  }
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig("7b");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::StrContains(config.status().message(), "\"7b\""));
  EXPECT_TRUE(absl::StrContains(config.status().message(), "tiny"));

  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/bad_config.json");
  std::ofstream(path) << "{\"dim\": 64, \"vocab\": 10}";
  config = LoadLlamaConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::StrContains(config.status().message(), path));
  EXPECT_TRUE(absl::StrContains(config.status().message(), "\"vocab\""));
}

TEST(ExplainConfigTest, AFileGivesItsFieldsAndDefaultsTheRest) {
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/config.json");
  std::ofstream(path) << "{\"dim\": 64, \"n_layers\": 3, \"n_heads\": 4, "
                         "\"ffn_dim_multiplier\": 1.5}";
  absl::StatusOr<nn::LlamaConfig> config = LoadLlamaConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dim, 64);
  EXPECT_EQ(config->n_layers, 3);
  EXPECT_EQ(config->kv_heads(), 4);
  EXPECT_EQ(config->ffn_dim_multiplier, 1.5);
  EXPECT_EQ(config->vocab_size, nn::LlamaConfig().vocab_size);
}

}  // namespace
}  // namespace dtensor
