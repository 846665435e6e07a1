#ifndef DTENSOR_NN_LAYER_CHECKS_H_
#define DTENSOR_NN_LAYER_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"

namespace dtensor {
namespace nn {

// Checks of the arguments layers are built and called with.
// Errors: InvalidArgument naming the layer, the argument and its value.

// `value` >= 1.
absl::Status CheckPositive(absl::string_view layer, absl::string_view name,
                           int64_t value);

// `x` has `rank` dims and its last dim is `last` (the feature size).
absl::Status CheckInput(absl::string_view layer, const DTensor& x, int64_t rank,
                        int64_t last);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_LAYER_CHECKS_H_
