#include "dtensor/ops/propagation_cache.h"

#include <utility>

#include "absl/hash/hash.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// The cache key of a call, viewed in place (nothing is copied to hash it).
struct KeyView {
  const OpDef* op;
  absl::Span<const DTensorSpec* const> inputs;
  const OpArgs* args;
  const CostModel* links;

  template <typename H>
  friend H AbslHashValue(H h, const KeyView& key) {
    h = H::combine(std::move(h), key.op, *key.args);
    // Trailing absent inputs may be left out of `inputs`: hash the padded
    // list, so that both spellings of a call hash alike.
    for (int i = 0; i < key.op->num_inputs; ++i) {
      const DTensorSpec* spec =
          i < static_cast<int>(key.inputs.size()) ? key.inputs[i] : nullptr;
      if (spec == nullptr) {
        h = H::combine(std::move(h), false);
        continue;
      }
      // A few words of the mesh: equality compares it in full.
      const std::vector<int64_t>& ranks = spec->mesh().rank_list();
      h = H::combine(std::move(h), true, spec->sharding(), spec->dtype(),
                     ranks.size(), ranks.front(), ranks.back());
      h = H::combine_contiguous(std::move(h), spec->shape().data(),
                                spec->shape().size());
    }
    if (key.links != nullptr) h = H::combine(std::move(h), *key.links);
    return h;
  }
};

bool SameSpec(const DTensorSpec* a, const DTensorSpec* b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr) return false;
  return a->sharding() == b->sharding() && a->dtype() == b->dtype() &&
         a->shape() == b->shape() && SameMesh(a->mesh(), b->mesh());
}

}  // namespace

PropagationCache& PropagationCache::Shared() {
  static PropagationCache* cache = new PropagationCache;
  return *cache;
}

bool PropagationCache::Matches(const Entry& entry, const OpDef& op,
                               absl::Span<const DTensorSpec* const> inputs,
                               const OpArgs& args, const CostModel* links) {
  const Propagation& p = *entry.propagation;
  if (p.op != &op || entry.args != args ||
      entry.links.has_value() != (links != nullptr) ||
      (links != nullptr && !(*entry.links == *links))) {
    return false;
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const DTensorSpec* given = i < inputs.size() ? inputs[i] : nullptr;
    if (!SameSpec(p.inputs[i].from.get(), given)) return false;
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const Propagation>> PropagationCache::Get(
    const OpDef& op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args, const Runtime& runtime,
    absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners) {
  if (inputs.size() > static_cast<size_t>(op.num_inputs)) {
    return Propagate(op, inputs, args, runtime);  // reports the error
  }
  std::optional<CostModel> links;
  if (runtime.has_links()) {
    for (const DTensorSpec* spec : inputs) {
      if (spec == nullptr) continue;
      links = runtime.CostModelFor(spec->mesh());
      break;
    }
  }
  const CostModel* links_key = links.has_value() ? &*links : nullptr;
  const size_t hash =
      absl::Hash<KeyView>{}(KeyView{&op, inputs, &args, links_key});
  {
    ReaderMutexLock lock(&mu_);
    auto it = buckets_.find(hash);
    if (it != buckets_.end()) {
      for (const Entry& entry : it->second) {
        if (Matches(entry, op, inputs, args, links_key)) {
          return entry.propagation;
        }
      }
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  DT_ASSIGN_OR_RETURN(std::shared_ptr<const Propagation> propagation,
                      Propagate(op, inputs, args, runtime, owners));
  MutexLock lock(&mu_);
  if (size_ >= kMaxEntries) {
    buckets_.clear();
    size_ = 0;
  }
  absl::InlinedVector<Entry, 1>& bucket = buckets_[hash];
  for (const Entry& entry : bucket) {
    // Another thread got there first: share its result.
    if (Matches(entry, op, inputs, args, links_key)) return entry.propagation;
  }
  bucket.push_back(Entry{propagation, args, std::move(links)});
  ++size_;
  return propagation;
}

void PropagationCache::Clear() {
  MutexLock lock(&mu_);
  buckets_.clear();
  size_ = 0;
}

int64_t PropagationCache::size() const {
  ReaderMutexLock lock(&mu_);
  return size_;
}

}  // namespace dtensor
