// Styles as classes (dtensor/parallel/parallel_style.h) and by name
// (dtensor/parallel/style_registry.h): a user style registered from this test
// and used from a plan file; the Hugging Face tp_plan names; keys that name a
// parameter. Each plan's forward and backward step is checked against the
// same model on one rank without a plan.
#include "dtensor/parallel/style_registry.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/parallel/plan_resolution.h"
#include "dtensor/runtime.h"
#include "examples/user_style/colwise_gathered.h"
#include "gtest/gtest.h"
#include "tests/parallel/style_test_util.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int64_t kBatch = 4, kIn = 8, kHidden = 12;

// The user style (examples/user_style: a Linear split like colwise, its
// output all-gathered to Replicate), registered by name from this test.
absl::Status RegisterUserStyle() {
  static const absl::Status status = StyleRegistry::Global().Register(
      "colwise_gathered", examples::MakeColwiseGathered);
  return status;
}

struct Result {
  std::vector<float> output;
  std::map<std::string, std::vector<float>> grads;
  // Rank 0's: each parameter's placement on the tp dim ("0.weight S(0)"),
  // the output's placements, the forward collectives by kind.
  std::map<std::string, std::string> shardings;
  std::string output_layout;
  int64_t forward_all_reduces = 0;
  int64_t forward_all_gathers = 0;
  int64_t forward_collectives = 0;
  int64_t hooks = 0;  // Input and output hooks in the whole tree.
};

// The model: "0" Linear(8, 12), "1" a ModuleList holding "1.0"
// Linear(12, 8), both with bias; loss sum(y * y) on x [4, 8] replicated.
absl::StatusOr<std::unique_ptr<nn::ModuleList>> BuildModel() {
  nn::LinearOptions options;
  options.bias = true;
  options.weight_init = nn::Initializer::Normal(0, 0.3);
  options.bias_init = nn::Initializer::Normal(0, 0.5);
  auto model = std::make_unique<nn::ModuleList>();
  DT_ASSIGN_OR_RETURN(auto first, nn::Linear::Create(kIn, kHidden, options));
  DT_RETURN_IF_ERROR(model->Append(std::move(first)).status());
  auto inner = std::make_unique<nn::ModuleList>();
  DT_ASSIGN_OR_RETURN(auto second, nn::Linear::Create(kHidden, kIn, options));
  DT_RETURN_IF_ERROR(inner->Append(std::move(second)).status());
  DT_RETURN_IF_ERROR(model->Append(std::move(inner)).status());
  return model;
}

absl::Status RankStep(ProcessGroups& groups, const DeviceMesh& mesh,
                      const std::optional<Plan>& plan, Result& mine) {
  auto runtime = Runtime::ForRank(groups);
  DT_ASSIGN_OR_RETURN(auto model, BuildModel());
  DT_RETURN_IF_ERROR(
      parallel_testing::InitializeAndParallelize(*model, runtime, mesh, plan));
  std::vector<float> values;
  for (int64_t i = 0; i < kBatch * kIn; ++i) {
    values.push_back(std::sin(0.7 * i + 0.3));
  }
  DT_ASSIGN_OR_RETURN(Tensor full, Tensor::FromVector(values, {kBatch, kIn}));
  DT_ASSIGN_OR_RETURN(
      DTensor x, parallel_testing::DistributeReplicated(runtime, full, mesh));
  for (const nn::NamedSlot& slot : model->NamedParameters()) {
    mine.shardings[slot.name] = slot.slot->value.placements().back().ToString();
  }
  for (const nn::NamedModule& m : model->NamedModules()) {
    mine.hooks += m.module->num_input_hooks() + m.module->num_output_hooks();
  }
  DT_ASSIGN_OR_RETURN(
      parallel_testing::ModelStep step,
      parallel_testing::ForwardBackward(
          *model, x, [](const DTensor& y) -> absl::StatusOr<DTensor> {
            DT_ASSIGN_OR_RETURN(DTensor squares, ops::Mul(y, y));
            return ops::Sum(squares);
          }));
  mine.forward_all_reduces = step.forward.count(CommKind::kAllReduce);
  mine.forward_all_gathers = step.forward.count(CommKind::kAllGather);
  mine.forward_collectives = step.forward.total_collectives();
  const DTensor& y = step.output;
  mine.output_layout =
      absl::StrCat(y.mesh() == mesh ? "" : "tp-local ",
                   absl::StrJoin(y.placements(), ",",
                                 [](std::string* out, const Placement& p) {
                                   out->append(p.ToString());
                                 }));
  DT_ASSIGN_OR_RETURN(Tensor y_full, y.FullTensor());
  mine.output = y_full.ToVector<float>().value();
  mine.grads = std::move(step.grads);
  return absl::OkStatus();
}

