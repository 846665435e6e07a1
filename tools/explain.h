#ifndef DTENSOR_TOOLS_EXPLAIN_H_
#define DTENSOR_TOOLS_EXPLAIN_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/comm_counter.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/tensor.h"
#include "tools/explain_memory.h"

namespace dtensor {

// Every shipped config (405b: 126 layers) runs in full.
inline constexpr int64_t kExplainMaxLayersRun = 128;

// What `dtensor explain` explains: one training step (forward, backward,
// AdamW update) of a Llama model parallelized by a plan on a mesh.
struct ExplainRequest {
  // As given on the command line, for the report.
  std::string config_name;
  std::string plan_name;
  nn::LlamaConfig config;
  parallel::Plan plan;
  DeviceMesh mesh;
  // The global batch [batch, seq] of tokens.
  int64_t batch = 1;
  int64_t seq = 1;
  DType dtype = DType::kBF16;
  // One per mesh dim; empty: the cost model's defaults.
  std::vector<MeshDimLink> links;
  // Models with more layers than this are not run layer by layer: their
  // blocks are identical, so 2- and 3-layer runs give the rest
  // (explain_layers.h), in time independent of the number of layers. Plans
  // that name a layer by number are always run in full.
  int64_t max_layers_run = kExplainMaxLayersRun;
};

// Identical collectives (kind, mesh dims, bytes, time), `count` of them.
struct CollectiveSummary {
  CommKind kind = CommKind::kAllGather;
  std::vector<int64_t> mesh_dims;
  // Received by each rank, per collective (the cost model's padded figure).
  double bytes_per_rank = 0;
  // Estimated by the cost model, per collective.
  double time_us = 0;
  int64_t count = 1;
};

// The collectives of a phase (or a step): per kind and in all. Local steps
// are not collectives and are left out.
struct CommTotals {
  struct PerKind {
    int64_t count = 0;
    double bytes_per_rank = 0;
    double time_us = 0;
  };
  // The collective kinds, in CommKind order (kLocal excluded).
  static constexpr std::array<CommKind, 5> kKinds = {
      CommKind::kAllGather, CommKind::kAllReduce, CommKind::kReduceScatter,
      CommKind::kAllToAll, CommKind::kPermute};

  // Indexed by CommKind.
  std::array<PerKind, 5> by_kind;
  int64_t collectives = 0;
  double bytes_per_rank = 0;
  double time_us = 0;

  // Adds one recorded event (ignored when local).
  void Add(const CommCounter::Event& event);
  void Add(const CommTotals& other);
  const PerKind& of(CommKind kind) const {
    return by_kind[static_cast<size_t>(kind)];
  }
};

// Activation checkpointing in one step (nn::CheckpointTally), per rank.
struct RecomputeReport {
  // Checkpointed module calls.
  int64_t regions = 0;
  // The activations the tape does not keep (recomputed in backward), summed
  // over the regions: what checkpointing takes off peak_activations.
  int64_t recomputed_activations = 0;
  // The largest region's, which backward holds again while recomputing it:
  // part of MemoryEstimate::peak_activations.
  int64_t working_set = 0;
  // Selective mode: the op outputs kept in forward (in peak_activations).
  int64_t saved_outputs = 0;
  // The extra forward compute in backward: calls run again.
  int64_t recomputed_calls = 0;
  // The collectives the recomputed forwards issue in backward (part of the
  // backward totals).
  CommTotals collectives;
};

// A tensor's global shape, layout and this rank's block.
struct TensorLayout {
  Shape shape;
  DType dtype = DType::kF32;
  // Sharding::ToString: "S(0),R".
  std::string layout;
  Shape local_shape;
};

struct ParameterReport {
  std::string name;  // Fully qualified.
  TensorLayout layout;
};

struct ModuleReport {
  // Fully qualified ("" for the root); kOutsideModules for the collectives
  // no module owns (the loss and its backward). A parameter's gradient
  // brought to its layout at the end of backward belongs to its module.
  std::string name;
  std::string type;  // Module::type_name(); "" outside modules.
  // The module's own parameters (not its children's).
  std::vector<ParameterReport> parameters;
  // What Forward got (after the input hooks) and what the module returned
  // (after the output hooks), at its first call; unset when never called.
  std::optional<TensorLayout> input;
  std::optional<TensorLayout> output;
  // The collectives the module owns (those of its children excluded), in
  // issue order, identical ones merged into the first. A collective that
  // carries several modules' tensors (a gradient bucket) is listed under
  // each of them with the bytes of that module's tensors; the phase totals
  // count it once.
  std::vector<CollectiveSummary> forward;
  std::vector<CollectiveSummary> backward;
};

inline constexpr char kOutsideModules[] = "(outside modules)";

// The bytes above which an all-gather is warned about: each rank receives
// at least this much in one collective.
inline constexpr double kLargeGatherBytes = 64.0 * (1 << 20);

struct ExplainReport {
  // What was explained; the report's header (config and plan as named on the
  // command line, mesh, batch, seq, dtype) states it.
  ExplainRequest request;
  // The rank whose view this is.
  int64_t rank = 0;
  // Every module of the model in pre-order, then kOutsideModules.
  std::vector<ModuleReport> modules;
  CommTotals forward;
  CommTotals backward;
  CommTotals optimizer;
  CommTotals step;
  MemoryEstimate memory;
  // With activation checkpointing in the plan: what it saves and costs;
  // absent otherwise (the report's text and JSON are then those without it).
  std::optional<RecomputeReport> recompute;
  // The rank's memory against one device's capacity, when one was given
  // (--device-memory); absent, the report's text and JSON are those without
  // it.
  std::optional<DeviceFit> device;
  // Large gathers and uneven shards, one line each (repeats over layers
  // merged: "layers.*.attention.wq ... (x80)").
  std::vector<std::string> warnings;
};

// Runs one training step of parallel::LlamaTrainer under a metadata-only
// runtime as `rank` sees it, counting every collective per phase and per
// module (CommOwner), and estimates the rank's memory. Every rank issues the
// same collectives with the same (padded) byte counts; rank 0 holds the
// largest block of every tensor (torch.chunk puts the short chunks last), so
// its memory is the maximum over ranks. Errors: those of LlamaTrainer::Create
// (the plan against the mesh and config), of the batch shape, and a rank
// outside the mesh (naming it).
absl::StatusOr<ExplainReport> ExplainLlamaStep(const ExplainRequest& request,
                                               int64_t rank = 0);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_H_
