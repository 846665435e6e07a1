// The building blocks of a user's own model: the activation modules, the
// losses and Sequential against float64 references written here, on a
// sharded input of 2 in-process ranks (the output keeps the input's layout);
// DTensor::Item on replicated, sharded and Partial scalars; Linear's PyTorch
// default (a bias).
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/activations.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/losses.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/ops/reduction_ops.h"
#include "gtest/gtest.h"
#include "tests/nn/nn_test_util.h"

namespace dtensor {
namespace {

using nn_testing::Close;
using nn_testing::RunOnMesh;

constexpr int64_t kRows = 5;  // Uneven over 2 ranks.
constexpr int64_t kCols = 3;

// The values of `t`, row-major, as doubles.
std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  const Tensor flat = *t.Reshape({t.numel()});
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(flat.At({i}));
  return out;
}

// A [kRows, kCols] f32 tensor, uniform in [-2, 2), the same on every rank.
Tensor Input(uint32_t seed) {
  std::mt19937 rng(seed);
  return nn_testing::RandomF32({kRows, kCols}, -2, 2, rng);
}

// `full` laid out Shard(0) over a 1-D mesh.
absl::StatusOr<DTensor> RowSharded(std::shared_ptr<Runtime> runtime,
                                   const DeviceMesh& mesh, const Tensor& full) {
  return DTensor::Distribute(std::move(runtime), full, mesh,
                             {Placement::Shard(0)});
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct ActivationCase {
  std::unique_ptr<nn::Module> (*make)();
  double (*reference)(double);
};

TEST(UserLayersTest, ActivationsMatchFloat64AndKeepTheLayout) {
  const std::vector<ActivationCase> cases = {
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::ReLU>();
       },
       [](double x) { return x > 0 ? x : 0.0; }},
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::GELU>();
       },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::GELU>(GeluApproximation::kTanh);
       },
       [](double x) {
         const double inner = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
         return 0.5 * x * (1 + std::tanh(inner));
       }},
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::SiLU>();
       },
       [](double x) { return x * Sigmoid(x); }},
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::Tanh>();
       },
       [](double x) { return std::tanh(x); }},
      {[]() -> std::unique_ptr<nn::Module> {
         return std::make_unique<nn::Sigmoid>();
       },
       Sigmoid},
  };
  const Tensor full = Input(1);
  for (const ActivationCase& c : cases) {
    std::unique_ptr<nn::Module> probe = c.make();
    SCOPED_TRACE(std::string(probe->type_name()));
    std::vector<double> expected;
    for (double x : Values(full)) expected.push_back(c.reference(x));
    const absl::Status status = RunOnMesh(
        {2}, [&](std::shared_ptr<Runtime> runtime,
                 const DeviceMesh& mesh) -> absl::Status {
          std::unique_ptr<nn::Module> activation = c.make();
          DT_ASSIGN_OR_RETURN(DTensor x, RowSharded(runtime, mesh, full));
          DT_ASSIGN_OR_RETURN(DTensor y, (*activation)(x));
          EXPECT_EQ(y.placements(), x.placements());
          DT_ASSIGN_OR_RETURN(Tensor gathered, y.FullTensor());
          EXPECT_TRUE(Close(Values(gathered), expected, 1e-5, 1e-6));
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(UserLayersTest, SequentialChainsAndNamesItsChildren) {
  nn::LinearOptions options;
  options.weight_init = nn::Initializer::Normal(0, 0.5);
  absl::StatusOr<std::unique_ptr<nn::Sequential>> mlp = nn::Sequential::Of(
      nn::Linear::Create(3, 4, options), std::make_unique<nn::ReLU>(),
      nn::Linear::Create(4, 2, options));
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->type_name(), "Sequential");
  std::vector<std::string> names;
  for (const nn::NamedModule& m : (*mlp)->NamedModules()) {
    names.push_back(m.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"", "0", "1", "2"}));
  // Linear defaults to a bias, as PyTorch's.
  EXPECT_EQ((*mlp)->NamedParameters().size(), 4u);
}

TEST(UserLayersTest, SequentialNamesTheBadArgument) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> bad = nn::Sequential::Of(
      std::make_unique<nn::ReLU>(), nn::Linear::Create(0, 2));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("module 1"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("in_features 0"), std::string::npos)
      << bad.status();
  bad = nn::Sequential::Of(std::make_unique<nn::ReLU>(),
                           std::unique_ptr<nn::Tanh>());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("module 1 is null"), std::string::npos)
      << bad.status();
}

struct LossCase {
  const char* name;
  bool squared;
  Reduction reduction;
};

