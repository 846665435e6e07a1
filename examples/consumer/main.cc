// A program outside the dtensor repository that uses the library, built two
// ways (docs/building.md, "Using dtensor from another project"): from another
// Bazel workspace (WORKSPACE, BUILD.bazel) and from CMake against an install
// made by tools/install.sh (CMakeLists.txt); build.sh runs both.
//
// On 4 in-process ranks: x row-sharded, w replicated, x @ w through the op
// engine, checked against the one-rank product. Prints "consumer ok".
#include <iostream>

#include "absl/status/status.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/tensor/tensor.h"
#include "ops/expected.h"

namespace consumer {
namespace {

using dtensor::DTensor;
using dtensor::Placement;
using dtensor::Tensor;

absl::Status RunRank(dtensor::ProcessGroups& groups,
                     const dtensor::DeviceMesh& mesh, const Tensor& x,
                     const Tensor& w, const Tensor& expected) {
  auto runtime = dtensor::Runtime::ForRank(groups);
  DT_ASSIGN_OR_RETURN(
      DTensor dx, DTensor::Distribute(runtime, x, mesh, {Placement::Shard(0)}));
  DT_ASSIGN_OR_RETURN(
      DTensor dw,
      DTensor::Distribute(runtime, w, mesh, {Placement::Replicate()}));
  DT_ASSIGN_OR_RETURN(DTensor product, dtensor::ops::Matmul(dx, dw));
  DT_ASSIGN_OR_RETURN(Tensor full, product.FullTensor());
  if (!dtensor::AllClose(full, expected)) {
    return absl::InternalError("the sharded product differs from one rank's");
  }
  return absl::OkStatus();
}

absl::Status Main() {
  DT_ASSIGN_OR_RETURN(dtensor::DeviceMesh mesh,
                      dtensor::DeviceMesh::Create({4}, {"dp"}));
  DT_ASSIGN_OR_RETURN(Tensor x,
                      Tensor::Arange(0, 8 * 6, 1, dtensor::DType::kF32));
  DT_ASSIGN_OR_RETURN(x, x.View({8, 6}));
  DT_ASSIGN_OR_RETURN(Tensor w,
                      Tensor::Arange(0, 6 * 3, 1, dtensor::DType::kF32));
  DT_ASSIGN_OR_RETURN(w, w.View({6, 3}));
  DT_ASSIGN_OR_RETURN(Tensor expected, ExpectedProduct(x, w));
  dtensor::LocalCluster cluster(mesh.size());
  return cluster.Run([&](dtensor::ProcessGroups& groups) {
    return RunRank(groups, mesh, x, w, expected);
  });
}

}  // namespace
}  // namespace consumer

int main() {
  const absl::Status status = consumer::Main();
  if (!status.ok()) {
    std::cerr << "consumer failed: " << status << "\n";
    return 1;
  }
  std::cout << "consumer ok\n";
  return 0;
}
