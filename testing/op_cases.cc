#include "dtensor/testing/op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/tensor/cuda_backend.h"

namespace dtensor {
namespace testing_util {

std::vector<int64_t> RandomMeshShape(std::mt19937& rng) {
  static const std::vector<std::vector<int64_t>> kShapes = {
      {1},    {2},    {3},    {4},    {5},       {2, 2},
      {2, 3}, {3, 2}, {1, 4}, {4, 2}, {2, 2, 2}, {2, 1, 2},
  };
  return kShapes[rng() % kShapes.size()];
}

std::string TestSharding::ToString() const {
  std::vector<std::string> items;
  for (const Placement& p : placements) items.push_back(p.ToString());
  std::string text = absl::StrJoin(items, ",");
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d].size() > 1) {
      absl::StrAppend(&text, " order", d, "=[", absl::StrJoin(order[d], ","),
                      "]");
    }
  }
  return text;
}

TestSharding RandomSharding(int64_t mesh_ndim, int64_t tensor_rank,
                            const std::vector<ReduceOp>& partial_ops,
                            std::mt19937& rng) {
  TestSharding sharding;
  sharding.order.assign(tensor_rank, {});
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const int kind = rng() % 5;  // 0-1: R, 2-3: S, 4: P
    if (kind >= 2 && kind <= 3 && tensor_rank > 0) {
      const int64_t d = rng() % tensor_rank;
      sharding.placements.push_back(Placement::Shard(d));
      sharding.order[d].push_back(m);
    } else if (kind == 4 && !partial_ops.empty()) {
      sharding.placements.push_back(
          Placement::Partial(partial_ops[rng() % partial_ops.size()]));
    } else {
      sharding.placements.push_back(Placement::Replicate());
    }
  }
  for (auto& dims : sharding.order) std::shuffle(dims.begin(), dims.end(), rng);
  return sharding;
}

std::vector<ReduceOp> PartialOpsFor(DType dtype) {
  if (IsFloatingPoint(dtype)) {
    return {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  }
  if (dtype == DType::kBool) return {ReduceOp::kMax, ReduceOp::kMin};
  return {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
}

Tensor RandomTensor(const Shape& shape, DType dtype, double low, double high,
                    std::mt19937& rng) {
  Tensor values = *Tensor::Zeros(shape, DType::kF64);
  double* data = values.data<double>();
  std::uniform_real_distribution<double> uniform(low, high);
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (dtype == DType::kBool) {
      data[i] = rng() % 2;
    } else if (IsFloatingPoint(dtype)) {
      data[i] = uniform(rng);
    } else {
      data[i] = std::ceil(low) +
                static_cast<double>(rng() %
                                    static_cast<uint32_t>(std::floor(high) -
                                                          std::ceil(low) + 1));
    }
  }
  return *values.To(dtype);
}

Shape RandomShape(int64_t rank, int64_t max_size, std::mt19937& rng) {
  Shape shape;
  for (int64_t d = 0; d < rank; ++d) {
    // Sizes 1..max_size; a zero now and then.
    shape.push_back(rng() % 16 == 0 ? 0 : 1 + rng() % max_size);
  }
  return shape;
}

namespace {

// DistributeWithTerms of `full` on the device of the runtime's communicators;
// the Partial terms are made on the host.
absl::StatusOr<DTensor> DistributeWithTermsOn(std::shared_ptr<Runtime> runtime,
                                              const Tensor& full,
                                              const DeviceMesh& mesh,
                                              const TestSharding& sharding) {
  DT_ASSIGN_OR_RETURN(
      DTensor x, DTensor::Distribute(runtime, full, mesh, sharding.placements,
                                     sharding.order));
  bool partial = false;
  for (const Placement& p : sharding.placements) partial |= p.is_partial();
  if (!partial) return x;
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      mesh.CoordinateOf(runtime->rank()));
  const std::vector<int64_t> mesh_shape = mesh.shape();
  const DType dtype = full.dtype();
  const Device device = x.ToLocal().device();
  DT_ASSIGN_OR_RETURN(Tensor term, x.ToLocal().To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(term, term.To(DType::kF64));
  term = term.Clone();
  double* data = term.data<double>();
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    const Placement& p = sharding.placements[m];
    if (!p.is_partial()) continue;
    const int64_t n = mesh_shape[m];
    const int64_t c = coord[m];
    for (int64_t i = 0; i < term.numel(); ++i) {
      switch (p.reduce_op()) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: {
          const double noise = static_cast<double>((i * 7 + m * 3) % 5) - 2;
          data[i] += noise * (c == 0 ? -(n - 1) : 1);
          break;
        }
        case ReduceOp::kMax:
          if (c != 0) {
            data[i] = dtype == DType::kBool ? 0 : data[i] - 1 - c % 3;
          }
          break;
        case ReduceOp::kMin:
          if (c != 0) {
            data[i] = dtype == DType::kBool ? 1 : data[i] + 1 + c % 3;
          }
          break;
      }
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor local, term.To(dtype));
  DT_ASSIGN_OR_RETURN(local, local.To(device));
  FromLocalOptions options;
  options.global_shape = full.shape();
  options.order = sharding.order;
  return DTensor::FromLocal(runtime, local, mesh, sharding.placements, options);
}

// CheckDevice's value, from the environment.
absl::StatusOr<Device> DeviceFromEnv() {
  const char* name = std::getenv("DTENSOR_TEST_DEVICE");
  if (name == nullptr || absl::string_view(name) == "cpu") {
    return Device::CPU();
  }
  absl::string_view rest(name);
  int index = 0;
  const bool valid =
      rest == "cuda" || (absl::ConsumePrefix(&rest, "cuda:") &&
                         absl::SimpleAtoi(rest, &index) && index >= 0);
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DTENSOR_TEST_DEVICE=", name, ": expected cpu, cuda or cuda:N"));
  }
  if (index >= cuda::DeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("DTENSOR_TEST_DEVICE=", name, ": no such CUDA device (",
                     cuda::Describe(), ")"));
  }
  return Device::CUDA(index);
}

}  // namespace

