#ifndef DTENSOR_NN_CHECKPOINT_H_
#define DTENSOR_NN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/thread_scope.h"
#include "dtensor/comm_counter.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// Activation checkpointing of a module, as torch.utils.checkpoint and
// torchtitan's activation_checkpoint: while a tape records, the module's
// forward keeps only its input (and, in selective mode, the outputs of the
// chosen ops); backward runs the forward again and takes the gradients
// through it. Gradients are bit-identical to those without checkpointing:
// the recomputed forward runs the same ops on the same values, with the
// parameters the call saw (FSDP's gathered copies, rebuilt once by the tape:
// dtensor/parallel/fsdp.h), and the module's Dropout children drawing from
// the same offsets of their streams (Dropout::offset).
struct CheckpointPolicy {
  enum class Mode { kFull, kSelective };

  // The ops whose outputs selective mode keeps by default: the matmuls and
  // attention (the expensive ones), so that backward recomputes only norms,
  // activations, rotary embeddings, views and additions.
  static std::vector<std::string> DefaultSavedOps();

  static CheckpointPolicy Full() { return {}; }
  static CheckpointPolicy Selective(
      std::vector<std::string> saved_ops = DefaultSavedOps()) {
    return {Mode::kSelective, std::move(saved_ops)};
  }

  // kFull: recompute every op of the forward; kSelective: keep the outputs of
  // the calls of `saved_ops` (OpDef names: "linear", "matmul",
  // "scaled_dot_product_attention", ...) and recompute the others.
  Mode mode = Mode::kFull;
  std::vector<std::string> saved_ops;
};

// "full" / "selective".
absl::string_view CheckpointModeName(CheckpointPolicy::Mode mode);
// Errors: another name (InvalidArgument naming it).
absl::StatusOr<CheckpointPolicy::Mode> ParseCheckpointMode(
    absl::string_view name);

// Checkpoints `module`'s calls from now on (Module::SetAroundForward; its
// hooks still run once per call, outside the checkpointed region). Calls
// made while no tape records (evaluation, NoGrad) run as before.
// Requires: Forward reads only its input and the slots of the module's
// subtree (a tensor it reads from elsewhere gets no gradient through it);
// the module outlives the tapes that recorded it, and is not checkpointed
// again while one holds a record of it. Errors: kSelective with no saved op
// (InvalidArgument).
absl::Status CheckpointModule(Module& module, CheckpointPolicy policy);

// Whether a checkpointed module's forward is being run again on this thread
// (in backward). FSDP's hooks then gather as backward does: the gathered
// copies are kept by the recompute's tape until its gradients are taken,
// so the group is gathered once (dtensor/parallel/fsdp.h).
bool IsRecomputing();

// What checkpointing did on the thread while a tally is active
// (CheckpointTally::Scope), for `dtensor explain`: per rank, local bytes.
struct CheckpointTally {
  using Scope = ThreadScope<CheckpointTally>;

  // Checkpointed calls recorded in forward.
  int64_t regions = 0;
  // The activations the tape would have kept without checkpointing and does
  // not (each region's intermediate tensors: neither its input, parameters,
  // output nor kept op outputs), summed; and the largest region's, which
  // backward holds again while it recomputes that region.
  int64_t recomputed_bytes = 0;
  int64_t largest_region_bytes = 0;
  // Selective mode: the op outputs kept in forward.
  int64_t saved_bytes = 0;
  // Calls (ops, redistributions, functions) run again in backward; selective
  // mode's replayed ops not counted.
  int64_t recomputed_calls = 0;
  // The collectives the recomputed forwards issue in backward.
  CommCounter recompute_collectives;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_CHECKPOINT_H_
