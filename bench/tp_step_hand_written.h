#ifndef DTENSOR_BENCH_TP_STEP_HAND_WRITTEN_H_
#define DTENSOR_BENCH_TP_STEP_HAND_WRITTEN_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/tensor/tensor.h"

// tp_step_bench's step written by hand (bench/tp_step_model.h has the model,
// the batch and the DTensor step): the local kernels of each op's backward
// definition (dtensor/ops/), called on plain local shards, with the same
// collectives issued directly: the same arithmetic as the DTensor step
// without dispatch, propagation or the tape.
namespace dtensor::bench {

// The parameters of one block (local shards; wq, wk, wv, w1, w3 hold rows of
// the output features, wo, w2 columns of the input features).
enum BlockParam {
  kWq,
  kWk,
  kWv,
  kWo,
  kW1,
  kW2,
  kW3,
  kAttentionNorm,
  kFfnNorm,
  kBlockParams
};

// What one block's backward needs from its forward.
struct BlockActivations {
  // `out`: the attention's [batch, kv heads, group, seq, head dim].
  Tensor x, n1, q, k, v, out, attended, h, n2, gate_in, gate, up, hidden;
};

// The AdamW moments of one local shard.
struct AdamWState {
  Tensor m;
  Tensor v;
  int64_t steps = 0;
};

// One rank's hand-written training step.
class HandWrittenTrainer {
 public:
  // `params`: the local shards in NamedParameters order (copied).
  static absl::StatusOr<std::unique_ptr<HandWrittenTrainer>> Create(
      ProcessGroups& groups, const std::vector<Tensor>& params);

  // One step: forward, loss, backward (the collectives counted), AdamW.
  absl::Status Step();

  absl::StatusOr<double> loss() const { return loss_.Item(); }
  const std::vector<Tensor>& LocalParams() const { return params_; }
  int64_t collectives() const { return collectives_; }

 private:
  HandWrittenTrainer(int64_t rank, std::shared_ptr<Communicator> comm)
      : rank_(rank), comm_(std::move(comm)) {}

  const Tensor& Param(int64_t layer, BlockParam p) const;

  absl::Status AllReduce(const Tensor& t);

  absl::StatusOr<Tensor> BlockForward(int64_t l, const Tensor& x,
                                      BlockActivations& a);

  // The gradient of the block's input from that of its output `dy`
  // (partial: a per-rank term of a sum over ranks, else complete).
  absl::StatusOr<Tensor> BlockBackward(int64_t l, const BlockActivations& a,
                                       const Tensor& dy, bool partial,
                                       std::vector<Tensor>& grads);

  // Backward of block `l`'s linear `p` applied to `x`, from its output's
  // gradient `g`: records the weight's gradient in `grads` and returns the
  // input's.
  absl::StatusOr<Tensor> LinearInputGrad(int64_t l, BlockParam p,
                                         const Tensor& x, const Tensor& g,
                                         std::vector<Tensor>& grads) const;

  // Backward of block `l`'s norm `p` applied to `x`, likewise.
  absl::StatusOr<Tensor> NormInputGrad(int64_t l, BlockParam p, const Tensor& x,
                                       const Tensor& g,
                                       std::vector<Tensor>& grads) const;

  // Backward of block `l`'s q or k projection `p`, likewise; its output was
  // rotated: `d`, the gradient of the rotated heads [batch, seq, heads,
  // head_dim], is rotated back first.
  absl::StatusOr<Tensor> RotaryProjectionInputGrad(
      int64_t l, BlockParam p, const Tensor& x, const Tensor& d,
      std::vector<Tensor>& grads) const;

  int64_t rank_;
  std::shared_ptr<Communicator> comm_;
  std::vector<Tensor> params_;
  std::vector<AdamWState> adamw_;
  Tensor tokens_;
  Tensor targets_;
  Tensor classes_;
  Tensor reversed_positions_;
  Tensor loss_;
  int64_t collectives_ = 0;
};

}  // namespace dtensor::bench

#endif  // DTENSOR_BENCH_TP_STEP_HAND_WRITTEN_H_
