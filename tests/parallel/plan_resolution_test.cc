// ResolvePlan (dtensor/parallel/plan_resolution.h) on the tiny Llama: which
// module gets which style and hooks, which parameter which sharding, which
// FSDP groups, each against expectations written out by hand from
// docs/parallel.md; and the errors, each naming the bad value.
#include "dtensor/parallel/plan_resolution.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/placement.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace parallel {
namespace {

DeviceMesh Mesh() { return DeviceMesh::Create({2, 2}, {"dp", "tp"}).value(); }

// The tiny Llama (two blocks), every parameter Replicate on Mesh()
// (metadata only).
std::unique_ptr<nn::Transformer> TinyLlama() {
  auto model = nn::BuildLlama(nn_testing::TinyConfig(),
                              Runtime::MetadataOnly(0), Mesh());
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(model).value();
}

// A plan and its resolution, whose entries point into the plan.
struct Resolved {
  Plan plan;
  PlanResolution r;
};

std::unique_ptr<Resolved> Resolve(const std::string& json, nn::Module& model) {
  auto resolved = std::make_unique<Resolved>();
  absl::StatusOr<Plan> plan = ParsePlan(json);
  EXPECT_TRUE(plan.ok()) << json << plan.status();
  if (plan.ok()) resolved->plan = *std::move(plan);
  absl::StatusOr<PlanResolution> r = ResolvePlan(resolved->plan, model, Mesh());
  EXPECT_TRUE(r.ok()) << json << r.status();
  if (r.ok()) resolved->r = *std::move(r);
  return resolved;
}

std::string Text(const std::optional<Placement>& placement) {
  return placement ? placement->ToString() : "-";
}

// "fqn style [slot parameter] | input output" for an entry.
std::string Describe(const ResolvedEntry& r) {
  const std::string slot = r.parameter.empty() ? "" : " slot " + r.parameter;
  return r.fqn + " " + r.style->name() + slot + " | " + Text(r.hooks.input) +
         " " + Text(r.hooks.output);
}

// The modules of a group by name, `model` giving the names.
std::vector<std::string> MemberNames(const FsdpGroup& group,
                                     nn::Module& model) {
  std::map<const nn::Module*, std::string> names;
  for (const nn::NamedModule& m : model.NamedModules()) {
    names[m.module] = m.name;
  }
  std::vector<std::string> members;
  for (const nn::Module* member : group.members) {
    members.push_back(names[member]);
  }
  return members;
}

// The modules of block `i` that own parameters, in module order; the
// attention's projections only `with_attention`.
std::vector<std::string> BlockMembers(int i, bool with_attention) {
  const std::string b = "layers." + std::to_string(i) + ".";
  std::vector<std::string> members;
  if (with_attention) {
    for (const char* w : {"wq", "wk", "wv", "wo"}) {
      members.push_back(b + "attention." + w);
    }
  }
  for (const char* w : {"w1", "w2", "w3"}) {
    members.push_back(b + "feed_forward." + w);
  }
  members.push_back(b + "attention_norm");
  members.push_back(b + "ffn_norm");
  return members;
}

constexpr char kWildcardPlan[] = R"json({"tp": {
    "layers.*.attention.wq": "colwise",
    "layers.*.attention.wo": {"style": "rowwise", "output_layouts": "S(1)"},
    "layers.1.feed_forward.w2.weight": "rowwise",
    "norm": "sequence_parallel",
    "output": "loss_parallel"},
  "dp": "fsdp", "fsdp_groups": ["layers.*"], "fsdp_prefetch": false})json";

TEST(PlanResolutionTest, WildcardsBindModulesAndParameterKeysWithHooks) {
  auto model = TinyLlama();
  const auto resolved = Resolve(kWildcardPlan, *model);
  const PlanResolution& r = resolved->r;
  EXPECT_EQ(r.tp_dim, 1);
  EXPECT_EQ(r.dp_dim, 0);
  std::vector<std::string> entries;
  for (const ResolvedEntry& e : r.entries) entries.push_back(Describe(e));
  // colwise: input R, output as propagated; rowwise: input S(-1), output
  // output_layouts; sequence_parallel: input S(1); loss_parallel: input R,
  // output S(-1); a parameter key: no hooks. Pre-order over the tree.
  EXPECT_EQ(entries,
            (std::vector<std::string>{
                "layers.0.attention.wq colwise | R -",
                "layers.0.attention.wo rowwise | S(-1) S(1)",
                "layers.1.attention.wq colwise | R -",
                "layers.1.attention.wo rowwise | S(-1) S(1)",
                "layers.1.feed_forward.w2.weight rowwise slot weight | - -",
                "norm sequence_parallel | S(1) -",
                "output loss_parallel | R S(-1)",
            }));
}

