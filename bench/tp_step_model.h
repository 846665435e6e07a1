#ifndef DTENSOR_BENCH_TP_STEP_MODEL_H_
#define DTENSOR_BENCH_TP_STEP_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/tensor.h"

// The training step tp_step_bench times: a 2-layer Llama on kRanks in-process
// ranks, tensor parallel (tp=2, the Megatron plan), its batch, and the step
// through the DTensor runtime (the hand-written step is
// bench/tp_step_hand_written.h's).
namespace dtensor::bench {

inline constexpr int64_t kRanks = 2;
inline constexpr int64_t kBatch = 4;
inline constexpr int64_t kSeq = 64;
inline constexpr uint64_t kSeed = 7;
inline constexpr double kLearningRate = 3e-3;

// The model: 2 layers of dim 256, 8 heads (4 kv heads), a 256-token
// vocabulary, kSeq positions.
nn::LlamaConfig ModelConfig();

// Tokens [batch, seq] and next-token targets [batch * seq], the same on every
// rank.
struct Batch {
  Tensor tokens;
  Tensor targets;
};

absl::StatusOr<Batch> MakeBatch();

// The 1-D mesh of the kRanks ranks, its dim named "tp".
absl::StatusOr<DeviceMesh> TpMesh();

// One rank's step through the DTensor runtime: the model built and
// parallelized, then forward, loss, backward and AdamW on DTensors.
class DTensorTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<DTensorTrainer>> Create(
      ProcessGroups& groups);

  // One step: forward, loss, backward, AdamW.
  absl::Status Step();

  absl::StatusOr<double> loss() const { return loss_.ToLocal().Item(); }
  // Names and local shards of the parameters, in NamedParameters order.
  const std::vector<std::string>& names() const { return names_; }
  std::vector<Tensor> LocalParams() const;

 private:
  DTensorTrainer(std::shared_ptr<Runtime> runtime, DeviceMesh mesh)
      : runtime_(std::move(runtime)), mesh_(std::move(mesh)) {}

  std::shared_ptr<Runtime> runtime_;
  DeviceMesh mesh_;
  std::unique_ptr<nn::Transformer> model_;
  std::vector<std::string> names_;
  std::vector<DTensor> params_;
  std::unique_ptr<nn::AdamW> optimizer_;
  DTensor tokens_;
  DTensor targets_;
  DTensor loss_;
};

}  // namespace dtensor::bench

#endif  // DTENSOR_BENCH_TP_STEP_MODEL_H_
