#include "dtensor/parallel/plan_resolution.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/placement.h"

namespace dtensor {
namespace parallel {
namespace {

// The fully-qualified name of parameter `slot` of the module named `module`.
std::string SlotName(absl::string_view module, absl::string_view slot) {
  return module.empty() ? std::string(slot) : absl::StrCat(module, ".", slot);
}

// Where the entries of a plan bind in a module tree, entry by entry.
class PlanBinding {
 public:
  explicit PlanBinding(std::vector<nn::NamedModule> modules)
      : modules_(std::move(modules)), owners_(modules_.size()) {}

  // Binds `entry` to every module its pattern matches; false if none.
  absl::StatusOr<bool> BindModules(
      const PlanEntry& entry,
      const std::shared_ptr<const ParallelStyle>& style) {
    bool matched = false;
    for (size_t i = 0; i < modules_.size(); ++i) {
      if (!MatchPattern(entry.pattern, modules_[i].name)) continue;
      matched = true;
      Owner& owner = owners_[i];
      if (owner.module.entry != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan: module \"", modules_[i].name, "\" is matched by both \"",
            owner.module.entry->pattern, "\" and \"", entry.pattern, "\""));
      }
      DT_RETURN_IF_ERROR(CheckFits(entry, *style, modules_[i]));
      DT_RETURN_IF_ERROR(CheckNoParameterKey(owner, entry, modules_[i].name));
      owner.module = ResolvedEntry{modules_[i].name, modules_[i].module, &entry,
                                   style, ""};
    }
    return matched;
  }

  // Binds `entry` to every parameter its pattern matches; false if none.
  absl::StatusOr<bool> BindParameters(
      const PlanEntry& entry,
      const std::shared_ptr<const ParallelStyle>& style) {
    bool matched = false;
    for (size_t i = 0; i < modules_.size(); ++i) {
      for (const nn::TensorSlot& slot : modules_[i].module->slots()) {
        const std::string fqn = SlotName(modules_[i].name, slot.name);
        if (!slot.is_parameter || !MatchPattern(entry.pattern, fqn)) continue;
        matched = true;
        DT_RETURN_IF_ERROR(CheckFits(entry, *style, modules_[i]));
        Owner& owner = owners_[i];
        for (const ResolvedEntry& other : owner.parameters) {
          if (other.parameter != slot.name) continue;
          return absl::InvalidArgumentError(absl::StrCat(
              "plan: parameter \"", fqn, "\" is matched by both \"",
              other.entry->pattern, "\" and \"", entry.pattern, "\""));
        }
        if (owner.module.entry != nullptr) {
          return BothKeys(fqn, *owner.module.entry, entry);
        }
        owner.parameters.push_back(
            ResolvedEntry{fqn, modules_[i].module, &entry, style, slot.name});
      }
    }
    return matched;
  }

  // The modules of the tree, pre-order.
  const std::vector<nn::NamedModule>& modules() const { return modules_; }

  // The style that places `slot` of modules()[module]: a parameter key's,
  // else the module key's; null when no entry names either.
  const ParallelStyle* PlacingStyle(size_t module,
                                    absl::string_view slot) const {
    const Owner& owner = owners_[module];
    for (const ResolvedEntry& p : owner.parameters) {
      if (p.parameter == slot) return p.style.get();
    }
    return owner.module.style.get();
  }

  // Pre-order: each module's entry, then its parameters' entries.
  std::vector<ResolvedEntry> Resolved() const {
    std::vector<ResolvedEntry> resolved;
    for (const Owner& owner : owners_) {
      if (owner.module.entry != nullptr) resolved.push_back(owner.module);
      for (const ResolvedEntry& p : owner.parameters) resolved.push_back(p);
    }
    return resolved;
  }

 private:
  // The entries bound to one module and to its parameters.
  struct Owner {
    ResolvedEntry module{"", nullptr, nullptr, nullptr, ""};
    std::vector<ResolvedEntry> parameters;
  };

  static absl::Status CheckFits(const PlanEntry& entry,
                                const ParallelStyle& style,
                                const nn::NamedModule& named) {
    absl::Status fits = style.CheckFits(*named.module, named.name);
    if (fits.ok()) return fits;
    return absl::Status(fits.code(),
                        absl::StrCat("plan: style ", style.name(), " of \"",
                                     entry.pattern, "\" ", fits.message()));
  }

