#ifndef DTENSOR_BASE_REDUCE_OP_H_
#define DTENSOR_BASE_REDUCE_OP_H_

#include <ostream>

#include "absl/strings/string_view.h"

namespace dtensor {

// How all_reduce and reduce_scatter combine the ranks' values, elementwise.
// kAvg is the sum divided by the group size and needs a floating dtype. On
// kBool, kSum and kMax are logical or, kMin is logical and. kMax and kMin
// propagate NaN.
enum class ReduceOp { kSum, kAvg, kMax, kMin };

// "sum", "avg", "max", "min".
absl::string_view ReduceOpName(ReduceOp op);

std::ostream& operator<<(std::ostream& os, ReduceOp op);

}  // namespace dtensor

#endif  // DTENSOR_BASE_REDUCE_OP_H_
