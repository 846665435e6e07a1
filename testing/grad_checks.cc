#include "dtensor/testing/grad_checks.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/grad_check.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/runtime.h"
#include "dtensor/testing/op_cases.h"

namespace dtensor {
namespace testing_util {
namespace {

using testing_util::DistributeWithTerms;
using testing_util::TestSharding;

std::string Describe(const GradCase& c) {
  std::vector<std::string> inputs;
  for (const Tensor& t : c.inputs) {
    inputs.push_back(t.defined()
                         ? absl::StrCat(ShapeToString(t.shape()), " ",
                                        std::string(DTypeName(t.dtype())))
                         : "absent");
  }
  return absl::StrCat(c.op, " (", c.description, ") inputs {",
                      absl::StrJoin(inputs, "; "), "}");
}

std::vector<DTensor> Floating(const std::vector<DTensor>& inputs) {
  std::vector<DTensor> floating;
  for (const DTensor& x : inputs) {
    if (nn::IsDifferentiable(x)) floating.push_back(x);
  }
  return floating;
}

// The gradients of the floating inputs (f64, full) at `inputs` with output
// gradient `c`, on one rank; also runs the finite-difference check there.
absl::StatusOr<std::vector<Tensor>> OneRankGradients(const GradCase& c,
                                                     uint32_t seed,
                                                     Tensor* c_full) {
  std::vector<Tensor> grads;
  LocalCluster cluster(1);
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({1}));
    std::vector<DTensor> inputs(c.inputs.size());
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (!c.inputs[i].defined()) continue;
      DT_ASSIGN_OR_RETURN(inputs[i],
                          DTensor::FromLocal(runtime, c.inputs[i], mesh,
                                             {Placement::Replicate()}));
    }
    nn::GradCheckOptions options;
    options.seed = seed;
    DT_RETURN_IF_ERROR(nn::CheckGradients(
        [&](absl::Span<const DTensor> in) {
          return c.fn(std::vector<DTensor>(in.begin(), in.end()));
        },
        inputs, options));
    nn::GradientTape tape;
    DTensor out;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(out, c.fn(inputs));
    }
    std::mt19937 rng(seed);
    *c_full = Random64(out.shape(), -1, 1, rng);
    nn::GradientOptions gradient_options;
    DT_ASSIGN_OR_RETURN(gradient_options.output_gradient,
                        ops::ReplicatedConstant(out, *c_full));
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> result,
                        tape.Gradient(out, Floating(inputs), gradient_options));
    for (const DTensor& g : result) {
      DT_ASSIGN_OR_RETURN(Tensor full, g.FullTensor());
      grads.push_back(std::move(full));
    }
    return absl::OkStatus();
  }));
  return grads;
}

