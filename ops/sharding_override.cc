#include "dtensor/ops/sharding_override.h"

#include <atomic>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/mutex.h"
#include "dtensor/ops/propagation_cache.h"

namespace dtensor {
namespace {

struct Overrides {
  Mutex mu;
  absl::flat_hash_map<const OpDef*, std::shared_ptr<const StrategyFn>> rules
      ABSL_GUARDED_BY(mu);
  // Whether `rules` may be non-empty: the lock-free fast path.
  std::atomic<bool> any{false};
};

Overrides& TheOverrides() {
  static Overrides* overrides = new Overrides;
  return *overrides;
}

std::shared_ptr<const StrategyFn> OverrideOf(const OpDef& op) {
  Overrides& o = TheOverrides();
  if (!o.any.load(std::memory_order_acquire)) return nullptr;
  MutexLock lock(&o.mu);
  auto it = o.rules.find(&op);
  return it == o.rules.end() ? nullptr : it->second;
}

}  // namespace

absl::Status SetShardingOverride(const OpDef& op, StrategyFn strategies) {
  if (!strategies) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sharding rule for ", op.name, " is empty"));
  }
  Overrides& o = TheOverrides();
  {
    MutexLock lock(&o.mu);
    o.rules[&op] = std::make_shared<const StrategyFn>(std::move(strategies));
    o.any.store(true, std::memory_order_release);
  }
  PropagationCache::Shared().Clear();
  return absl::OkStatus();
}

void ClearShardingOverride(const OpDef& op) {
  Overrides& o = TheOverrides();
  {
    MutexLock lock(&o.mu);
    o.rules.erase(&op);
    o.any.store(!o.rules.empty(), std::memory_order_release);
  }
  PropagationCache::Shared().Clear();
}

bool HasShardingOverride(const OpDef& op) { return OverrideOf(op) != nullptr; }

absl::StatusOr<std::vector<OpStrategy>> StrategiesOf(
    const OpDef& op, const StrategyContext& ctx) {
  const std::shared_ptr<const StrategyFn> rule = OverrideOf(op);
  return rule != nullptr ? (*rule)(ctx) : op.strategies(ctx);
}

}  // namespace dtensor