// One step on `tp` in-process ranks (a 1-D "tp" mesh) with `plan_text`, or
// without a plan; rank 0's result.
absl::StatusOr<Result> Step(int64_t tp,
                            const std::optional<std::string>& plan_text) {
  std::optional<Plan> plan;
  if (plan_text) {
    DT_ASSIGN_OR_RETURN(plan, ParsePlan(*plan_text));
  }
  const DeviceMesh mesh = parallel_testing::Mesh({tp}, {"tp"});
  return parallel_testing::RankZeroResult<Result>(
      mesh, [&](ProcessGroups& groups, Result& mine) {
        return RankStep(groups, mesh, plan, mine);
      });
}

// Runs `plan` on tp=2 and tp=4 and expects the one-rank output and
// gradients; returns the tp=2 result.
Result ExpectMatchesOneRank(const std::string& plan) {
  auto one = Step(1, std::nullopt);
  EXPECT_TRUE(one.ok()) << one.status();
  Result two;
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(plan, " on tp=", tp));
    auto many = Step(tp, plan);
    EXPECT_TRUE(many.ok()) << many.status();
    if (!many.ok() || !one.ok()) return {};
    parallel_testing::ExpectClose(many->output, one->output, "output");
    EXPECT_EQ(many->grads.size(), one->grads.size());
    for (const auto& [name, grad] : one->grads) {
      parallel_testing::ExpectClose(many->grads[name], grad, name);
    }
    if (tp == 2) two = *many;
  }
  return two;
}

TEST(StyleRegistryTest, UserStyleFromAPlanFileMatchesOneRank) {
  ASSERT_TRUE(RegisterUserStyle().ok()) << RegisterUserStyle();
  const Result r = ExpectMatchesOneRank(
      R"({"tp": {"0": "colwise_gathered", "1.0": "colwise_gathered"}})");
  EXPECT_EQ(r.shardings.at("0.weight"), "S(0)");
  EXPECT_EQ(r.shardings.at("0.bias"), "S(0)");
  EXPECT_EQ(r.shardings.at("1.0.weight"), "S(0)");
  EXPECT_EQ(r.output_layout, "R");
  // Each Linear's output is all-gathered: nothing else moves.
  EXPECT_EQ(r.forward_all_gathers, 2);
  EXPECT_EQ(r.forward_collectives, 2);
}

TEST(StyleRegistryTest, RegistryErrorsNameTheValue) {
  ASSERT_TRUE(RegisterUserStyle().ok());
  StyleRegistry& registry = StyleRegistry::Global();
  const StyleFactory factory = examples::MakeColwiseGathered;
  absl::Status again = registry.Register("colwise_gathered", factory);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("\"colwise_gathered\""), std::string::npos);
  EXPECT_FALSE(registry.Register("", factory).ok());
  EXPECT_FALSE(registry.Register("null_factory", nullptr).ok());
  auto unknown = registry.Create("diagonal", {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  // The known names include the user's.
  EXPECT_NE(unknown.status().message().find("colwise_gathered"),
            std::string::npos);
  // An option the user style does not take, through a plan file.
  auto plan = ParsePlan(R"({"tp": {"0": {"style": "colwise_gathered",
                                         "output_layouts": "R"}}})");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("\"output_layouts\""),
            std::string::npos)
      << plan.status();
  EXPECT_NE(plan.status().message().find("\"0\""), std::string::npos);
}