// The same on a mesh of `mesh_shape` with random shardings.
absl::Status CheckShardings(const GradCase& c, const Tensor& c_full,
                            const std::vector<Tensor>& expected,
                            const std::vector<int64_t>& mesh_shape,
                            std::mt19937& rng, double tol) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  const int64_t mesh_ndim = static_cast<int64_t>(mesh_shape.size());
  std::vector<TestSharding> shardings;
  std::vector<std::string> texts;
  for (const Tensor& t : c.inputs) {
    if (!t.defined()) {
      shardings.emplace_back();
      texts.push_back("-");
      continue;
    }
    shardings.push_back(testing_util::RandomSharding(
        mesh_ndim, t.dim(),
        IsFloatingPoint(t.dtype()) ? testing_util::PartialOpsFor(t.dtype())
                                   : std::vector<ReduceOp>{},
        rng));
    texts.push_back(shardings.back().ToString());
  }
  const TestSharding c_sharding = testing_util::RandomSharding(
      mesh_ndim, c_full.dim(), testing_util::PartialOpsFor(DType::kF64), rng);
  const std::string where = absl::StrCat(
      Describe(c), " on mesh ", absl::StrJoin(mesh_shape, "x"), ", inputs {",
      absl::StrJoin(texts, "; "), "}, output gradient ", c_sharding.ToString());
  LocalCluster cluster(mesh.size());
  absl::Status status = cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    std::vector<DTensor> inputs(c.inputs.size());
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (!c.inputs[i].defined()) continue;
      DT_ASSIGN_OR_RETURN(inputs[i], DistributeWithTerms(runtime, c.inputs[i],
                                                         mesh, shardings[i]));
    }
    nn::GradientTape tape;
    DTensor out;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(out, c.fn(inputs));
    }
    nn::GradientOptions options;
    DT_ASSIGN_OR_RETURN(options.output_gradient,
                        DistributeWithTerms(runtime, c_full, mesh, c_sharding));
    const std::vector<DTensor> sources = Floating(inputs);
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                        tape.Gradient(out, sources, options));
    for (size_t k = 0; k < grads.size(); ++k) {
      const Sharding want = sources[k].sharding().WithoutPartials();
      if (grads[k].sharding() != want) {
        return absl::InternalError(absl::StrCat(
            "gradient ", k, " is laid out as ", grads[k].sharding().ToString(),
            ", its source as ", sources[k].sharding().ToString()));
      }
      DT_ASSIGN_OR_RETURN(Tensor full, grads[k].FullTensor());
      if (!AllClose(full, expected[k], tol, tol)) {
        return absl::InternalError(
            absl::StrCat("gradient ", k, " is\n", full.ToString(),
                         "\none rank gives\n", expected[k].ToString()));
      }
    }
    return absl::OkStatus();
  });
  if (status.ok()) return status;
  return absl::InternalError(absl::StrCat(where, ": ", status.message()));
}

}  // namespace

absl::Status CheckGradCase(const GradCase& c, uint32_t seed,
                           int sharding_rounds, double tol) {
  Tensor c_full;
  absl::StatusOr<std::vector<Tensor>> expected =
      OneRankGradients(c, seed, &c_full);
  if (!expected.ok()) {
    return absl::InternalError(absl::StrCat(
        Describe(c), " on one rank: ", expected.status().message()));
  }
  std::mt19937 rng(seed);
  for (int round = 0; round < sharding_rounds; ++round) {
    DT_RETURN_IF_ERROR(CheckShardings(
        c, c_full, *expected, testing_util::RandomMeshShape(rng), rng, tol));
  }
  return absl::OkStatus();
}

absl::Status CheckGradCases(const std::vector<GradCase>& cases, uint32_t seed,
                            int sharding_rounds, double tol) {
  for (size_t k = 0; k < cases.size(); ++k) {
    DT_RETURN_IF_ERROR(
        CheckGradCase(cases[k], seed + 101 * k, sharding_rounds, tol));
  }
  return absl::OkStatus();
}

std::vector<std::string> Uncovered(const std::vector<const OpDef*>& ops,
                                   const std::vector<GradCase>& cases) {
  std::set<std::string> covered;
  for (const GradCase& c : cases) covered.insert(c.op);
  std::vector<std::string> missing;
  for (const OpDef* op : ops) {
    if (!covered.count(std::string(op->name))) {
      missing.push_back(std::string(op->name));
    }
  }
  return missing;
}

Tensor Random64(const Shape& shape, double low, double high,
                std::mt19937& rng) {
  return testing_util::RandomTensor(shape, DType::kF64, low, high, rng);
}

Tensor RandomMask(const Shape& shape, std::mt19937& rng) {
  return testing_util::RandomTensor(shape, DType::kBool, 0, 1, rng);
}

Tensor RandomIndices(const Shape& shape, int64_t high, DType dtype,
                     std::mt19937& rng) {
  return testing_util::RandomTensor(shape, dtype, 0,
                                    static_cast<double>(high - 1), rng);
}

}  // namespace testing_util
}  // namespace dtensor
