// The optimizers and gradient clipping on in-process meshes: parameters in
// sharded and replicated layouts, gradients in other layouts (Partial terms
// included), checked against references written here in plain loops over
// the full tensors.
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/nn/optim_clip.h"
#include "dtensor/nn/optim_sgd.h"
#include "dtensor/runtime.h"
#include "dtensor/testing/grad_checks.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::DistributeWithTerms;
using testing_util::Random64;
using testing_util::TestSharding;

std::vector<double> Values(const Tensor& t) {
  return t.To(DType::kF64)->Contiguous().ToVector<double>().value();
}

// The parameters of the tests on a 2x2 mesh: their shapes and layouts, and
// the layouts their gradients arrive in.
struct ParamSpec {
  Shape shape;
  TestSharding sharding;
  TestSharding grad_sharding;
};

TestSharding L(std::vector<Placement> placements) {
  return {std::move(placements), {}};
}

std::vector<ParamSpec> Params() {
  const Placement r = Placement::Replicate();
  const Placement s0 = Placement::Shard(0), s1 = Placement::Shard(1);
  const Placement p = Placement::Partial();
  return {
      {{4, 6}, L({s0, s1}), L({p, r})},  // 2-D sharded, Partial gradient
      {{6}, L({r, r}), L({p, p})},       // replicated, Partial gradient
      {{5, 3}, L({r, s0}), L({s1, r})},  // uneven rows, resharded
      {{3}, L({s0, r}), L({s0, r})},     // uneven, same layout
  };
}

// The full gradients of `steps` steps.
std::vector<std::vector<Tensor>> Gradients(int steps, std::mt19937& rng) {
  std::vector<std::vector<Tensor>> grads(steps);
  for (auto& step : grads) {
    for (const ParamSpec& p : Params()) {
      step.push_back(Random64(p.shape, -1, 1, rng));
    }
  }
  return grads;
}

using MakeOptimizer =
    std::function<absl::StatusOr<std::unique_ptr<nn::Optimizer>>(
        std::vector<DTensor> params)>;

// Runs `steps` optimizer steps on the 2x2 mesh from `initial` parameters with
// the given gradients and returns the gathered parameters (from rank 0).
absl::StatusOr<std::vector<std::vector<double>>> RunSteps(
    const MakeOptimizer& make, const std::vector<Tensor>& initial,
    const std::vector<std::vector<Tensor>>& grads) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2, 2}));
  const std::vector<ParamSpec> specs = Params();
  std::vector<std::vector<double>> result(specs.size());
  LocalCluster cluster(4);
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    std::vector<DTensor> params;
    for (size_t i = 0; i < specs.size(); ++i) {
      DT_ASSIGN_OR_RETURN(DTensor p,
                          DTensor::Distribute(runtime, initial[i], mesh,
                                              specs[i].sharding.placements));
      params.push_back(std::move(p));
    }
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Optimizer> optimizer, make(params));
    for (const std::vector<Tensor>& step : grads) {
      std::vector<DTensor> laid_out;
      for (size_t i = 0; i < specs.size(); ++i) {
        if (!step[i].defined()) {  // No gradient: the parameter is skipped.
          laid_out.emplace_back();
          continue;
        }
        DT_ASSIGN_OR_RETURN(DTensor g,
                            DistributeWithTerms(runtime, step[i], mesh,
                                                specs[i].grad_sharding));
        laid_out.push_back(std::move(g));
      }
      DT_RETURN_IF_ERROR(optimizer->Step(laid_out));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      // Updated in place: the caller's copies see the new values, and the
      // layout is kept.
      EXPECT_EQ(params[i].placements(), specs[i].sharding.placements);
      DT_ASSIGN_OR_RETURN(Tensor full, params[i].FullTensor());
      if (groups.rank() == 0) result[i] = Values(full);
    }
    return absl::OkStatus();
  }));
  return result;
}

void ExpectClose(const std::vector<std::vector<double>>& got,
                 const std::vector<std::vector<double>>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << "parameter " << i;
    for (size_t e = 0; e < got[i].size(); ++e) {
      EXPECT_NEAR(got[i][e], want[i][e], tol)
          << "parameter " << i << " element " << e;
    }
  }
}

std::vector<Tensor> InitialParams(std::mt19937& rng) {
  std::vector<Tensor> initial;
  for (const ParamSpec& p : Params()) {
    initial.push_back(Random64(p.shape, -1, 1, rng));
  }
  return initial;
}

