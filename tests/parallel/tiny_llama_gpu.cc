#include "tests/parallel/tiny_llama_gpu.h"

#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "tools/explain_config.h"

namespace dtensor::parallel {

absl::StatusOr<std::pair<Tensor, Tensor>> TinyStepData(int64_t vocab, int step,
                                                       int64_t batch,
                                                       int64_t seq) {
  std::vector<int64_t> tokens, targets;
  for (int64_t i = 0; i < batch * seq; ++i) {
    tokens.push_back((i * 7 + step * 13) % vocab);
    targets.push_back((i * 7 + step * 13 + 1) % vocab);
  }
  DT_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(tokens, {batch, seq}));
  DT_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(targets, {batch, seq}));
  return std::make_pair(std::move(t), std::move(y));
}

absl::Status WithTinyTrainers(
    LlamaTrainerOptions options,
    const std::function<absl::Status(const MakeTinyTrainer& make,
                                     int64_t vocab)>& body) {
  DT_ASSIGN_OR_RETURN(options.config, LoadLlamaConfig("tiny"));
  options.device = Device::CUDA(0);
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({1}));
  LocalCluster cluster(1, CommunicatorOptions(), Device::CUDA(0));
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    const MakeTinyTrainer make = [&] {
      return LlamaTrainer::Create(Runtime::ForRank(groups), mesh, Plan(),
                                  options);
    };
    return body(make, options.config.vocab_size);
  });
}

}  // namespace dtensor::parallel
