#include "dtensor/parallel/mixed_precision.h"

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/ops/cast_ops.h"

namespace dtensor {
namespace parallel {
namespace {

// `x` in `dtype` when it is floating and in another dtype; else `x`.
absl::StatusOr<DTensor> CastFloating(const DTensor& x, DType dtype) {
  if (!x.defined() || !IsFloatingPoint(x.dtype()) || x.dtype() == dtype) {
    return x;
  }
  return ops::To(x, dtype);
}

// One module's casts: the masters of the slots it replaced in the running
// call, restored when the call returns.
class ModuleCasts {
 public:
  ModuleCasts(nn::Module* module, DType param_dtype)
      : module_(module), param_dtype_(param_dtype) {}

  // The input hook: casts the parameter slots and the input.
  absl::StatusOr<DTensor> Enter(const DTensor& input) {
    absl::Span<nn::TensorSlot> slots = module_->slots();
    for (size_t i = 0; i < slots.size(); ++i) {
      DTensor& value = slots[i].value;
      if (!slots[i].is_parameter || !value.defined() ||
          !IsFloatingPoint(value.dtype()) || value.dtype() == param_dtype_) {
        continue;  // FSDP's gathered copies are already in param_dtype.
      }
      DT_ASSIGN_OR_RETURN(DTensor cast, ops::To(value, param_dtype_));
      masters_.emplace_back(i, std::exchange(value, std::move(cast)));
    }
    return CastFloating(input, param_dtype_);
  }
  // The exit hook: the masters back in their slots.
  void Exit() {
    absl::Span<nn::TensorSlot> slots = module_->slots();
    for (auto& [index, master] : masters_) {
      slots[index].value = std::move(master);
    }
    masters_.clear();
  }

 private:
  nn::Module* module_;
  DType param_dtype_;
  std::vector<std::pair<size_t, DTensor>> masters_;
};

bool OwnsParameters(const nn::Module& module) {
  for (const nn::TensorSlot& slot : module.slots()) {
    if (slot.is_parameter) return true;
  }
  return false;
}

}  // namespace

absl::Status AddMixedPrecisionHooks(nn::Module& root,
                                    const MixedPrecisionPolicy& policy) {
  DT_RETURN_IF_ERROR(CheckMixedPrecisionPolicy(policy));
  if (policy.param_dtype.has_value()) {
    for (const nn::NamedModule& named : root.NamedModules()) {
      if (!OwnsParameters(*named.module)) continue;
      auto casts =
          std::make_shared<ModuleCasts>(named.module, *policy.param_dtype);
      named.module->AddInputHook(
          [casts](const DTensor& x) { return casts->Enter(x); });
      named.module->AddExitHook([casts] { casts->Exit(); });
    }
  }
  if (policy.output_dtype.has_value()) {
    root.AddOutputHook([dtype = *policy.output_dtype](const DTensor& y) {
      return CastFloating(y, dtype);
    });
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