// torch.optim.SGD, element by element.
std::vector<std::vector<double>> ReferenceSgd(
    const nn::SgdOptions& o, const std::vector<Tensor>& initial,
    const std::vector<std::vector<Tensor>>& grads) {
  std::vector<std::vector<double>> params, buffers(initial.size());
  for (const Tensor& t : initial) params.push_back(Values(t));
  for (size_t step = 0; step < grads.size(); ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<double> g = Values(grads[step][i]);
      std::vector<double>& p = params[i];
      std::vector<double>& b = buffers[i];
      if (b.empty()) b.assign(p.size(), 0);
      for (size_t e = 0; e < p.size(); ++e) {
        double d = g[e] + o.weight_decay * p[e];
        if (o.momentum != 0) {
          b[e] = step == 0 ? d : o.momentum * b[e] + (1 - o.dampening) * d;
          d = o.nesterov ? d + o.momentum * b[e] : b[e];
        }
        p[e] -= o.learning_rate * d;
      }
    }
  }
  return params;
}

// torch.optim.AdamW, element by element; a parameter without a gradient
// (undefined) at a step is left alone and its step count stays.
std::vector<std::vector<double>> ReferenceAdamW(
    const nn::AdamWOptions& o, const std::vector<Tensor>& initial,
    const std::vector<std::vector<Tensor>>& grads) {
  std::vector<std::vector<double>> params, m(initial.size()), v(initial.size());
  for (const Tensor& t : initial) params.push_back(Values(t));
  std::vector<int> taken(initial.size(), 0);
  for (size_t step = 0; step < grads.size(); ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[step][i].defined()) continue;
      const double t = static_cast<double>(++taken[i]);
      const std::vector<double> g = Values(grads[step][i]);
      std::vector<double>& p = params[i];
      m[i].resize(p.size());
      v[i].resize(p.size());
      for (size_t e = 0; e < p.size(); ++e) {
        p[e] *= 1 - o.learning_rate * o.weight_decay;
        m[i][e] = o.beta1 * m[i][e] + (1 - o.beta1) * g[e];
        v[i][e] = o.beta2 * v[i][e] + (1 - o.beta2) * g[e] * g[e];
        const double m_hat = m[i][e] / (1 - std::pow(o.beta1, t));
        const double v_hat = v[i][e] / (1 - std::pow(o.beta2, t));
        p[e] -= o.learning_rate * m_hat / (std::sqrt(v_hat) + o.eps);
      }
    }
  }
  return params;
}

TEST(SgdTest, StepsMatchTheReference) {
  std::mt19937 rng(1);
  const std::vector<Tensor> initial = InitialParams(rng);
  const std::vector<std::vector<Tensor>> grads = Gradients(3, rng);
  std::vector<nn::SgdOptions> all(4);
  all[0].learning_rate = 0.1;
  all[1] = {0.05, 0.9, 0.1, 0.01, false};
  all[2] = {0.05, 0.8, 0, 0.02, true};
  all[3] = {0.2, 0, 0, 0.5, false};
  for (const nn::SgdOptions& o : all) {
    absl::StatusOr<std::vector<std::vector<double>>> got = RunSteps(
        [&](std::vector<DTensor> params)
            -> absl::StatusOr<std::unique_ptr<nn::Optimizer>> {
          return nn::Sgd::Create(std::move(params), o);
        },
        initial, grads);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectClose(*got, ReferenceSgd(o, initial, grads), 1e-12);
  }
}

TEST(AdamWTest, StepsMatchTheReference) {
  std::mt19937 rng(2);
  const std::vector<Tensor> initial = InitialParams(rng);
  const std::vector<std::vector<Tensor>> grads = Gradients(4, rng);
  std::vector<nn::AdamWOptions> all(2);
  all[1] = {0.05, 0.8, 0.95, 1e-6, 0.1};
  for (const nn::AdamWOptions& o : all) {
    absl::StatusOr<std::vector<std::vector<double>>> got = RunSteps(
        [&](std::vector<DTensor> params)
            -> absl::StatusOr<std::unique_ptr<nn::Optimizer>> {
          return nn::AdamW::Create(std::move(params), o);
        },
        initial, grads);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectClose(*got, ReferenceAdamW(o, initial, grads), 1e-12);
  }
}