TEST(StyleRegistryTest, BuiltinStylesAreTheirClasses) {
  // Reference: the names and option handling stated in docs/parallel.md.
  const std::pair<const char*, const char*> names[] = {
      {"colwise", "colwise"},
      {"rowwise", "rowwise"},
      {"sequence_parallel", "sequence_parallel"},
      {"prepare_input", "prepare_input"},
      {"prepare_output", "prepare_output"},
      {"loss_parallel", "loss_parallel"},
      {"colwise_rep", "colwise_rep"},
      {"rowwise_rep", "rowwise_rep"},
      {"local_colwise", "local_colwise"},
      {"local_rowwise", "local_rowwise"},
      {"local", "local"},
      {"gather", "gather"},
      {"replicate", "replicate"},
  };
  for (const auto& [name, style_name] : names) {
    auto style = StyleRegistry::Global().Create(name, {});
    ASSERT_TRUE(style.ok()) << name << style.status();
    EXPECT_EQ((*style)->name(), style_name);
  }
  StyleOptions options;
  options.output_layouts = "S(1)";
  auto rowwise = StyleRegistry::Global().Create("rowwise", options);
  ASSERT_TRUE(rowwise.ok());
  auto* typed = dynamic_cast<const RowwiseParallel*>(rowwise->get());
  ASSERT_NE(typed, nullptr);
  EXPECT_EQ(typed->options().output_layouts, "S(1)");
  // Hugging Face names take no options.
  for (const char* name : {"colwise_rep", "local", "gather", "replicate"}) {
    auto style = StyleRegistry::Global().Create(name, options);
    ASSERT_FALSE(style.ok()) << name;
    EXPECT_NE(style.status().message().find("output_layouts"),
              std::string::npos);
  }
}

// The Hugging Face tp_plan names on Linear(8, 12) -> Linear(12, 8): the
// layouts docs/parallel.md states, and the one-rank values.
TEST(StyleRegistryTest, HuggingFaceColwiseRowwise) {
  const Result r =
      ExpectMatchesOneRank(R"({"tp": {"0": "colwise", "1.0": "rowwise"}})");
  EXPECT_EQ(r.shardings.at("0.weight"), "S(0)");
  EXPECT_EQ(r.shardings.at("1.0.weight"), "S(1)");
  EXPECT_EQ(r.shardings.at("1.0.bias"), "R");
  EXPECT_EQ(r.output_layout, "R");
  EXPECT_EQ(r.forward_all_reduces, 1);
  EXPECT_EQ(r.forward_collectives, 1);
}

TEST(StyleRegistryTest, HuggingFaceRepStyles) {
  // colwise_rep gathers its output; rowwise_rep takes the replicated input
  // (a local slice to S(-1)) and all-reduces.
  const Result r = ExpectMatchesOneRank(
      R"({"tp": {"0": "colwise_rep", "1.0": "rowwise_rep"}})");
  EXPECT_EQ(r.shardings.at("0.weight"), "S(0)");
  EXPECT_EQ(r.shardings.at("1.0.weight"), "S(1)");
  EXPECT_EQ(r.output_layout, "R");
  EXPECT_EQ(r.forward_all_gathers, 1);
  EXPECT_EQ(r.forward_all_reduces, 1);
  EXPECT_EQ(r.forward_collectives, 2);
}

TEST(StyleRegistryTest, HuggingFaceLocalStyles) {
  // local_colwise hands on the tp-local value; local_rowwise reads it as
  // S(-1), all-reduces and hands on its (replicated) tp-local value.
  const Result r = ExpectMatchesOneRank(
      R"({"tp": {"0": "local_colwise", "1.0": "local_rowwise"}})");
  EXPECT_EQ(r.output_layout, "tp-local R");
  EXPECT_EQ(r.forward_all_reduces, 1);
  EXPECT_EQ(r.forward_collectives, 1);
}

