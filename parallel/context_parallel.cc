#include "dtensor/parallel/context_parallel.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/nn/attention.h"
#include "dtensor/tensor/indexing.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr char kKey[] = "context_parallel";

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("plan: \"", kKey, "\"", what));
}

}  // namespace

absl::StatusOr<ContextParallelPlan> ParseContextParallel(
    const JsonValue& value) {
  if (!value.is_object()) {
    return Bad(
        absl::StrCat(" must be an object, not a ", JsonKindName(value.kind())));
  }
  ContextParallelPlan cp;
  for (const JsonValue::Member& member : value.members()) {
    if (member.first != "mesh_dim" && member.first != "order") {
      return Bad(absl::StrCat(": unknown key \"", member.first,
                              "\" (known: mesh_dim, order)"));
    }
    if (!member.second.is_string()) {
      return Bad(absl::StrCat(".", member.first, " must be a string"));
    }
    const std::string& text = member.second.string_value();
    if (member.first == "mesh_dim") {
      cp.mesh_dim = text;
    } else if (text == "balanced" || text == "contiguous") {
      cp.order = text == "balanced" ? ops::SequenceOrder::kBalanced
                                    : ops::SequenceOrder::kContiguous;
    } else {
      return Bad(
          absl::StrCat(".order \"", text, "\" is not balanced or contiguous"));
    }
  }
  return cp;
}

absl::StatusOr<int64_t> ContextParallelDim(const DeviceMesh& mesh,
                                           const ContextParallelPlan& cp) {
  absl::StatusOr<int64_t> dim = mesh.DimIndex(std::string(cp.mesh_dim));
  if (!dim.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: context_parallel.mesh_dim \"", cp.mesh_dim,
                     "\" is not a dim of the mesh (dims: ",
                     absl::StrJoin(mesh.dim_names(), ", "), ")"));
  }
  return *dim;
}

absl::StatusOr<ContextParallelTargets> ResolveContextParallel(
    nn::Module& root, const DeviceMesh& mesh, const ContextParallelPlan& cp) {
  ContextParallelTargets targets;
  DT_ASSIGN_OR_RETURN(targets.ring.mesh_dim, ContextParallelDim(mesh, cp));
  targets.ring.order = cp.order;
  for (const nn::NamedModule& named : root.NamedModules()) {
    auto* attention = dynamic_cast<nn::Attention*>(named.module);
    if (attention != nullptr) targets.attentions.push_back(attention);
  }
  if (targets.attentions.empty()) {
    return absl::InvalidArgumentError(
        "plan: context_parallel: the model has no Attention module");
  }
  return targets;
}

void ApplyContextParallel(const ContextParallelTargets& targets) {
  for (nn::Attention* attention : targets.attentions) {
    attention->set_context_parallel(targets.ring);
  }
}

absl::StatusOr<Tensor> ContextParallelBatch(const Tensor& full, int64_t ranks,
                                            const ContextParallelPlan& cp) {
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> positions,
                      ops::SequencePositions(full.size(1), ranks, cp.order));
  if (cp.order == ops::SequenceOrder::kContiguous) return full;
  DT_ASSIGN_OR_RETURN(const Tensor index,
                      Tensor::FromVector<int64_t>(
                          positions, {static_cast<int64_t>(positions.size())}));
  DT_ASSIGN_OR_RETURN(const Tensor on_device, index.To(full.device()));
  return IndexSelect(full, 1, on_device);
}

}  // namespace parallel
}  // namespace dtensor
