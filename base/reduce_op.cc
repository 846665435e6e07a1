#include "dtensor/base/reduce_op.h"

#include "dtensor/base/enum_names.h"

namespace dtensor {

constexpr EnumNames<ReduceOp, ReduceOp::kMin> kReduceOpNames("sum", "avg",
                                                             "max", "min");

absl::string_view ReduceOpName(ReduceOp op) { return kReduceOpNames.Name(op); }

std::ostream& operator<<(std::ostream& os, ReduceOp op) {
  return os << ReduceOpName(op);
}

}  // namespace dtensor
