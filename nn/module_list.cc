#include "dtensor/nn/module_list.h"

#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace nn {

absl::StatusOr<DTensor> ModuleList::Forward(const DTensor& input) {
  DTensor x = input;
  for (const Child& child : children()) {
    DT_ASSIGN_OR_RETURN(x, (*child.module)(x));
  }
  return x;
}

}  // namespace nn
}  // namespace dtensor
