#ifndef DTENSOR_COLLECTIVES_INPROCESS_VIEW_COPY_H_
#define DTENSOR_COLLECTIVES_INPROCESS_VIEW_COPY_H_

#include "absl/status/status.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Copies the elements of view `src` into view `dst` (same shape and dtype,
// CPU): one memcpy when both are contiguous, a strided copy otherwise. This
// is how a rank reads a peer's tensor in place.
absl::Status CopyView(const Tensor& dst, const Tensor& src);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_INPROCESS_VIEW_COPY_H_
