#ifndef DTENSOR_OPS_REGISTRY_H_
#define DTENSOR_OPS_REGISTRY_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/op_def.h"

namespace dtensor {

// Ops by name, for front ends that name them (the `dtensor propagate`
// command, plan files). Typed calls (ops::Mm, ops::Add, ...) reach their
// OpDef directly, without a lookup.
class OpRegistry {
 public:
  // Every op of dtensor's op families (ops/*_ops.h).
  static const OpRegistry& Builtin();

  // Adds `op` (not owned; it must outlive the registry). Errors: an empty
  // name, a name already registered, an op without infer, strategies or
  // kernel function.
  absl::Status Register(const OpDef* op);
  // The op called `name`; NotFound naming it.
  absl::StatusOr<const OpDef*> Find(absl::string_view name) const;
  // Every op, sorted by name.
  std::vector<const OpDef*> ops() const;

 private:
  absl::flat_hash_map<absl::string_view, const OpDef*> ops_;
};

}  // namespace dtensor

#endif  // DTENSOR_OPS_REGISTRY_H_
