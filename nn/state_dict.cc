#include "dtensor/nn/state_dict.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/cast_ops.h"

namespace dtensor {
namespace nn {
namespace {

// `loaded` in the sharding and dtype of `slot`'s current value (as it is when
// the slot has none). Errors name the problem, not the key.
absl::StatusOr<DTensor> Adapt(const TensorSlot& slot, const DTensor& loaded) {
  if (!loaded.defined()) {
    return absl::InvalidArgumentError("the DTensor is undefined");
  }
  if (loaded.shape() != slot.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected shape ", ShapeToString(slot.shape), ", got ",
                     ShapeToString(loaded.shape())));
  }
  const DTensor& current = slot.value;
  if (!current.defined()) return loaded;
  if (loaded.mesh() != current.mesh()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the DTensor is on ", loaded.mesh().ToString(),
                     ", the module's on ", current.mesh().ToString()));
  }
  DT_ASSIGN_OR_RETURN(DTensor value, loaded.Redistribute(current.sharding()));
  if (value.dtype() != current.dtype()) {
    DT_ASSIGN_OR_RETURN(value, ops::To(value, current.dtype()));
  }
  return value;
}

}  // namespace

absl::StatusOr<StateDict> GetStateDict(Module& root) {
  StateDict state;
  for (const NamedSlot& named : root.NamedSlots()) {
    if (!named.slot->value.defined()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GetStateDict: \"", named.name, "\" has no value (initialize or ",
          "load the module first)"));
    }
    state.emplace(named.name, named.slot->value);
  }
  return state;
}

absl::Status LoadStateDict(Module& root, const StateDict& state,
                           const LoadOptions& options) {
  const std::vector<NamedSlot> slots = root.NamedSlots();
  std::vector<std::string> missing, unexpected, invalid;
  absl::flat_hash_set<absl::string_view> known;
  std::vector<std::pair<TensorSlot*, DTensor>> updates;
  for (const NamedSlot& named : slots) {
    known.insert(named.name);
    const auto it = state.find(named.name);
    if (it == state.end()) {
      missing.push_back(named.name);
      continue;
    }
    absl::StatusOr<DTensor> value = Adapt(*named.slot, it->second);
    if (!value.ok()) {
      invalid.push_back(
          absl::StrCat(named.name, ": ", value.status().message()));
      continue;
    }
    updates.emplace_back(named.slot, *std::move(value));
  }
  for (const auto& [name, value] : state) {
    if (!known.contains(name)) unexpected.push_back(name);
  }
  std::vector<std::string> errors;
  if (options.strict && !missing.empty()) {
    errors.push_back(
        absl::StrCat("missing keys [", absl::StrJoin(missing, ", "), "]"));
  }
  if (options.strict && !unexpected.empty()) {
    errors.push_back(absl::StrCat("unexpected keys [",
                                  absl::StrJoin(unexpected, ", "), "]"));
  }
  if (!invalid.empty()) errors.push_back(absl::StrJoin(invalid, "; "));
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadStateDict: ", absl::StrJoin(errors, "; ")));
  }
  for (auto& [slot, value] : updates) slot->value = std::move(value);
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace dtensor
