#include "dtensor/collectives/reduce_op.h"

namespace dtensor {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) {
  return os << ReduceOpName(op);
}

}  // namespace dtensor
