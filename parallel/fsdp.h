#ifndef DTENSOR_PARALLEL_FSDP_H_
#define DTENSOR_PARALLEL_FSDP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dtensor/nn/module.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
namespace parallel {

// Fully sharded data parallelism over module groups, as FSDP2's fully_shard
// applied to each group's module:
//
// - Forward: when a group's module is called, its parameters (each sharded
//   on the dp mesh dim, innermost on dim 0: ParallelizeModule's sharding) are
//   all-gathered over dp with ONE collective of a flat buffer per dtype (the
//   rank's blocks back to back; uneven blocks as they are), and the slots hold
//   the gathered copies until the call returns, when they get the sharded
//   parameters back, so the copies are freed. With prefetch, the gather of
//   the group that ran next in the previous forward (none in the first) is
//   started as soon as this group's is done, so that it runs while this
//   group computes.
// - Backward: the gathered copies are declared RecomputeInBackward, so the
//   tape keeps none of them; the first time backward needs a parameter of a
//   group it gathers the whole group again (one flat collective, or the one
//   prefetched) and, with prefetch, starts the gather of the group that ran
//   before it in this step's forward. Each group's gather is recorded as one
//   function whose backward hands each gathered parameter's gradient on as
//   propagation left it (Partial on dp): the sharded parameters are the
//   backward pass's sources, whose gradients the tape reduce-scatters, or
//   GradientBuckets does per group (dtensor/parallel/gradient_buckets.h).
// - Activation checkpointing (dtensor/nn/checkpoint.h): a group that is a
//   checkpointed module's has its gathered copies rebuilt once for the
//   record of the checkpointed call, which the recompute uses; a group inside
//   a checkpointed module gathers when the recompute calls it
//   (nn::IsRecomputing: no prefetch, the copies kept by the recompute's tape
//   until it has taken its gradients). Either way backward gathers each group
//   once, as without checkpointing.
//
// Every rank calls the groups in the same order (SPMD), so the ranks'
// collectives match. A prefetched gather that was not used when the step
// turns from forward to backward or back, or when a new forward starts (a
// group runs again), is waited for and dropped, so that no gather outlives
// the parameter values it read. Under a metadata-only runtime the gathers are
// only counted (CommCounter: one all_gather per group and dtype, attributed to
// the group's module).
struct FsdpGroup {
  // For errors and event labels: the module's fully-qualified name.
  std::string name;
  // Called to run the group: its input hook gathers, its exit hook releases.
  nn::Module* module = nullptr;
  // The modules whose parameter slots the group gathers (those sharded on
  // the dp mesh dim): `module` and the members of its subtree that no other
  // group claims.
  std::vector<nn::Module*> members;
};

struct FsdpOptions {
  // The index of the data-parallel mesh dim.
  int64_t dp_dim = 0;
  // Gather the next group while one computes.
  bool prefetch = true;
  // Mixed precision (dtensor/parallel/mixed_precision_policy.h): each
  // floating parameter's shard is cast to this dtype before the all-gather
  // (as FSDP2 does), so that the gather moves and the group computes in it;
  // the tape keeps neither the casts nor the gathered copies, and the
  // gather's backward casts each gradient back to its master's dtype. Unset:
  // the parameters' dtype.
  std::optional<DType> param_dtype;
};

// Installs FSDP on `groups`, given in forward order. The hooks share the
// groups' state; they live as long as the modules' hooks do.
// Errors: a group without a module, or a dp_dim that is not a dim of a
// parameter's mesh (InvalidArgument naming the group). A parameter not
// sharded on dp as dim 0's innermost split fails its group's gather.
absl::Status AddFsdpGroups(std::vector<FsdpGroup> groups,
                           const FsdpOptions& options);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_FSDP_H_