TEST(StyleRegistryTest, HuggingFaceReplicateAndLocal) {
  // replicate: parameters and activations Replicate, no collective; local:
  // parameters as they are, no hooks (the ModuleList "1" computes on what it
  // is given).
  const Result r =
      ExpectMatchesOneRank(R"({"tp": {"0": "replicate", "1": "local"}})");
  EXPECT_EQ(r.shardings.at("0.weight"), "R");
  EXPECT_EQ(r.shardings.at("1.0.weight"), "R");
  EXPECT_EQ(r.output_layout, "R");
  EXPECT_EQ(r.forward_collectives, 0);
  EXPECT_EQ(r.hooks, 2);  // replicate's input and output hooks.
}

TEST(StyleRegistryTest, ParameterKeyPlacesTheParameterAloneAndGatherReduces) {
  // "1.0.weight" rowwise: the weight S(1), its bias and module untouched (no
  // hooks), so 1.0's output is Partial; "gather" on "1" all-reduces it.
  const Result r = ExpectMatchesOneRank(
      R"({"tp": {"0": "colwise", "1.0.weight": "rowwise", "1": "gather"}})");
  EXPECT_EQ(r.shardings.at("0.weight"), "S(0)");
  EXPECT_EQ(r.shardings.at("1.0.weight"), "S(1)");
  EXPECT_EQ(r.shardings.at("1.0.bias"), "R");
  EXPECT_EQ(r.output_layout, "R");
  EXPECT_EQ(r.forward_all_reduces, 1);
  EXPECT_EQ(r.forward_collectives, 1);
  // colwise's input hook (R) and gather's output hook; none on 1.0.
  EXPECT_EQ(r.hooks, 2);
}

// gather on a module whose output is tp-local (Hugging Face's all-reduce of
// the ranks' local outputs): "0" local_colwise hands on each rank's column
// block of x W^T + b, the empty ModuleList "1" passes it on, and gather sums
// the blocks over the ranks. Reference: the one-rank output's column blocks
// summed by hand.
absl::Status GatherStep(ProcessGroups& groups, const DeviceMesh& mesh,
                        const std::optional<Plan>& plan,
                        std::vector<float>& out) {
  auto runtime = Runtime::ForRank(groups);
  nn::LinearOptions options;
  options.bias = true;
  options.weight_init = nn::Initializer::Normal(0, 0.3);
  options.bias_init = nn::Initializer::Normal(0, 0.5);
  nn::ModuleList model;
  DT_ASSIGN_OR_RETURN(auto linear, nn::Linear::Create(kIn, kHidden, options));
  DT_RETURN_IF_ERROR(model.Append(std::move(linear)).status());
  DT_RETURN_IF_ERROR(model.Append(std::make_unique<nn::ModuleList>()).status());
  DT_RETURN_IF_ERROR(
      parallel_testing::InitializeAndParallelize(model, runtime, mesh, plan));
  std::vector<float> values;
  for (int64_t i = 0; i < kBatch * kIn; ++i)
    values.push_back(std::cos(0.3 * i));
  DT_ASSIGN_OR_RETURN(Tensor full, Tensor::FromVector(values, {kBatch, kIn}));
  DT_ASSIGN_OR_RETURN(
      DTensor x, parallel_testing::DistributeReplicated(runtime, full, mesh));
  DT_ASSIGN_OR_RETURN(DTensor y, model(x));
  if (y.mesh() != mesh || !y.placements()[0].is_replicate()) {
    return absl::InternalError("gather's output is not R on the mesh");
  }
  DT_ASSIGN_OR_RETURN(Tensor y_full, y.FullTensor());
  out = y_full.ToVector<float>().value();
  return absl::OkStatus();
}

