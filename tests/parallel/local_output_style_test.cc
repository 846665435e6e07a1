// use_local_output: a colwise Linear hands on its tp-local output, a module
// outside the plan computes on it (silu), and a rowwise Linear wraps it back
// onto the full mesh (its input_layouts, or the rowwise default S(-1)). One
// forward and backward step equals the one-rank model with the same seed, on
// a 1-D tp mesh and a 2-D dp x tp mesh; the middle module sees a tp-local
// value.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/tp_local.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"
#include "tests/parallel/style_test_util.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int64_t kBatch = 4, kIn = 8, kHidden = 12;

// silu(x), noting the mesh and shape it ran on.
class SiluModule : public nn::Module {
 public:
  absl::string_view type_name() const override { return "Silu"; }
  std::string seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_ = absl::StrCat("mesh ", absl::StrJoin(x.mesh().shape(), "x"),
                           " shape ", ShapeToString(x.shape()));
    }
    return ops::Silu(x);
  }

 private:
  std::mutex mu_;
  std::string seen_;
};

struct Result {
  std::vector<float> output;
  std::map<std::string, std::vector<float>> grads;
  std::string silu_saw;  // Rank 0's.
};

// Linear(8, 12) -> silu -> Linear(12, 8), loss sum(y * y), x [4, 8] (batch
// sharded on "dp" when the mesh has it).
absl::StatusOr<Result> Step(const DeviceMesh& mesh,
                            const std::optional<std::string>& plan_text) {
  std::optional<Plan> plan;
  if (plan_text) {
    DT_ASSIGN_OR_RETURN(plan, ParsePlan(*plan_text));
  }
  Result result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    nn::LinearOptions options;
    options.bias = true;
    options.weight_init = nn::Initializer::Normal(0, 0.3);
    options.bias_init = nn::Initializer::Normal(0, 0.5);
    nn::ModuleList model;
    DT_ASSIGN_OR_RETURN(auto first, nn::Linear::Create(kIn, kHidden, options));
    DT_RETURN_IF_ERROR(model.Append(std::move(first)).status());
    DT_ASSIGN_OR_RETURN(SiluModule * silu,
                        model.Append(std::make_unique<SiluModule>()));
    DT_ASSIGN_OR_RETURN(auto second, nn::Linear::Create(kHidden, kIn, options));
    DT_RETURN_IF_ERROR(model.Append(std::move(second)).status());
    DT_RETURN_IF_ERROR(nn::Initialize(model, runtime, mesh));
    if (plan) DT_RETURN_IF_ERROR(ParallelizeModule(model, mesh, *plan));

    std::vector<float> values;
    for (int64_t i = 0; i < kBatch * kIn; ++i) {
      values.push_back(std::sin(0.7 * i + 0.3));
    }
    DT_ASSIGN_OR_RETURN(Tensor full, Tensor::FromVector(values, {kBatch, kIn}));
    std::vector<Placement> sharding(mesh.ndim(), Placement::Replicate());
    if (mesh.DimIndex("dp").ok())
      sharding[*mesh.DimIndex("dp")] = Placement::Shard(0);
    DT_ASSIGN_OR_RETURN(DTensor x,
                        DTensor::Distribute(runtime, full, mesh, sharding));
    std::vector<nn::NamedSlot> named = model.NamedParameters();
    std::vector<DTensor> params;
    for (const nn::NamedSlot& slot : named) params.push_back(slot.slot->value);
    nn::GradientTape tape;
    DTensor y, loss;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(y, model(x));
      DT_ASSIGN_OR_RETURN(loss, ops::Sum(*ops::Mul(y, y)));
    }
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                        tape.Gradient(loss, params));
    Result mine;
    if (y.mesh() != mesh) return absl::InternalError("y is not on the mesh");
    DT_ASSIGN_OR_RETURN(Tensor y_full, y.FullTensor());
    mine.output = y_full.ToVector<float>().value();
    for (size_t i = 0; i < params.size(); ++i) {
      if (grads[i].sharding() != params[i].sharding()) {
        return absl::InternalError(absl::StrCat(named[i].name, " layout"));
      }
      DT_ASSIGN_OR_RETURN(Tensor g, grads[i].FullTensor());
      mine.grads[named[i].name] = g.ToVector<float>().value();
    }
    mine.silu_saw = silu->seen();
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(mine);
    }
    return absl::OkStatus();
  }));
  return result;
}

void ExpectClose(const std::vector<float>& got,
                 const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << i;
  }
}

TEST(LocalOutputStyleTest, ColwiseLocalOutputThenRowwiseMatchesOneRank) {
  auto one = Step(parallel_testing::Mesh({1}, {"tp"}), std::nullopt);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->silu_saw, "mesh 1 shape [4, 12]");
  for (const char* second :
       {R"plan({"style": "rowwise", "input_layouts": "S(-1)"})plan",
        R"("rowwise")"}) {
    const std::string plan = absl::StrCat(
        R"({"tp": {"0": {"style": "colwise", "use_local_output": true},
                   "2": )",
        second, "}}");
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{2}, {4}, {2, 2}}) {
      const DeviceMesh mesh = shape.size() == 1
                                  ? parallel_testing::Mesh(shape, {"tp"})
                                  : parallel_testing::Mesh(shape, {"dp", "tp"});
      SCOPED_TRACE(mesh.ToString() + " " + second);
      auto many = Step(mesh, plan);
      ASSERT_TRUE(many.ok()) << many.status();
      ExpectClose(many->output, one->output);
      ASSERT_EQ(many->grads.size(), one->grads.size());
      for (const auto& [name, grad] : one->grads) {
        SCOPED_TRACE(name);
        ExpectClose(many->grads[name], grad);
      }
      // Silu ran on the tp-local value: the tp dim cut to 1, hidden / tp.
      const int64_t tp = shape.back();
      EXPECT_EQ(many->silu_saw,
                absl::StrCat("mesh ", shape.size() == 1 ? "1" : "2x1",
                             " shape [4, ", kHidden / tp, "]"));
    }
  }
}

TEST(LocalOutputStyleTest, WithoutLocalOutputTheNextModuleGetsTheGlobalValue) {
  auto step = Step(parallel_testing::Mesh({2}, {"tp"}),
                   R"({"tp": {"0": "colwise", "2": "rowwise"}})");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->silu_saw, "mesh 2 shape [4, 12]");
}

TEST(LocalOutputStyleTest, APartialOutputHasNoTpLocalValue) {
  // rowwise with output_layouts P keeps the partial sum: not a local value.
  auto step = Step(parallel_testing::Mesh({2}, {"tp"}), R"({"tp": {
      "2": {"style": "rowwise", "output_layouts": "P",
            "use_local_output": true}}})");
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("Partial"), std::string::npos)
      << step.status();
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