// Parameters whose gradients are missing at some steps reach different step
// counts: the multi-tensor step groups them by count, each with its own bias
// corrections.
TEST(AdamWTest, DifferentStepCountsMatchTheReference) {
  std::mt19937 rng(3);
  const std::vector<Tensor> initial = InitialParams(rng);
  std::vector<std::vector<Tensor>> grads = Gradients(4, rng);
  grads[0][1] = Tensor();
  grads[0][3] = Tensor();
  grads[1][3] = Tensor();
  grads[2][0] = Tensor();
  const nn::AdamWOptions o = {0.05, 0.8, 0.95, 1e-6, 0.1};
  absl::StatusOr<std::vector<std::vector<double>>> got = RunSteps(
      [&](std::vector<DTensor> params)
          -> absl::StatusOr<std::unique_ptr<nn::Optimizer>> {
        return nn::AdamW::Create(std::move(params), o);
      },
      initial, grads);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, ReferenceAdamW(o, initial, grads), 1e-12);
}

TEST(OptimizerTest, StateLivesInTheParameterShardingAndSkipsMissingGradients) {
  const absl::Status status =
      LocalCluster(2).Run([](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2}));
        DT_ASSIGN_OR_RETURN(Tensor ones, Tensor::Ones({4, 2}, DType::kF64));
        DT_ASSIGN_OR_RETURN(
            DTensor p,
            DTensor::Distribute(runtime, ones, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(
            DTensor q,
            DTensor::Distribute(runtime, ones, mesh, {Placement::Replicate()}));
        DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::AdamW> adam,
                            nn::AdamW::Create({p, q}, {}));
        DT_RETURN_IF_ERROR(adam->Step({p, DTensor()}));
        EXPECT_EQ(adam->exp_avg()[0].sharding(), p.sharding());
        EXPECT_EQ(adam->exp_avg_sq()[0].sharding(), p.sharding());
        EXPECT_FALSE(adam->exp_avg()[1].defined());
        EXPECT_EQ(adam->steps(), (std::vector<int64_t>{1, 0}));
        // q had no gradient: unchanged.
        DT_ASSIGN_OR_RETURN(Tensor q_full, q.FullTensor());
        EXPECT_EQ(Values(q_full), std::vector<double>(8, 1.0));
        nn::SgdOptions momentum;
        momentum.momentum = 0.5;
        DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sgd> sgd,
                            nn::Sgd::Create({p}, momentum));
        DT_RETURN_IF_ERROR(sgd->Step({p}));
        EXPECT_EQ(sgd->momentum_buffers()[0].sharding(), p.sharding());
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(OptimizerTest, BadInputsAreErrors) {
  nn::SgdOptions bad_sgd;
  bad_sgd.learning_rate = -1;
  EXPECT_FALSE(nn::Sgd::Create({}, bad_sgd).ok());
  nn::SgdOptions nesterov;
  nesterov.nesterov = true;
  EXPECT_FALSE(nn::Sgd::Create({}, nesterov).ok());
  nn::AdamWOptions bad_beta;
  bad_beta.beta2 = 1;
  const absl::Status beta = nn::AdamW::Create({}, bad_beta).status();
  EXPECT_NE(beta.message().find("beta 1"), std::string::npos) << beta;

  const absl::Status status =
      LocalCluster(2).Run([](ProcessGroups& groups) -> absl::Status {
        auto runtime = Runtime::ForRank(groups);
        DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2}));
        DT_ASSIGN_OR_RETURN(Tensor ones, Tensor::Ones({4}, DType::kF64));
        DT_ASSIGN_OR_RETURN(Tensor other, Tensor::Ones({3}, DType::kF64));
        DT_ASSIGN_OR_RETURN(
            DTensor p,
            DTensor::Distribute(runtime, ones, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(
            DTensor wrong,
            DTensor::Distribute(runtime, other, mesh, {Placement::Shard(0)}));
        DT_ASSIGN_OR_RETURN(
            DTensor partial,
            DTensor::Distribute(runtime, ones, mesh, {Placement::Partial()}));
        DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sgd> sgd,
                            nn::Sgd::Create({p}, {}));
        absl::Status s = sgd->Step({p, p});
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        s = sgd->Step({wrong});
        EXPECT_NE(s.message().find("gradient 0"), std::string::npos) << s;
        DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sgd> on_partial,
                            nn::Sgd::Create({partial}, {}));
        s = on_partial->Step({p});
        EXPECT_NE(s.message().find("Partial"), std::string::npos) << s;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// Gradients on a 2x2 mesh in mixed layouts (sharded, replicated, Partial,
// uneven) and one on a 1-D mesh over the same ranks.
struct ClipCase {
  Shape shape;
  TestSharding sharding;
  bool one_dim_mesh = false;
};