TEST(StyleRegistryTest, GatherSumsTheRanksTpLocalOutputs) {
  const DeviceMesh one_mesh = parallel_testing::Mesh({1}, {"tp"});
  auto one = parallel_testing::RankZeroResult<std::vector<float>>(
      one_mesh, [&](ProcessGroups& groups, std::vector<float>& out) {
        return GatherStep(groups, one_mesh, std::nullopt, out);
      });
  ASSERT_TRUE(one.ok()) << one.status();
  auto plan = ParsePlan(R"({"tp": {"0": "local_colwise", "1": "gather"}})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int64_t tp : {2, 4}) {
    const DeviceMesh mesh = parallel_testing::Mesh({tp}, {"tp"});
    auto many = parallel_testing::RankZeroResult<std::vector<float>>(
        mesh, [&](ProcessGroups& groups, std::vector<float>& out) {
          return GatherStep(groups, mesh, *plan, out);
        });
    ASSERT_TRUE(many.ok()) << many.status();
    const int64_t block = kHidden / tp;
    std::vector<float> want(kBatch * block, 0.0f);
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t j = 0; j < kHidden; ++j) {
        want[b * block + j % block] += (*one)[b * kHidden + j];
      }
    }
    parallel_testing::ExpectClose(*many, want, absl::StrCat("tp=", tp));
  }
}

TEST(StyleRegistryTest, RowwiseRepReadsATpLocalInputAsTheReplica) {
  // "0" hands on its all-gathered output as a tp-local value (the whole
  // activation on each rank); rowwise_rep wraps it as R, slices to S(-1).
  const Result r = ExpectMatchesOneRank(R"({"tp": {
      "0": {"style": "colwise", "output_layouts": "R",
            "use_local_output": true},
      "1.0": "rowwise_rep"}})");
  EXPECT_EQ(r.output_layout, "R");
  EXPECT_EQ(r.forward_all_gathers, 1);
  EXPECT_EQ(r.forward_all_reduces, 1);
}

TEST(StyleRegistryTest, LocalModuleWithParametersRejectsATpLocalInput) {
  // docs/parallel.md: the parameters stay on the full mesh, so the ops
  // refuse the tp-local input.
  auto step = Step(2, R"({"tp": {"0": "local_colwise", "1": "local"}})");
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("on another mesh"), std::string::npos)
      << step.status();
}

TEST(StyleRegistryTest, ParameterKeyErrorsNameBothKeys) {
  auto model = BuildModel();
  ASSERT_TRUE(model.ok());
  const DeviceMesh mesh = parallel_testing::Mesh({2}, {"tp"});
  const std::pair<const char*, std::vector<const char*>> cases[] = {
      {R"({"tp": {"0": "colwise", "0.weight": "rowwise"}})",
       {"\"0.weight\"", "module key \"0\"", "parameter key \"0.weight\""}},
      {R"({"tp": {"0.weight": "rowwise", "0": "colwise"}})",
       {"\"0.weight\"", "module key \"0\"", "parameter key \"0.weight\""}},
      {R"({"tp": {"*.weight": "colwise", "0.weight": "rowwise"}})",
       {"\"0.weight\" is matched by both \"*.weight\" and \"0.weight\""}},
      {R"({"tp": {"0.scale": "colwise"}})",
       {"\"0.scale\" matches no module or parameter"}},
      {R"({"tp": {"1.weight": "colwise"}})",
       {"\"1.weight\" matches no module or parameter"}},
  };
  for (const auto& [text, wanted] : cases) {
    auto plan = ParsePlan(text);
    ASSERT_TRUE(plan.ok()) << text << plan.status();
    auto resolved = ResolvePlan(*plan, **model, mesh);
    ASSERT_FALSE(resolved.ok()) << text;
    for (const char* want : wanted) {
      EXPECT_NE(resolved.status().message().find(want), std::string::npos)
          << text << " -> " << resolved.status();
    }
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
