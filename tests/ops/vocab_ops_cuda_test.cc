// Cross entropy of DTensors whose shards live on a CUDA device (in-process
// ranks sharing GPU 0, their collectives staged through the host): loss
// parallel (classes sharded, uneven included), classes and batch sharded
// together, and whole rows; every reduction and the logits' gradient,
// against the same program on CPU ranks. The loss stays on the device. Needs
// a GPU (tag `gpu`); skips with a message otherwise.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

// One placement of the logits [N, C] on a mesh (targets sharded like the
// rows).
struct LogitsPlacement {
  std::vector<int64_t> mesh;
  std::vector<Placement> logits;
  std::vector<Placement> target;
};

// What rank 0 gathers: the loss of each reduction (none, mean, sum) and the
// gradient of the mean loss to the logits, on the CPU.
struct Results {
  std::vector<Tensor> losses;
  Tensor dlogits;
};

absl::StatusOr<Tensor> Gathered(const DTensor& t, bool expect_cuda) {
  if (t.ToLocal().device().is_cuda() != expect_cuda) {
    return absl::InternalError(
        absl::StrCat("a shard on ", t.ToLocal().device().ToString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor full, t.FullTensor());
  return full.To(Device::CPU());
}

absl::StatusOr<Results> CrossEntropyOn(const LogitsPlacement& placement,
                                       const Tensor& logits,
                                       const Tensor& target, Device device) {
  DT_ASSIGN_OR_RETURN(const DeviceMesh mesh,
                      DeviceMesh::Create(placement.mesh));
  Results results;
  LocalCluster cluster(mesh.size(), CommunicatorOptions(), device);
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(DTensor x, DTensor::Distribute(runtime, logits, mesh,
                                                       placement.logits));
    DT_ASSIGN_OR_RETURN(DTensor t, DTensor::Distribute(runtime, target, mesh,
                                                       placement.target));
    std::vector<Tensor> losses;
    for (Reduction reduction :
         {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      ops::LossParallelScope loss_parallel;
      DT_ASSIGN_OR_RETURN(DTensor loss, ops::CrossEntropy(x, t, reduction));
      DT_ASSIGN_OR_RETURN(Tensor full, Gathered(loss, device.is_cuda()));
      losses.push_back(std::move(full));
    }
    nn::GradientTape tape;
    DTensor mean;
    {
      nn::GradientTape::Scope scope(tape);
      ops::LossParallelScope loss_parallel;
      DT_ASSIGN_OR_RETURN(mean, ops::CrossEntropy(x, t));
    }
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads, tape.Gradient(mean, {x}));
    DT_ASSIGN_OR_RETURN(Tensor dlogits, Gathered(grads[0], device.is_cuda()));
    if (groups.rank() == 0) results = {std::move(losses), std::move(dlogits)};
    return absl::OkStatus();
  }));
  return results;
}

void ExpectClose(const Tensor& device, const Tensor& cpu,
                 const std::string& what) {
  ASSERT_EQ(device.shape(), cpu.shape()) << what;
  EXPECT_TRUE(
      AllClose(*device.To(DType::kF64), *cpu.To(DType::kF64), 1e-4, 1e-5))
      << what << "\n device: " << device << "\n cpu: " << cpu;
}

TEST(VocabOpsCudaTest, CrossEntropyOnCudaShardsMatchesTheCpu) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "skipped: no usable CUDA device (" << cuda::Describe()
                 << ")";
  }
  const Placement r = Placement::Replicate();
  const Placement rows = Placement::Shard(0);
  const Placement classes = Placement::Shard(1);
  const std::vector<LogitsPlacement> placements = {
      {{2}, {classes}, {r}},                 // Loss parallel.
      {{3}, {classes}, {r}},                 // Uneven class blocks.
      {{2, 2}, {rows, classes}, {rows, r}},  // Batch and classes.
      {{2}, {rows}, {rows}},                 // Whole rows.
  };
  std::mt19937 rng(3);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor logits =
        testing_util::RandomTensor({6, 10}, dtype, -4, 4, rng);
    Tensor target =
        testing_util::RandomTensor({6}, DType::kI64, 0, 9, rng).Clone();
    target.data<int64_t>()[1] = -100;  // Ignored.
    for (const LogitsPlacement& placement : placements) {
      const std::string what =
          absl::StrCat(std::string(DTypeName(dtype)), " mesh [",
                       absl::StrJoin(placement.mesh, ","), "]");
      absl::StatusOr<Results> gpu =
          CrossEntropyOn(placement, logits, target, Device::CUDA(0));
      absl::StatusOr<Results> cpu =
          CrossEntropyOn(placement, logits, target, Device::CPU());
      ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
      ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
      for (size_t k = 0; k < cpu->losses.size(); ++k) {
        ExpectClose(gpu->losses[k], cpu->losses[k],
                    absl::StrCat(what, " reduction ", k));
      }
      ExpectClose(gpu->dlogits, cpu->dlogits, what + " dlogits");
    }
  }
}

}  // namespace
}  // namespace dtensor
