#ifndef DTENSOR_OPS_SHARDING_OVERRIDE_H_
#define DTENSOR_OPS_SHARDING_OVERRIDE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/ops/strategy.h"

namespace dtensor {

// User sharding rules that replace an op's own `strategies` for every later
// call in the process, like PyTorch's `register_sharding`. Front ends set
// them by name through OpRegistry::OverrideShardingRule
// (dtensor/ops/registry.h); the engine asks StrategiesOf. Thread-safe; a call
// with no override set anywhere takes no lock.
//
// Setting or clearing an override empties PropagationCache::Shared(), so no
// choice made under the previous rule is reused. Requires: `op` outlives the
// override (ops are static singletons). Errors: an empty `strategies`.
absl::Status SetShardingOverride(const OpDef& op, StrategyFn strategies);
// Restores the op's own rule; nothing when none is set.
void ClearShardingOverride(const OpDef& op);
// Whether a user rule replaces `op`'s.
bool HasShardingOverride(const OpDef& op);

// The strategies of `op` for the call: the override's when one is set, else
// the op's own.
absl::StatusOr<std::vector<OpStrategy>> StrategiesOf(
    const OpDef& op, const StrategyContext& ctx);

}  // namespace dtensor

#endif  // DTENSOR_OPS_SHARDING_OVERRIDE_H_