absl::StatusOr<Device> CheckDevice() {
  // Read once: every distributed test input asks.
  static const absl::StatusOr<Device>* const device =
      new absl::StatusOr<Device>(DeviceFromEnv());
  return *device;
}

absl::StatusOr<DTensor> DistributeWithTerms(std::shared_ptr<Runtime> runtime,
                                            const Tensor& full,
                                            const DeviceMesh& mesh,
                                            const TestSharding& sharding) {
  DT_ASSIGN_OR_RETURN(const Device device, CheckDevice());
  DT_ASSIGN_OR_RETURN(const Tensor on_device, full.To(device));
  return DistributeWithTermsOn(runtime, on_device, mesh, sharding);
}

absl::StatusOr<DTensor> MetaTensor(std::shared_ptr<Runtime> runtime,
                                   const DeviceMesh& mesh, const Shape& shape,
                                   absl::string_view sharding_text,
                                   DType dtype) {
  DT_ASSIGN_OR_RETURN(Sharding sharding,
                      Sharding::Parse(std::string(sharding_text),
                                      static_cast<int64_t>(shape.size())));
  DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                      DTensorSpec::Create(mesh, sharding, shape, dtype));
  return DTensor::FromSpec(std::move(runtime), std::move(spec));
}

namespace {

std::string Describe(const OpCase& c) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(
        c.inputs[i].defined()
            ? absl::StrCat(ShapeToString(c.inputs[i].shape()), " ",
                           std::string(DTypeName(c.inputs[i].dtype())), " ",
                           c.shardings[i].ToString())
            : "absent");
  }
  return absl::StrCat(c.description, " inputs {", absl::StrJoin(inputs, "; "),
                      "}");
}

}  // namespace

absl::Status CheckCases(const std::vector<int64_t>& mesh_shape,
                        const std::vector<OpCase>& cases,
                        const DTensorCall& call, const ReferenceCall& reference,
                        double rtol, double atol) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  std::vector<std::vector<Tensor>> expected;
  for (const OpCase& c : cases) {
    absl::StatusOr<std::vector<Tensor>> ref = reference(c.inputs);
    if (!ref.ok()) {
      return absl::InternalError(absl::StrCat(
          "reference failed on ", Describe(c), ": ", ref.status().message()));
    }
    for (Tensor& t : *ref) t = *t.To(DType::kF64);
    expected.push_back(*std::move(ref));
  }
  const std::string mesh_text = absl::StrJoin(mesh_shape, "x");
  DT_ASSIGN_OR_RETURN(const Device device, CheckDevice());
  LocalCluster cluster(mesh.size(), CommunicatorOptions(), device);
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    for (size_t k = 0; k < cases.size(); ++k) {
      const OpCase& c = cases[k];
      const auto fail = [&](absl::string_view what) {
        return absl::InternalError(
            absl::StrCat("mesh ", mesh_text, ", ", Describe(c), ": ", what));
      };
      std::vector<DTensor> inputs(c.inputs.size());
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (!c.inputs[i].defined()) continue;
        DT_ASSIGN_OR_RETURN(
            inputs[i],
            DistributeWithTerms(runtime, c.inputs[i], mesh, c.shardings[i]));
      }
      absl::StatusOr<std::vector<DTensor>> outputs = call(inputs);
      if (!outputs.ok()) return fail(outputs.status().ToString());
      if (outputs->size() != expected[k].size()) {
        return fail(absl::StrCat(outputs->size(), " outputs, expected ",
                                 expected[k].size()));
      }
      for (size_t j = 0; j < outputs->size(); ++j) {
        const DTensor& out = (*outputs)[j];
        DT_ASSIGN_OR_RETURN(ShardBlock block, out.LocalBlock());
        if (out.ToLocal().shape() != block.shape) {
          return fail(absl::StrCat(
              "output ", j, " (", out.spec().ToString(), ") has local shape ",
              ShapeToString(out.ToLocal().shape()), " on rank ", groups.rank(),
              ", its layout gives ", ShapeToString(block.shape)));
        }
        DT_ASSIGN_OR_RETURN(Tensor full, out.FullTensor());
        DT_ASSIGN_OR_RETURN(full, full.To(Device::CPU()));
        DT_ASSIGN_OR_RETURN(Tensor got, full.To(DType::kF64));
        if (got.shape() != expected[k][j].shape() ||
            !AllClose(got, expected[k][j], rtol, atol)) {
          return fail(absl::StrCat(
              "output ", j, " (", out.sharding().ToString(), ") is\n",
              got.ToString(), "\nexpected\n", expected[k][j].ToString()));
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace testing_util
}  // namespace dtensor
