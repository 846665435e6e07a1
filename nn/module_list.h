#ifndef DTENSOR_NN_MODULE_LIST_H_
#define DTENSOR_NN_MODULE_LIST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// A list of modules named "0", "1", ... (so a Transformer's blocks are
// "layers.0", "layers.1", ...). Forward applies them in order, each to the
// previous one's output; an empty list returns its input.
class ModuleList : public Module {
 public:
  ModuleList() = default;

  absl::string_view type_name() const override { return "ModuleList"; }

  // Appends `module` under the name of its index and returns it.
  template <typename M>
  absl::StatusOr<M*> Append(std::unique_ptr<M> module) {
    return AddModule(std::to_string(size()), std::move(module));
  }
  int64_t size() const { return static_cast<int64_t>(children().size()); }
  // Requires: 0 <= index < size() (DT_DCHECK).
  Module& at(int64_t index) const {
    DT_DCHECK(index >= 0 && index < size());
    return *children()[index].module;
  }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& input) override;
};

// PyTorch's nn.Sequential: a ModuleList built in one call, its children named
// "0", "1", ... (so a plan names them "0", "2", or "*"):
//
//   DT_ASSIGN_OR_RETURN(
//       std::unique_ptr<nn::Sequential> mlp,
//       nn::Sequential::Of(nn::Linear::Create(16, 64),
//                          std::make_unique<nn::ReLU>(),
//                          nn::Linear::Create(64, 16)));
class Sequential : public ModuleList {
 public:
  absl::string_view type_name() const override { return "Sequential"; }

  // The chain of `modules`, each a std::unique_ptr<M> or an
  // absl::StatusOr<std::unique_ptr<M>> (what a module's Create returns) for
  // a Module type M. Errors: the first argument that holds an error, or a
  // null module (naming its index).
  template <typename... Args>
  static absl::StatusOr<std::unique_ptr<Sequential>> Of(Args&&... modules) {
    auto chain = std::make_unique<Sequential>();
    absl::Status status;
    (chain->AppendArgument(status, std::forward<Args>(modules)), ...);
    if (!status.ok()) return status;
    return chain;
  }

 private:
  template <typename M>
  void AppendArgument(absl::Status& status, std::unique_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "Sequential holds Modules");
    if (!status.ok()) return;
    if (module == nullptr) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "Sequential::Of: module ", size(), " is null"));
      return;
    }
    status = Append(std::move(module)).status();
  }
  template <typename M>
  void AppendArgument(absl::Status& status,
                      absl::StatusOr<std::unique_ptr<M>> module) {
    if (!status.ok()) return;
    if (!module.ok()) {
      status = absl::Status(module.status().code(),
                            absl::StrCat("Sequential::Of: module ", size(),
                                         ": ", module.status().message()));
      return;
    }
    AppendArgument(status, *std::move(module));
  }
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_MODULE_LIST_H_
