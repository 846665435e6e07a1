#include "dtensor/ops/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/add_norm_ops.h"
#include "dtensor/ops/attention_ops.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/embedding_ops.h"
#include "dtensor/ops/join_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/nn_ops.h"
#include "dtensor/ops/norm_ops.h"
#include "dtensor/ops/random_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/sharding_override.h"
#include "dtensor/ops/slice_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"

namespace dtensor {

namespace {

// The built-in ops into `registry`.
void RegisterBuiltins(OpRegistry& registry) {
  // One line per op family; a new family adds its list here.
  for (const std::vector<const OpDef*>& family :
       {ops::MatmulOps(), ops::ElementwiseOps(), ops::ReductionOps(),
        ops::NnOps(), ops::NormOps(), ops::AttentionOps(), ops::EmbeddingOps(),
        ops::VocabOps(), ops::ViewOps(), ops::JoinOps(), ops::SliceOps(),
        ops::CastOps(), ops::RandomOps(), ops::AddNormOps()}) {
    for (const OpDef* op : family) {
      // The built-in names are distinct (tests/ops/registry_test.cc).
      registry.Register(op).IgnoreError();
    }
  }
}

}  // namespace

const OpRegistry& OpRegistry::Builtin() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterBuiltins(*r);
    return r;
  }();
  return *registry;
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterBuiltins(*r);
    return r;
  }();
  return *registry;
}

absl::Status OpRegistry::Register(const OpDef* op) {
  if (op == nullptr || op->name.empty()) {
    return absl::InvalidArgumentError("an op needs a name");
  }
  if (!op->infer || !op->strategies || !op->kernel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op ", op->name, " needs infer, strategies and kernel functions"));
  }
  if (op->num_inputs < 1 || op->num_optional_inputs < 0 ||
      op->num_optional_inputs > op->num_inputs || op->num_outputs < 1 ||
      op->num_saved_outputs < 0 || op->num_saved_outputs >= op->num_outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op ", op->name, " has ", op->num_inputs, " input(s) (",
        op->num_optional_inputs, " optional) and ", op->num_outputs,
        " output(s) (", op->num_saved_outputs,
        " saved): it needs at least one input and one output read"));
  }
  MutexLock lock(&mu_);
  if (!ops_.try_emplace(op->name, op).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("an op named ", op->name, " is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const OpDef*> OpRegistry::Find(absl::string_view name) const {
  MutexLock lock(&mu_);
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no op named '", name, "' (dtensor propagate --list names them)"));
  }
  return it->second;
}

std::vector<const OpDef*> OpRegistry::ops() const {
  std::vector<const OpDef*> all;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, op] : ops_) all.push_back(op);
  }
  std::sort(all.begin(), all.end(),
            [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return all;
}

absl::Status OpRegistry::OverrideShardingRule(absl::string_view name,
                                              StrategyFn strategies) const {
  DT_ASSIGN_OR_RETURN(const OpDef* op, Find(name));
  return SetShardingOverride(*op, std::move(strategies));
}

absl::Status OpRegistry::RestoreShardingRule(absl::string_view name) const {
  DT_ASSIGN_OR_RETURN(const OpDef* op, Find(name));
  ClearShardingOverride(*op);
  return absl::OkStatus();
}

}  // namespace dtensor
