#include "dtensor/nn/module.h"

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_owner.h"

namespace dtensor {
namespace nn {
namespace {

std::string Join(const std::string& prefix, absl::string_view name) {
  return prefix.empty() ? std::string(name) : absl::StrCat(prefix, ".", name);
}

}  // namespace

absl::StatusOr<DTensor> Module::operator()(const DTensor& input) {
  // The hooks' and Forward's collectives are this module's (innermost wins).
  CommOwner::Scope owner(this);
  absl::Cleanup run_exit_hooks = [this] {
    for (const ExitHook& hook : exit_hooks_) hook();
  };
  DTensor x = input;
  for (const Hook& hook : input_hooks_) {
    DT_ASSIGN_OR_RETURN(x, hook(x));
  }
  DT_ASSIGN_OR_RETURN(DTensor y, around_ ? around_(*this, x) : Forward(x));
  for (const Hook& hook : output_hooks_) {
    DT_ASSIGN_OR_RETURN(y, hook(y));
  }
  return y;
}

void Module::ClearHooks() {
  input_hooks_.clear();
  output_hooks_.clear();
  exit_hooks_.clear();
}

void Module::SetTraining(bool training) {
  training_ = training;
  for (Child& child : children_) child.module->SetTraining(training);
}

std::vector<NamedModule> Module::NamedModules() {
  std::vector<NamedModule> out;
  CollectModules("", out);
  return out;
}

std::vector<NamedSlot> Module::NamedParameters() {
  std::vector<NamedSlot> out;
  CollectSlots("", /*parameters=*/true, /*buffers=*/false, out);
  return out;
}

std::vector<NamedSlot> Module::NamedBuffers() {
  std::vector<NamedSlot> out;
  CollectSlots("", /*parameters=*/false, /*buffers=*/true, out);
  return out;
}

std::vector<NamedSlot> Module::NamedSlots() {
  std::vector<NamedSlot> out;
  CollectSlots("", /*parameters=*/true, /*buffers=*/true, out);
  return out;
}

int64_t Module::NumParameters() const {
  int64_t total = 0;
  for (const TensorSlot& slot : slots_) {
    if (slot.is_parameter) total += NumElements(slot.shape);
  }
  for (const Child& child : children_) total += child.module->NumParameters();
  return total;
}

absl::StatusOr<Module*> Module::Submodule(absl::string_view fqn) {
  Module* module = this;
  if (fqn.empty()) return module;
  std::string path;
  for (absl::string_view part : absl::StrSplit(fqn, '.')) {
    path = Join(path, part);
    Module* next = nullptr;
    for (Child& child : module->children_) {
      if (child.name == part) next = child.module.get();
    }
    if (next == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no module \"", path, "\" (looking for \"", fqn, "\")"));
    }
    module = next;
  }
  return module;
}

absl::StatusOr<TensorSlot*> Module::FindSlot(absl::string_view fqn) {
  const size_t dot = fqn.rfind('.');
  const absl::string_view owner =
      dot == absl::string_view::npos ? "" : fqn.substr(0, dot);
  const absl::string_view name =
      dot == absl::string_view::npos ? fqn : fqn.substr(dot + 1);
  absl::StatusOr<Module*> module = Submodule(owner);
  if (module.ok()) {
    for (TensorSlot& slot : (*module)->slots_) {
      if (slot.name == name) return &slot;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no parameter or buffer \"", fqn, "\""));
}

absl::Status Module::SetSlot(absl::string_view fqn, DTensor value) {
  DT_ASSIGN_OR_RETURN(TensorSlot * slot, FindSlot(fqn));
  if (!value.defined() || value.shape() != slot->shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", fqn, "\" has shape ", ShapeToString(slot->shape), ", got ",
        value.defined() ? ShapeToString(value.shape())
                        : "an undefined DTensor"));
  }
  slot->value = std::move(value);
  return absl::OkStatus();
}

std::string Module::ToString() const {
  std::string out;
  AppendTree("", 0, out);
  return out;
}

absl::Status Module::CheckNewName(absl::string_view name) const {
  if (name.empty() || name.find('.') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        type_name(), ": name \"", name, "\" is empty or contains '.'"));
  }
  bool taken = false;
  for (const TensorSlot& slot : slots_) taken |= slot.name == name;
  for (const Child& child : children_) taken |= child.name == name;
  if (taken) {
    return absl::InvalidArgumentError(
        absl::StrCat(type_name(), ": name \"", name, "\" is already taken"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Module::AddParameter(std::string name, Shape shape,
                                         Initializer init) {
  return AddSlot(std::move(name), std::move(shape), init,
                 /*is_parameter=*/true);
}

absl::StatusOr<int> Module::AddBuffer(std::string name, Shape shape,
                                      Initializer init) {
  return AddSlot(std::move(name), std::move(shape), init,
                 /*is_parameter=*/false);
}

absl::StatusOr<int> Module::AddSlot(std::string name, Shape shape,
                                    Initializer init, bool is_parameter) {
  DT_RETURN_IF_ERROR(CheckNewName(name));
  for (int64_t size : shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(type_name(), ": \"", name, "\" has a negative size in ",
                       ShapeToString(shape)));
    }
  }
  DT_RETURN_IF_ERROR(init.Validate());
  TensorSlot slot;
  slot.name = std::move(name);
  slot.shape = std::move(shape);
  slot.init = init;
  slot.is_parameter = is_parameter;
  slots_.push_back(std::move(slot));
  return static_cast<int>(slots_.size()) - 1;
}

absl::Status Module::AddChild(std::string name,
                              std::unique_ptr<Module> module) {
  if (module == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(type_name(), ": child \"", name, "\" is null"));
  }
  DT_RETURN_IF_ERROR(CheckNewName(name));
  module->SetTraining(training_);
  children_.push_back({std::move(name), std::move(module)});
  return absl::OkStatus();
}

void Module::CollectModules(const std::string& prefix,
                            std::vector<NamedModule>& out) {
  out.push_back({prefix, this});
  for (Child& child : children_) {
    child.module->CollectModules(Join(prefix, child.name), out);
  }
}

void Module::CollectSlots(const std::string& prefix, bool parameters,
                          bool buffers, std::vector<NamedSlot>& out) {
  for (TensorSlot& slot : slots_) {
    if (slot.is_parameter ? parameters : buffers) {
      out.push_back({Join(prefix, slot.name), &slot});
    }
  }
  for (Child& child : children_) {
    child.module->CollectSlots(Join(prefix, child.name), parameters, buffers,
                               out);
  }
}

void Module::AppendTree(const std::string& name, int indent,
                        std::string& out) const {
  const std::string pad(indent, ' ');
  const std::string extra = ExtraRepr();
  absl::StrAppend(&out, pad, name.empty() ? "" : absl::StrCat("(", name, "): "),
                  type_name(), "(");
  if (children_.empty()) {
    absl::StrAppend(&out, extra, ")\n");
    return;
  }
  absl::StrAppend(&out, "\n");
  if (!extra.empty()) absl::StrAppend(&out, pad, "  ", extra, "\n");
  for (const Child& child : children_) {
    child.module->AppendTree(child.name, indent + 2, out);
  }
  absl::StrAppend(&out, pad, ")\n");
}

}  // namespace nn
}  // namespace dtensor
