// A user's own model, as issue 27 wrote it: Sequential(Linear 16->63, ReLU,
// Linear 63->16) with PyTorch's default biases, MSE loss, backward and one
// AdamW step, parallelized by a plan built in code ({"0": colwise, "2":
// rowwise}, dp replicate) on a 2x2 (dp, tp) mesh with an uneven batch of 7.
// The loss (DTensor::Item), the gradients and the updated parameters equal
// the one-rank run; the same plan written as JSON lays the parameters out
// alike.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/activations.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/losses.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr int64_t kBatch = 7, kIn = 16, kHidden = 63;

// Values of `t`, row-major.
std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  const Tensor flat = *t.Reshape({t.numel()});
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(flat.At({i}));
  return out;
}

// A deterministic [rows, cols] f32 tensor.
Tensor Wave(int64_t rows, int64_t cols, double phase) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows * cols; ++i) {
    values.push_back(static_cast<float>(std::sin(0.37 * i + phase)));
  }
  return *Tensor::FromVector(values, {rows, cols});
}

struct Result {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;
  std::map<std::string, std::vector<double>> updated;
  std::map<std::string, std::vector<Placement>> layouts;
};

// One training step of the MLP on in-process ranks of `mesh` (the batch
// sharded on "dp" when the mesh has it), parallelized by `plan` if given.
absl::StatusOr<Result> Step(const DeviceMesh& mesh,
                            const std::optional<Plan>& plan) {
  Result result;
  std::mutex mu;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                        nn::Sequential::Of(nn::Linear::Create(kIn, kHidden),
                                           std::make_unique<nn::ReLU>(),
                                           nn::Linear::Create(kHidden, kIn)));
    DT_RETURN_IF_ERROR(nn::Initialize(*model, runtime, mesh));
    if (plan) DT_RETURN_IF_ERROR(ParallelizeModule(*model, mesh, *plan));

    std::vector<Placement> batch(mesh.ndim(), Placement::Replicate());
    if (mesh.DimIndex("dp").ok()) {
      batch[*mesh.DimIndex("dp")] = Placement::Shard(0);
    }
    DT_ASSIGN_OR_RETURN(
        DTensor x,
        DTensor::Distribute(runtime, Wave(kBatch, kIn, 0.1), mesh, batch));
    DT_ASSIGN_OR_RETURN(
        DTensor y,
        DTensor::Distribute(runtime, Wave(kBatch, kIn, 1.3), mesh, batch));
    std::vector<DTensor> params;
    for (const nn::NamedSlot& slot : model->NamedParameters()) {
      params.push_back(slot.slot->value);
    }
    nn::GradientTape tape;
    DTensor loss;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(DTensor prediction, (*model)(x));
      DT_ASSIGN_OR_RETURN(loss, nn::MSELoss()(prediction, y));
    }
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                        tape.Gradient(loss, params));
    nn::AdamWOptions options;
    options.learning_rate = 0.05;
    DT_ASSIGN_OR_RETURN(auto optimizer, nn::AdamW::Create(params, options));
    DT_RETURN_IF_ERROR(optimizer->Step(grads));

    Result mine;
    DT_ASSIGN_OR_RETURN(mine.loss, loss.Item());
    const std::vector<nn::NamedSlot> named = model->NamedParameters();
    for (size_t i = 0; i < named.size(); ++i) {
      DT_ASSIGN_OR_RETURN(Tensor g, grads[i].FullTensor());
      mine.grads[named[i].name] = Values(g);
      DT_ASSIGN_OR_RETURN(Tensor p, named[i].slot->value.FullTensor());
      mine.updated[named[i].name] = Values(p);
      mine.layouts[named[i].name] = named[i].slot->value.placements();
    }
    if (groups.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(mine);
    }
    return absl::OkStatus();
  }));
  return result;
}

void ExpectClose(const std::map<std::string, std::vector<double>>& got,
                 const std::map<std::string, std::vector<double>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, values] : want) {
    const std::vector<double>& mine = got.at(name);
    ASSERT_EQ(mine.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(mine[i], values[i], 1e-5 + 1e-4 * std::fabs(values[i]))
          << name << "[" << i << "]";
    }
  }
}

Plan CodePlan() {
  return Plan::Of({{"0", ColwiseParallel()}, {"2", RowwiseParallel()}},
                  DataParallel::kReplicate);
}

