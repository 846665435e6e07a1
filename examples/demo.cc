// A tour of what dtensor does today, on 4 in-process ranks (threads):
// a 2x2 mesh, a matrix laid out over it, the cheapest plans between layouts,
// and those plans executed with their collectives counted.
//
//   ./bazelw run //examples:demo
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kCols = 6;

// Prints the plan from `from` to `to` for the demo's matrix.
absl::Status ShowPlan(const DeviceMesh& mesh, const std::string& from,
                      const std::string& to) {
  DT_ASSIGN_OR_RETURN(Sharding src, Sharding::Parse(from, 2));
  DT_ASSIGN_OR_RETURN(Sharding dst, Sharding::Parse(to, 2));
  DT_ASSIGN_OR_RETURN(RedistributePlan plan,
                      PlanRedistribution(src, dst, mesh.shape(), {1024, 1024},
                                         DType::kF32, CostModel(mesh.ndim())));
  std::cout << "plan " << from << " -> " << to << " (1024x1024 f32):\n"
            << plan.ToString() << "\n";
  return absl::OkStatus();
}

// Every rank: lay the matrix out, redistribute it twice, multiply locally.
absl::Status RunRank(ProcessGroups& groups, const DeviceMesh& mesh,
                     const Tensor& full) {
  auto runtime = Runtime::ForRank(groups);
  DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, full, mesh,
                                                     {Placement::Shard(0),
                                                      Placement::Shard(1)}));
  CommCounter counter;
  DTensor transposed;
  {
    CommCounter::Scope scope(counter);
    DT_ASSIGN_OR_RETURN(
        transposed, x.Redistribute({Placement::Shard(1), Placement::Shard(0)}));
  }
  DT_ASSIGN_OR_RETURN(Tensor gathered, transposed.FullTensor());
  if (!AllClose(gathered, full)) {
    return absl::InternalError("the redistributed matrix differs");
  }
  if (groups.rank() == 1) {
    std::cout << "rank 1 holds " << x.ToLocal().ToString() << "\nunder "
              << x.sharding().ToString() << "; after S(1),S(0) it holds "
              << transposed.ToLocal().ToString() << "\n"
              << "collectives used: " << counter.total_collectives()
              << " (permutes: " << counter.count(CommKind::kPermute)
              << "), bytes received: " << counter.total_bytes() << "\n\n";
  }
  return absl::OkStatus();
}

absl::Status Main() {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh,
                      DeviceMesh::Create({2, 2}, {"dp", "tp"}));
  std::cout << "mesh " << mesh.ToString() << "\n\n";
  DT_ASSIGN_OR_RETURN(Tensor full,
                      Tensor::Arange(0, kRows * kCols, 1, DType::kF32));
  DT_ASSIGN_OR_RETURN(full, full.View({kRows, kCols}));
  DT_ASSIGN_OR_RETURN(Tensor product, Matmul(full, *full.Transpose(0, 1)));
  std::cout << "A @ A^T on one rank: " << product.ToString() << "\n\n";

  DT_RETURN_IF_ERROR(ShowPlan(mesh, "S(0),S(1)", "S(1),S(0)"));
  DT_RETURN_IF_ERROR(ShowPlan(mesh, "S(0),S(0)", "R,R"));
  DT_RETURN_IF_ERROR(ShowPlan(mesh, "P,R", "S(0),S(1)"));

  LocalCluster cluster(mesh.size());
  return cluster.Run(
      [&](ProcessGroups& groups) { return RunRank(groups, mesh, full); });
}

}  // namespace
}  // namespace dtensor

int main() {
  const absl::Status status = dtensor::Main();
  if (!status.ok()) {
    std::cerr << "demo failed: " << status << "\n";
    return 1;
  }
  std::cout << "demo finished\n";
  return 0;
}