  static absl::Status BothKeys(absl::string_view parameter,
                               const PlanEntry& module_key,
                               const PlanEntry& parameter_key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: parameter \"", parameter,
        "\" is placed by both the module key \"", module_key.pattern,
        "\" and the parameter key \"", parameter_key.pattern, "\""));
  }

  // A module key for a module whose parameter a parameter key names.
  static absl::Status CheckNoParameterKey(const Owner& owner,
                                          const PlanEntry& entry,
                                          absl::string_view module) {
    if (owner.parameters.empty()) return absl::OkStatus();
    const ResolvedEntry& p = owner.parameters.front();
    return BothKeys(p.fqn, entry, *p.entry);
  }

  std::vector<nn::NamedModule> modules_;
  std::vector<Owner> owners_;
};

// The names of `modules` (the root, "", left out), at most 24 of them, for
// a message.
std::string ModuleNames(const std::vector<nn::NamedModule>& modules) {
  constexpr size_t kShown = 24;
  std::vector<absl::string_view> names;
  for (const nn::NamedModule& m : modules) {
    if (!m.name.empty()) names.push_back(m.name);
  }
  const size_t total = names.size();
  if (total > kShown) names.resize(kShown);
  return absl::StrCat("[", absl::StrJoin(names, ", "),
                      total > kShown ? absl::StrCat(", ... (", total, ")") : "",
                      "]");
}

// The index of the mesh dim a plan option (`option`: "tp_dim", "dp_dim")
// names. Errors: NotFound naming the option, its value and the mesh's dims.
absl::StatusOr<int64_t> PlanDim(const DeviceMesh& mesh,
                                absl::string_view option,
                                absl::string_view name) {
  absl::StatusOr<int64_t> dim = mesh.DimIndex(std::string(name));
  if (dim.ok()) return dim;
  return absl::Status(dim.status().code(),
                      absl::StrCat("plan: ", option, " \"", name,
                                   "\": ", dim.status().message()));
}

// OK when the ranks of the runtime that holds `root`'s parameters include
// every rank of `mesh` (Runtime::CheckMesh); a tree without values is not
// checked here.
absl::Status CheckMeshFitsWorld(nn::Module& root, const DeviceMesh& mesh) {
  for (const nn::NamedSlot& named : root.NamedSlots()) {
    const DTensor& value = named.slot->value;
    if (!value.defined()) continue;
    absl::Status fits = value.runtime()->CheckMesh(mesh);
    if (fits.ok()) return fits;
    return absl::Status(fits.code(),
                        absl::StrCat("parallelize: ", fits.message()));
  }
  return absl::OkStatus();
}

// Binds every entry of `plan.tp`: to the modules its pattern matches, or,
// matching none, to the parameters it matches.
absl::Status BindEntries(const Plan& plan, PlanBinding& binding) {
  for (const PlanEntry& entry : plan.tp) {
    DT_ASSIGN_OR_RETURN(std::shared_ptr<const ParallelStyle> style,
                        StyleOf(entry));
    DT_ASSIGN_OR_RETURN(bool matched, binding.BindModules(entry, style));
    if (!matched) {
      DT_ASSIGN_OR_RETURN(matched, binding.BindParameters(entry, style));
    }
    if (!matched) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: pattern \"", entry.pattern,
                       "\" matches no module or parameter; the modules are ",
                       ModuleNames(binding.modules())));
    }
  }
  return absl::OkStatus();
}

// The sharding of a parameter: `placements`, and with FSDP dim 0 sharded on
// the dp dim as well, innermost (FSDP2's strided sharding with tp): so the
// all-gather on dp alone rebuilds the tp shard, and the gradient's
// reduce-scatter on dp alone shards it again.
absl::StatusOr<Sharding> ParameterSharding(std::vector<Placement> placements,
                                           int64_t tensor_rank,
                                           std::optional<int64_t> fsdp_dim) {
  if (fsdp_dim) placements[*fsdp_dim] = Placement::Replicate();
  DT_ASSIGN_OR_RETURN(Sharding sharding,
                      Sharding::FromPlacements(placements, tensor_rank));
  if (fsdp_dim && tensor_rank > 0) {
    sharding = sharding.WithShardsAppended({*fsdp_dim}, 0);
  }
  return sharding;
}

// The sharding of every parameter with a value (PlanResolution::parameters).
absl::StatusOr<std::vector<ResolvedParameter>> ParameterShardings(
    const PlanBinding& binding, std::optional<int64_t> tp,
    std::optional<int64_t> dp, bool fsdp) {
  std::vector<ResolvedParameter> parameters;
  for (size_t i = 0; i < binding.modules().size(); ++i) {
    const nn::NamedModule& named = binding.modules()[i];
    for (nn::TensorSlot& slot : named.module->slots()) {
      if (!slot.is_parameter || !slot.value.defined()) continue;
      std::vector<Placement> placements = slot.value.placements();
      const ParallelStyle* style = binding.PlacingStyle(i, slot.name);
      std::optional<Placement> placement;
      if (style != nullptr) {
        placement = style->ParameterPlacement(*named.module, slot.name);
      }
      if (placement) placements[*tp] = *placement;
      if (dp) placements[*dp] = Placement::Replicate();
      DT_ASSIGN_OR_RETURN(
          Sharding sharding,
          ParameterSharding(std::move(placements),
                            static_cast<int64_t>(slot.shape.size()),
                            fsdp ? dp : std::nullopt));
      parameters.push_back(
          {SlotName(named.name, slot.name), &slot, std::move(sharding)});
    }
  }
  return parameters;
}

