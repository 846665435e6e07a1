#ifndef DTENSOR_COLLECTIVES_CALL_CHECKS_H_
#define DTENSOR_COLLECTIVES_CALL_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "dtensor/collectives/call_signature.h"
#include "dtensor/collectives/collective_call.h"
#include "dtensor/tensor/device.h"

namespace dtensor {

// Where a call is checked: group rank `rank` of a group of `size`, whose
// tensors live on `device`.
struct CallSite {
  int64_t rank;
  int64_t size;
  Device device;
};

// Checks `args` against what this rank alone knows and normalizes them in
// place (collective_call.h says how): tensors on the device (undefined only
// where the contract allows it), dtypes that agree, valid dims, roots and
// pairs, complete piece sizes that add up, outputs of the shapes the
// arguments imply, no overlap of input and output. What only the peers know
// (their shapes, their sizes) is left to the backend.
// Errors: InvalidArgument starting with the op ("all_gather: ...") and
// naming the bad value.
absl::Status CheckCollectiveArgs(CollectiveArgs& args, const CallSite& site);

// The debug-mode signature of checked `args`, the call numbered `sequence`
// (-1: not numbered).
CallSignature SignCollectiveArgs(const CollectiveArgs& args, int64_t sequence);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_CALL_CHECKS_H_