std::vector<ClipCase> ClipCases() {
  const Placement r = Placement::Replicate();
  const Placement s0 = Placement::Shard(0), s1 = Placement::Shard(1);
  return {
      {{5, 4}, L({s0, s1})},
      {{7}, L({r, r})},
      {{3, 3}, L({Placement::Partial(), s0})},
      {{6, 2}, {{s0, s0}, {{1, 0}, {}}}},
      {{9}, L({s0}), /*one_dim_mesh=*/true},
  };
}

TEST(ClipGradNormTest, NormOfMixedShardingsMatchesOneDevice) {
  std::mt19937 rng(3);
  const std::vector<ClipCase> cases = ClipCases();
  std::vector<Tensor> full;
  double squares = 0;
  for (const ClipCase& c : cases) {
    full.push_back(Random64(c.shape, -1, 1, rng));
    for (double v : Values(full.back())) squares += v * v;
  }
  const double norm = std::sqrt(squares);
  for (double max_norm : {norm / 3, 10 * norm}) {
    const absl::Status status =
        LocalCluster(4).Run([&](ProcessGroups& groups) -> absl::Status {
          auto runtime = Runtime::ForRank(groups);
          DT_ASSIGN_OR_RETURN(DeviceMesh mesh2, DeviceMesh::Create({2, 2}));
          DT_ASSIGN_OR_RETURN(DeviceMesh mesh1, DeviceMesh::Create({4}));
          std::vector<DTensor> grads;
          for (size_t i = 0; i < full.size(); ++i) {
            const ClipCase& c = cases[i];
            DT_ASSIGN_OR_RETURN(
                DTensor g, DistributeWithTerms(runtime, full[i],
                                               c.one_dim_mesh ? mesh1 : mesh2,
                                               c.sharding));
            grads.push_back(std::move(g));
          }
          grads.push_back(DTensor());  // skipped
          DT_ASSIGN_OR_RETURN(double got, nn::GlobalGradNorm(grads));
          EXPECT_NEAR(got, norm, 1e-12 * norm);
          DT_ASSIGN_OR_RETURN(double before,
                              nn::ClipGradNorm(&grads, max_norm));
          EXPECT_NEAR(before, norm, 1e-12 * norm);
          const double scale = max_norm < norm ? max_norm / (norm + 1e-6) : 1.0;
          for (size_t i = 0; i < full.size(); ++i) {
            EXPECT_EQ(grads[i].sharding(),
                      *Sharding::FromPlacements(cases[i].sharding.placements,
                                                full[i].dim(),
                                                cases[i].sharding.order));
            DT_ASSIGN_OR_RETURN(Tensor clipped, grads[i].FullTensor());
            const std::vector<double> got_values = Values(clipped);
            const std::vector<double> want = Values(full[i]);
            for (size_t e = 0; e < want.size(); ++e) {
              EXPECT_NEAR(got_values[e], want[e] * scale, 1e-12);
            }
          }
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
  }
  std::vector<DTensor> none;
  EXPECT_FALSE(nn::ClipGradNorm(&none, -1).ok());
}

TEST(ClipGradNormTest, OneSmallAllReducePerMesh) {
  // Seen by rank 0 of a metadata-only 2x2 mesh: complete gradients in mixed
  // layouts cost one all-reduce of the 0-d sum, whatever their count.
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2, 2});
  const Placement r = Placement::Replicate();
  std::vector<DTensor> grads;
  for (const auto& [shape, sharding] :
       std::vector<std::pair<Shape, std::vector<Placement>>>{
           {{8, 4}, {Placement::Shard(0), Placement::Shard(1)}},
           {{6}, {r, r}},
           {{5, 3}, {r, Placement::Shard(0)}}}) {
    grads.push_back(*DTensor::FromSpec(
        runtime, *DTensorSpec::Create(mesh, sharding, shape, DType::kF32)));
  }
  CommCounter comms;
  {
    CommCounter::Scope scope(comms);
    EXPECT_EQ(*nn::GlobalGradNorm(grads), 0);
  }
  EXPECT_EQ(comms.total_collectives(), comms.count(CommKind::kAllReduce));
  EXPECT_EQ(comms.count(CommKind::kAllReduce), 1);
  for (const CommCounter::Event& event : comms.events()) {
    EXPECT_LE(event.bytes, 16) << event.label;
  }
}

}  // namespace
}  // namespace dtensor
