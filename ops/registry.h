#ifndef DTENSOR_OPS_REGISTRY_H_
#define DTENSOR_OPS_REGISTRY_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/mutex.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {

// Ops by name, for front ends that name them (the `dtensor propagate`
// command, explain, plan tools). Typed calls (ops::Mm, ops::Add, ...) reach
// their OpDef directly, without a lookup. Thread-safe.
class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // Every op of dtensor's op families (dtensor/ops/*_ops.h), and nothing else.
  static const OpRegistry& Builtin();
  // The process's registry, which front ends look names up in: the built-in
  // ops and every op the program registered (Register, OpRegistration).
  static OpRegistry& Global();

  // Adds `op` (not owned; it must outlive the registry). Errors: an empty
  // name, a name already registered, an op without infer, strategies or
  // kernel function, input or output counts that do not fit.
  absl::Status Register(const OpDef* op);
  // The op called `name`; NotFound naming it.
  absl::StatusOr<const OpDef*> Find(absl::string_view name) const;
  // Every op, sorted by name.
  std::vector<const OpDef*> ops() const;

  // Replaces the sharding rule of the op called `name` (built-in or not) for
  // every later call in the process, typed calls included (PyTorch's
  // `register_sharding`); see dtensor/ops/sharding_override.h. Errors: no op of
  // that name, an empty rule.
  absl::Status OverrideShardingRule(absl::string_view name,
                                    StrategyFn strategies) const;
  // Restores the op's own rule. Errors: no op of that name.
  absl::Status RestoreShardingRule(absl::string_view name) const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<absl::string_view, const OpDef*> ops_
      ABSL_GUARDED_BY(mu_);
};

// Registers an op in OpRegistry::Global() when constructed; a namespace-scope
// static of one makes a library's op known to every front end the library is
// linked into (mark the cc_library `alwayslink = True`):
//
//   const OpDef& FusedDef();
//   const OpRegistration kFused(&FusedDef());
//
// Registration never aborts: status() says whether it succeeded, and
// OpRegistry::Global().Find names the op only if it did.
class OpRegistration {
 public:
  explicit OpRegistration(const OpDef* op)
      : status_(OpRegistry::Global().Register(op)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

}  // namespace dtensor

#endif  // DTENSOR_OPS_REGISTRY_H_
