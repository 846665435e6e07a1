#ifndef DTENSOR_NN_MODULE_LIST_H_
#define DTENSOR_NN_MODULE_LIST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
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

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_MODULE_LIST_H_
