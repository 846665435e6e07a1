#ifndef DTENSOR_NN_STATE_DICT_H_
#define DTENSOR_NN_STATE_DICT_H_

#include <string>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// Fully-qualified name -> DTensor, ordered by name.
using StateDict = absl::btree_map<std::string, DTensor>;

// Every parameter and buffer of the tree `root` by fully-qualified name
// (relative to `root`). The DTensors share storage with the module's; nothing
// is copied.
// Errors: a slot without a value (naming the first).
absl::StatusOr<StateDict> GetStateDict(Module& root);

struct LoadOptions {
  // Whether keys missing from the state dict and keys the tree lacks are
  // errors (otherwise they are ignored).
  bool strict = true;
};

// Sets the parameters and buffers of `root` from `state`. A slot that has a
// value keeps its sharding and dtype: the loaded DTensor, on the slot's mesh,
// is redistributed to the slot's sharding and converted to its dtype. A slot
// without a value takes the loaded DTensor as it is.
// Requires: every rank of the mesh calls it (as for any redistribution).
//
// Errors, all named in one message: keys of the tree missing from `state`
// and keys of `state` the tree lacks (when strict), wrong global shapes,
// undefined DTensors, DTensors on another mesh than their slot's, failed
// redistributions. On error no slot changes.
absl::Status LoadStateDict(Module& root, const StateDict& state,
                           const LoadOptions& options = {});

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_STATE_DICT_H_
