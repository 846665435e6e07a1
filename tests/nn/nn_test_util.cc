#include "tests/nn/nn_test_util.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"

namespace dtensor {
namespace nn_testing {

nn::LlamaConfig TinyConfig() {
  nn::LlamaConfig config;
  config.dim = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 64;
  config.multiple_of = 16;
  config.max_seq_len = 16;
  config.init_std = 0.1;
  return config;
}

absl::Status RunOnMesh(const std::vector<int64_t>& mesh_shape,
                       const RankFn& fn) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  LocalCluster cluster(mesh.size());
  return cluster.Run([&](ProcessGroups& groups) {
    return fn(Runtime::ForRank(groups), mesh);
  });
}

absl::StatusOr<Weights> GatherWeights(nn::Module& root) {
  Weights weights;
  for (const nn::NamedSlot& named : root.NamedSlots()) {
    DT_ASSIGN_OR_RETURN(Tensor full, named.slot->value.FullTensor());
    weights[named.name] = ToArray(full);
  }
  return weights;
}

absl::StatusOr<DTensor> Replicated(std::shared_ptr<Runtime> runtime,
                                   const DeviceMesh& mesh, const Tensor& full) {
  return DTensor::Distribute(
      std::move(runtime), full, mesh,
      std::vector<Placement>(mesh.ndim(), Placement::Replicate()));
}

Tensor RandomF32(const Shape& shape, double low, double high,
                 std::mt19937& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<float> values(NumElements(shape));
  for (float& v : values) v = static_cast<float>(uniform(rng));
  return *Tensor::FromVector(values, shape);
}

Tensor RandomTokens(const Shape& shape, int64_t high, std::mt19937& rng) {
  std::vector<int64_t> values(NumElements(shape));
  for (int64_t& v : values) v = static_cast<int64_t>(rng() % high);
  return *Tensor::FromVector(values, shape);
}

bool Close(const std::vector<double>& a, const std::vector<double>& b,
           double rtol, double atol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) return false;
  }
  return true;
}

// The in-process backend keeps the buffers of a group's last collective
// until the group's next one; one small all-gather on every mesh dim makes
// what the program itself still holds observable.
std::vector<double> Values(const Tensor& t) {
  return t.To(DType::kF64)->Contiguous().ToVector<double>().value();
}

absl::Status ExpectNear(const std::vector<double>& got,
                        const std::vector<double>& want, const char* what,
                        double tol) {
  if (got.size() != want.size()) {
    return absl::InternalError(absl::StrCat(what, ": ", got.size(),
                                            " values, expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      return absl::InternalError(
          absl::StrCat(what, "[", i, "] is ", got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectFull(const DTensor& grad, const std::vector<double>& want,
                        const char* what, double tol) {
  DT_ASSIGN_OR_RETURN(Tensor full, grad.FullTensor());
  return ExpectNear(Values(full), want, what, tol);
}

absl::Status FlushCollectives(const std::shared_ptr<Runtime>& runtime,
                              const DeviceMesh& mesh) {
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    std::vector<Placement> sharding(mesh.ndim(), Placement::Replicate());
    sharding[d] = Placement::Shard(0);
    FromLocalOptions options;
    options.global_shape = Shape{mesh.size(d)};
    DT_ASSIGN_OR_RETURN(Tensor one,
                        Tensor::FromVector(std::vector<float>{1}, {1}));
    DT_ASSIGN_OR_RETURN(
        DTensor x, DTensor::FromLocal(runtime, one, mesh, sharding, options));
    DT_RETURN_IF_ERROR(x.FullTensor().status());
  }
  return absl::OkStatus();
}

}  // namespace nn_testing
}  // namespace dtensor