TEST(UserModelTest, PlanInCodeTrainsAsOneRank) {
  absl::StatusOr<Result> one =
      Step(*DeviceMesh::Create({1}, {"dp"}), std::nullopt);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<Result> many =
      Step(*DeviceMesh::Create({2, 2}, {"dp", "tp"}), CodePlan());
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_NEAR(many->loss, one->loss, 1e-5 * one->loss);
  ExpectClose(many->grads, one->grads);
  ExpectClose(many->updated, one->updated);
  // The first Linear is split by rows (colwise), the second by columns.
  EXPECT_EQ(many->layouts.at("0.weight")[1], Placement::Shard(0));
  EXPECT_EQ(many->layouts.at("0.bias")[1], Placement::Shard(0));
  EXPECT_EQ(many->layouts.at("2.weight")[1], Placement::Shard(1));
  EXPECT_EQ(many->layouts.at("2.bias")[1], Placement::Replicate());
}

TEST(UserModelTest, PlanInCodeEqualsThePlanFile) {
  absl::StatusOr<Plan> file = ParsePlan(
      R"({"tp": {"0": "colwise", "2": "rowwise"}, "dp": "replicate"})");
  ASSERT_TRUE(file.ok()) << file.status();
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2}, {"dp", "tp"});
  absl::StatusOr<Result> from_code = Step(mesh, CodePlan());
  absl::StatusOr<Result> from_file = Step(mesh, *file);
  ASSERT_TRUE(from_code.ok()) << from_code.status();
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_code->layouts, from_file->layouts);
  EXPECT_EQ(from_code->loss, from_file->loss);
}

// The message of `status`, which must be an error.
std::string ErrorOf(const absl::Status& status) {
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

// Bad inputs of the user's program, each told at the call that caused it,
// naming the value: on a world of 4 ranks.
TEST(UserModelTest, ErrorsNameTheirCause) {
  LocalCluster cluster(4);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        const DeviceMesh mesh = *DeviceMesh::Create({2, 2}, {"dp", "tp"});
        DT_ASSIGN_OR_RETURN(
            std::unique_ptr<nn::Sequential> model,
            nn::Sequential::Of(nn::Linear::Create(kIn, kHidden),
                               std::make_unique<nn::ReLU>(),
                               nn::Linear::Create(kHidden, kIn)));
        // A mesh larger than the world, before any collective.
        const DeviceMesh too_big = *DeviceMesh::Create({2, 4}, {"dp", "tp"});
        EXPECT_NE(ErrorOf(nn::Initialize(*model, runtime, too_big))
                      .find("mesh of 8 ranks [2, 4] has rank 4, outside the "
                            "world of 4 ranks"),
                  std::string::npos);
        DT_RETURN_IF_ERROR(nn::Initialize(*model, runtime, mesh));
        EXPECT_NE(ErrorOf(ParallelizeModule(*model, too_big, CodePlan()))
                      .find("outside the world of 4 ranks"),
                  std::string::npos);
        // A pattern that matches nothing lists the modules.
        EXPECT_NE(
            ErrorOf(ParallelizeModule(*model, mesh,
                                      Plan::Of({{"fc1", ColwiseParallel()}})))
                .find("\"fc1\" matches no module or parameter; the "
                      "modules are [0, 1, 2]"),
            std::string::npos);
        // A mesh dim the plan names but the mesh lacks names the option.
        const DeviceMesh other = *DeviceMesh::Create({2, 2}, {"dp", "model"});
        EXPECT_NE(ErrorOf(ParallelizeModule(*model, other, CodePlan()))
                      .find("plan: tp_dim \"tp\""),
                  std::string::npos);
        // An output layout the output cannot take: at the forward, naming
        // the module, its style and the option.
        StyleOptions bad;
        bad.output_layouts = "S(5)";
        DT_RETURN_IF_ERROR(ParallelizeModule(
            *model, mesh,
            Plan::Of({{"0", ColwiseParallel()}, {"2", RowwiseParallel(bad)}})));
        DT_ASSIGN_OR_RETURN(
            DTensor x,
            DTensor::Distribute(runtime, Wave(kBatch, kIn, 0.1), mesh,
                                {Placement::Shard(0), Placement::Replicate()}));
        EXPECT_NE(ErrorOf((*model)(x).status())
                      .find("module \"2\" (rowwise) output_layouts: "),
                  std::string::npos);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