TEST(PlanResolutionTest, ParameterShardingsOnTpAndFsdp) {
  auto model = TinyLlama();
  const auto resolved = Resolve(kWildcardPlan, *model);
  const PlanResolution& r = resolved->r;
  // Mesh dims (dp, tp). FSDP shards dim 0 on dp, inside a tp shard of dim 0
  // ("S(0)[1],S(0)[0]": dp second); entries' tp placements: colwise and
  // loss_parallel Linear S(0), rowwise S(1), sequence_parallel R; others R.
  std::map<std::string, std::string> want = {
      {"tok_embeddings.weight", "S(0),R"},
      {"norm.weight", "S(0),R"},
      {"output.weight", "S(0)[1],S(0)[0]"},
  };
  for (const char* layer : {"layers.0.", "layers.1."}) {
    const std::string l = layer;
    want[l + "attention.wq.weight"] = "S(0)[1],S(0)[0]";
    want[l + "attention.wk.weight"] = "S(0),R";
    want[l + "attention.wv.weight"] = "S(0),R";
    want[l + "attention.wo.weight"] = "S(0),S(1)";
    want[l + "feed_forward.w1.weight"] = "S(0),R";
    want[l + "feed_forward.w2.weight"] = "S(0),R";
    want[l + "feed_forward.w3.weight"] = "S(0),R";
    want[l + "attention_norm.weight"] = "S(0),R";
    want[l + "ffn_norm.weight"] = "S(0),R";
  }
  want["layers.1.feed_forward.w2.weight"] = "S(0),S(1)";  // The parameter key.
  std::map<std::string, std::string> got;
  std::vector<std::string> order;
  for (const ResolvedParameter& p : r.parameters) {
    got[p.fqn] = p.sharding.ToString();
    order.push_back(p.fqn);
    EXPECT_EQ(p.slot, *model->FindSlot(p.fqn)) << p.fqn;
  }
  EXPECT_EQ(got, want);
  std::vector<std::string> named;
  for (const nn::NamedSlot& s : model->NamedParameters()) {
    named.push_back(s.name);
  }
  EXPECT_EQ(order, named);  // Pre-order, as the tree lists them.
}

TEST(PlanResolutionTest, FsdpGroupsAndOptions) {
  auto model = TinyLlama();
  const auto resolved = Resolve(kWildcardPlan, *model);
  const PlanResolution& r = resolved->r;
  ASSERT_TRUE(r.fsdp.has_value());
  EXPECT_EQ(r.fsdp->dp_dim, 0);
  EXPECT_FALSE(r.fsdp->prefetch);
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const FsdpGroup& g : r.fsdp_groups) {
    groups.push_back({g.name, MemberNames(g, *model)});
  }
  // A block per group, every other module owning parameters alone.
  EXPECT_EQ(groups,
            (std::vector<std::pair<std::string, std::vector<std::string>>>{
                {"tok_embeddings", {"tok_embeddings"}},
                {"layers.0", BlockMembers(0, true)},
                {"layers.1", BlockMembers(1, true)},
                {"norm", {"norm"}},
                {"output", {"output"}}}));
}

TEST(PlanResolutionTest, NestedFsdpGroupClaimsItsSubtree) {
  auto model = TinyLlama();
  const auto resolved = Resolve(
      R"json({"dp": "fsdp",
              "fsdp_groups": ["layers.*", "layers.*.attention"]})json",
      *model);
  const PlanResolution& r = resolved->r;
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const FsdpGroup& g : r.fsdp_groups) {
    groups.push_back({g.name, MemberNames(g, *model)});
  }
  auto attention = [](int i) {
    const std::string a = "layers." + std::to_string(i) + ".attention.";
    return std::vector<std::string>{a + "wq", a + "wk", a + "wv", a + "wo"};
  };
  EXPECT_EQ(groups,
            (std::vector<std::pair<std::string, std::vector<std::string>>>{
                {"tok_embeddings", {"tok_embeddings"}},
                {"layers.0", BlockMembers(0, false)},
                {"layers.0.attention", attention(0)},
                {"layers.1", BlockMembers(1, false)},
                {"layers.1.attention", attention(1)},
                {"norm", {"norm"}},
                {"output", {"output"}}}));
  EXPECT_TRUE(r.entries.empty());
  EXPECT_FALSE(r.tp_dim.has_value());
}

TEST(PlanResolutionTest, WithoutFsdpParametersKeepTheDpDim) {
  auto model = TinyLlama();
  const auto tp_resolved = Resolve(
      R"json({"tp": {"layers.*.attention.wq": "colwise"}})json", *model);
  const PlanResolution& tp_only = tp_resolved->r;
  EXPECT_EQ(tp_only.tp_dim, 1);
  EXPECT_FALSE(tp_only.dp_dim.has_value());
  EXPECT_FALSE(tp_only.fsdp.has_value());
  EXPECT_TRUE(tp_only.fsdp_groups.empty());
  ASSERT_EQ(tp_only.parameters.size(), model->NamedParameters().size());
  for (const ResolvedParameter& p : tp_only.parameters) {
    const bool wq = p.fqn.find("attention.wq") != std::string::npos;
    EXPECT_EQ(p.sharding.ToString(), wq ? "R,S(0)" : "R,R") << p.fqn;
  }
  const auto dp_resolved = Resolve(R"json({"dp": "replicate"})json", *model);
  const PlanResolution& replicate = dp_resolved->r;
  EXPECT_FALSE(replicate.tp_dim.has_value());
  EXPECT_EQ(replicate.dp_dim, 0);
  EXPECT_FALSE(replicate.fsdp.has_value());
  for (const ResolvedParameter& p : replicate.parameters) {
    EXPECT_EQ(p.sharding.ToString(), "R,R") << p.fqn;
  }
}