bool OwnsParameters(const nn::Module& module) {
  for (const nn::TensorSlot& slot : module.slots()) {
    if (slot.is_parameter) return true;
  }
  return false;
}

// Whether module `name` is `ancestor` or inside it.
bool IsWithin(absl::string_view name, absl::string_view ancestor) {
  return ancestor.empty() || name == ancestor ||
         absl::StartsWith(name, absl::StrCat(ancestor, "."));
}

// The FSDP groups of the tree `named` (pre-order) for the fsdp_groups
// `patterns` (PlanResolution::fsdp_groups).
// Errors: a pattern that names no module.
absl::StatusOr<std::vector<FsdpGroup>> FsdpGroupsOf(
    const std::vector<nn::NamedModule>& named,
    const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    const bool names_one =
        std::any_of(named.begin(), named.end(), [&](const nn::NamedModule& m) {
          return MatchPattern(pattern, m.name);
        });
    if (!names_one) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan: fsdp_groups pattern \"", pattern, "\" names no module"));
    }
  }
  std::vector<FsdpGroup> groups;
  // The groups whose module encloses the current one, innermost last.
  std::vector<size_t> enclosing;
  for (const nn::NamedModule& m : named) {
    while (!enclosing.empty() &&
           !IsWithin(m.name, groups[enclosing.back()].name)) {
      enclosing.pop_back();
    }
    const bool is_group = std::any_of(patterns.begin(), patterns.end(),
                                      [&](const std::string& pattern) {
                                        return MatchPattern(pattern, m.name);
                                      });
    if (is_group) {
      enclosing.push_back(groups.size());
      groups.push_back({m.name, m.module, {}});
    }
    if (!OwnsParameters(*m.module)) continue;
    if (enclosing.empty()) {
      groups.push_back({m.name, m.module, {m.module}});
    } else {
      groups[enclosing.back()].members.push_back(m.module);
    }
  }
  return groups;
}

}  // namespace

bool MatchPattern(absl::string_view pattern, absl::string_view fqn) {
  std::vector<absl::string_view> want = absl::StrSplit(pattern, '.');
  std::vector<absl::string_view> have = absl::StrSplit(fqn, '.');
  if (want.size() != have.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != "*" && want[i] != have[i]) return false;
  }
  return true;
}

absl::StatusOr<PlanResolution> ResolvePlan(const Plan& plan, nn::Module& root,
                                           const DeviceMesh& mesh) {
  PlanResolution resolution;
  DT_RETURN_IF_ERROR(CheckMeshFitsWorld(root, mesh));
  if (!plan.tp.empty()) {
    DT_ASSIGN_OR_RETURN(resolution.tp_dim,
                        PlanDim(mesh, "tp_dim", plan.tp_dim));
  }
  if (plan.dp != DataParallel::kNone) {
    DT_ASSIGN_OR_RETURN(resolution.dp_dim,
                        PlanDim(mesh, "dp_dim", plan.dp_dim));
  }
  PlanBinding binding(root.NamedModules());
  DT_RETURN_IF_ERROR(BindEntries(plan, binding));
  resolution.entries = binding.Resolved();
  // The hooks before the shardings: a bad sharding option is reported
  // before what its parameters' shardings would say.
  for (ResolvedEntry& r : resolution.entries) {
    // A parameter key places its parameter alone.
    if (!r.parameter.empty()) continue;
    DT_ASSIGN_OR_RETURN(r.hooks, r.style->Hooks(*r.module, r.fqn));
  }
  const bool fsdp = plan.dp == DataParallel::kFsdp;
  DT_ASSIGN_OR_RETURN(
      resolution.parameters,
      ParameterShardings(binding, resolution.tp_dim, resolution.dp_dim, fsdp));
  if (fsdp) {
    DT_ASSIGN_OR_RETURN(resolution.fsdp_groups,
                        FsdpGroupsOf(binding.modules(), plan.fsdp_groups));
    resolution.fsdp = FsdpOptions{*resolution.dp_dim, plan.fsdp_prefetch};
  }
  return resolution;
}

}  // namespace parallel
}  // namespace dtensor