TEST(UserLayersTest, ElementwiseLossesMatchFloat64WithTheirGradients) {
  const Tensor prediction = Input(2);
  const Tensor target = Input(3);
  const std::vector<double> p = Values(prediction);
  const std::vector<double> t = Values(target);
  const double n = static_cast<double>(p.size());
  for (const LossCase& c :
       {LossCase{"mse mean", true, Reduction::kMean},
        LossCase{"mse sum", true, Reduction::kSum},
        LossCase{"mse none", true, Reduction::kNone},
        LossCase{"l1 mean", false, Reduction::kMean},
        LossCase{"l1 sum", false, Reduction::kSum}}) {
    SCOPED_TRACE(c.name);
    std::vector<double> losses, grads;
    for (size_t i = 0; i < p.size(); ++i) {
      const double d = p[i] - t[i];
      losses.push_back(c.squared ? d * d : std::fabs(d));
      const double scale = c.reduction == Reduction::kMean ? 1 / n : 1.0;
      grads.push_back(scale * (c.squared ? 2 * d : (d > 0) - (d < 0)));
    }
    double total = 0;
    for (double l : losses) total += l;
    const std::vector<double> expected =
        c.reduction == Reduction::kNone ? losses
        : c.reduction == Reduction::kSum ? std::vector<double>{total}
                                         : std::vector<double>{total / n};
    const absl::Status status = RunOnMesh(
        {2}, [&](std::shared_ptr<Runtime> runtime,
                 const DeviceMesh& mesh) -> absl::Status {
          std::unique_ptr<nn::Loss> loss;
          if (c.squared) {
            loss = std::make_unique<nn::MSELoss>(c.reduction);
          } else {
            loss = std::make_unique<nn::L1Loss>(c.reduction);
          }
          DT_ASSIGN_OR_RETURN(DTensor x, RowSharded(runtime, mesh, prediction));
          DT_ASSIGN_OR_RETURN(DTensor y, RowSharded(runtime, mesh, target));
          nn::GradientTape tape;
          DTensor value;
          {
            nn::GradientTape::Scope scope(tape);
            DT_ASSIGN_OR_RETURN(value, (*loss)(x, y));
          }
          DT_ASSIGN_OR_RETURN(Tensor gathered, value.FullTensor());
          EXPECT_TRUE(Close(Values(gathered), expected, 1e-5, 1e-6));
          if (c.reduction == Reduction::kNone) return absl::OkStatus();
          DT_ASSIGN_OR_RETURN(double item, value.Item());
          EXPECT_NEAR(item, expected[0], 1e-5 * std::fabs(expected[0]));
          DT_ASSIGN_OR_RETURN(std::vector<DTensor> g, tape.Gradient(value, {x}));
          DT_ASSIGN_OR_RETURN(Tensor grad, g[0].FullTensor());
          EXPECT_TRUE(Close(Values(grad), grads, 1e-5, 1e-6));
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(UserLayersTest, CrossEntropyLossMatchesLogSoftmaxInFloat64) {
  const Tensor logits = Input(4);  // [5 rows, 3 classes]
  const std::vector<int64_t> classes = {0, 2, 1, 1, 0};
  const std::vector<double> z = Values(logits);
  double total = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < kCols; ++c) sum += std::exp(z[r * kCols + c]);
    total += std::log(sum) - z[r * kCols + classes[r]];
  }
  const absl::Status status = RunOnMesh(
      {2}, [&](std::shared_ptr<Runtime> runtime,
               const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(DTensor x, RowSharded(runtime, mesh, logits));
        DT_ASSIGN_OR_RETURN(Tensor target_full, Tensor::FromVector(classes, {kRows}));
        DT_ASSIGN_OR_RETURN(DTensor target,
                            RowSharded(runtime, mesh, target_full));
        DT_ASSIGN_OR_RETURN(DTensor mean, nn::CrossEntropyLoss()(x, target));
        DT_ASSIGN_OR_RETURN(double item, mean.Item());
        EXPECT_NEAR(item, total / kRows, 1e-5);
        DT_ASSIGN_OR_RETURN(DTensor sum,
                            nn::CrossEntropyLoss(Reduction::kSum)(x, target));
        DT_ASSIGN_OR_RETURN(item, sum.Item());
        EXPECT_NEAR(item, total, 1e-4);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(UserLayersTest, LossesNameMismatchedShapes) {
  const absl::Status status = RunOnMesh(
      {1}, [&](std::shared_ptr<Runtime> runtime,
               const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(DTensor x, RowSharded(runtime, mesh, Input(5)));
        DT_ASSIGN_OR_RETURN(Tensor row, Tensor::Zeros({kCols}, DType::kF32));
        DT_ASSIGN_OR_RETURN(DTensor y, nn_testing::Replicated(runtime, mesh, row));
        const absl::Status mse = nn::MSELoss()(x, y).status();
        EXPECT_NE(mse.message().find("MSELoss: prediction has shape [5, 3] "
                                     "but target has shape [3]"),
                  std::string::npos)
            << mse;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(UserLayersTest, ItemReadsScalarsOfEveryLayout) {
  const Tensor full = Input(6);
  double expected = 0;
  for (double v : Values(full)) expected += v;
  const absl::Status status = RunOnMesh(
      {2, 2}, [&](std::shared_ptr<Runtime> runtime,
                  const DeviceMesh& mesh) -> absl::Status {
        DT_ASSIGN_OR_RETURN(DTensor x,
                            DTensor::Distribute(runtime, full, mesh,
                                                {Placement::Shard(0),
                                                 Placement::Shard(1)}));
        // Sum of a sharded tensor: Partial(sum) on both mesh dims.
        DT_ASSIGN_OR_RETURN(DTensor sum, ops::Sum(x));
        EXPECT_TRUE(sum.placements()[0].is_partial());
        DT_ASSIGN_OR_RETURN(double item, sum.Item());
        EXPECT_NEAR(item, expected, 1e-5);
        const absl::Status many = x.Item().status();
        EXPECT_NE(many.message().find("shape [5, 3] has 15 elements"),
                  std::string::npos)
            << many;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace dtensor