TEST(PlanResolutionTest, ResolutionLeavesTheTreeAlone) {
  auto model = TinyLlama();
  Resolve(kWildcardPlan, *model);
  for (const nn::NamedModule& m : model->NamedModules()) {
    EXPECT_EQ(m.module->num_input_hooks(), 0) << m.name;
    EXPECT_EQ(m.module->num_output_hooks(), 0) << m.name;
  }
  for (const nn::NamedSlot& s : model->NamedParameters()) {
    EXPECT_EQ(s.slot->value.sharding().ToString(), "R,R") << s.name;
  }
}

TEST(PlanResolutionTest, MatchPatternStarIsOneComponent) {
  // Reference: component-wise comparison written out by hand per case.
  EXPECT_TRUE(MatchPattern("layers.*.attention.wq", "layers.3.attention.wq"));
  EXPECT_TRUE(MatchPattern("layers.*.attention.wq", "layers.10.attention.wq"));
  EXPECT_FALSE(MatchPattern("layers.*.attention.wq", "layers.attention.wq"));
  EXPECT_FALSE(
      MatchPattern("layers.*.attention.wq", "layers.3.x.attention.wq"));
  EXPECT_FALSE(MatchPattern("layers.*.attention.wq", "layers.3.attention"));
  EXPECT_FALSE(MatchPattern("layers.*", "layers"));
  EXPECT_TRUE(MatchPattern("*", "output"));
  EXPECT_FALSE(MatchPattern("*", "layers.0"));
  EXPECT_TRUE(MatchPattern("output", "output"));
  EXPECT_FALSE(MatchPattern("output", "outputs"));
  EXPECT_FALSE(MatchPattern("l*", "layers"));  // No partial wildcards.
}

TEST(PlanResolutionTest, ResolvesEveryLayer) {
  auto model = TinyLlama();
  auto plan = ParsePlan(R"json({"tp": {
      "layers.*.attention.wq": "colwise",
      "layers.*.attention.wo": "rowwise",
      "layers.*.ffn_norm": "sequence_parallel",
      "tok_embeddings": "rowwise",
      "output": "loss_parallel"}})json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto resolved = ResolvePlan(*plan, *model, Mesh());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::vector<std::string> names;
  for (const ResolvedEntry& r : resolved->entries) names.push_back(r.fqn);
  // Pre-order over the tree.
  EXPECT_EQ(names, (std::vector<std::string>{
                       "tok_embeddings", "layers.0.attention.wq",
                       "layers.0.attention.wo", "layers.0.ffn_norm",
                       "layers.1.attention.wq", "layers.1.attention.wo",
                       "layers.1.ffn_norm", "output"}));
  EXPECT_EQ(resolved->entries[1].entry->spec.style, Style::kColwise);
  EXPECT_EQ(resolved->entries[1].module->type_name(), "Linear");
}

TEST(PlanResolutionTest, ResolveErrorsNameTheValue) {
  auto model = TinyLlama();
  const std::pair<const char*, const char*> cases[] = {
      {R"json({"tp": {"layers.*.attn.wq": "colwise"}})json",
       "\"layers.*.attn.wq\" matches no module"},
      {R"json({"tp": {"layers.*.attention.wq": "colwise",
                  "layers.0.attention.*": "rowwise"}})json",
       "\"layers.0.attention.wq\" is matched by both"},
      {R"json({"tp": {"layers.*.attention": "colwise"}})json",
       "of type Attention"},
      {R"json({"tp": {"layers.*.attention.wq": "sequence_parallel"}})json",
       "of type Linear"},
      {R"json({"tp": {"tok_embeddings": "loss_parallel"}})json",
       "of type Embedding"},
      {R"json({"tp_dim": "model", "tp": {"output": "colwise"}})json", "model"},
      {R"json({"dp_dim": "data", "dp": "fsdp"})json", "data"},
      {R"json({"dp": "fsdp", "fsdp_groups": ["blocks.*"]})json",
       "plan: fsdp_groups pattern \"blocks.*\" names no module"},
      {R"json({"tp": {"output": {"style": "colwise",
                                 "output_layouts": "X(3)"}}})json",
       "bad layout \"X(3)\" for \"output\""},
  };
  for (const auto& c : cases) {
    auto plan = ParsePlan(c.first);
    ASSERT_TRUE(plan.ok()) << c.first << plan.status();
    auto resolved = ResolvePlan(*plan, *model, Mesh());
    ASSERT_FALSE(resolved.ok()) << c.first;
    EXPECT_NE(resolved.status().message().find(c.second), std::string::npos)
        << c.first << " -> " << resolved.status();
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
