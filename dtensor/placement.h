#ifndef DTENSOR_DTENSOR_PLACEMENT_H_
#define DTENSOR_DTENSOR_PLACEMENT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "dtensor/base/reduce_op.h"

namespace dtensor {

// The terms of a Partial placement combine by a ReduceOp (dtensor/base/
// reduce_op.h), the same op the collectives reduce with.

// Inverse of ReduceOpName; an error names the unknown string.
absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name);

// What one mesh dim does to a tensor:
//   Shard(d)    tensor dim d is split across the mesh dim (torch.chunk rule);
//   Replicate   every rank along the mesh dim holds the same values;
//   Partial(op) every rank holds a term; the value is the op-reduction of the
//               terms over the mesh dim.
// A small value type; fields irrelevant to the kind are fixed, so equality is
// plain field equality. Shard dims may be negative until normalised against a
// tensor rank (NormalizePlacement).
class Placement {
 public:
  enum class Kind : uint8_t { kReplicate, kShard, kPartial };

  // Replicate.
  Placement() = default;

  static Placement Shard(int64_t dim) {
    return Placement(Kind::kShard, dim, ReduceOp::kSum);
  }
  static Placement Replicate() { return Placement(); }
  static Placement Partial(ReduceOp op = ReduceOp::kSum) {
    return Placement(Kind::kPartial, 0, op);
  }

  Kind kind() const { return kind_; }
  bool is_shard() const { return kind_ == Kind::kShard; }
  bool is_replicate() const { return kind_ == Kind::kReplicate; }
  bool is_partial() const { return kind_ == Kind::kPartial; }
  // The sharded tensor dim; 0 unless is_shard().
  int64_t dim() const { return dim_; }
  // The reduction of a Partial; kSum unless is_partial().
  ReduceOp reduce_op() const { return op_; }

  // "S(0)", "R", "P(sum)".
  std::string ToString() const;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.kind_ == b.kind_ && a.dim_ == b.dim_ && a.op_ == b.op_;
  }
  friend bool operator!=(const Placement& a, const Placement& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Placement& p) {
    return H::combine(std::move(h), p.kind_, p.dim_, p.op_);
  }

 private:
  Placement(Kind kind, int64_t dim, ReduceOp op)
      : kind_(kind), op_(op), dim_(dim) {}

  Kind kind_ = Kind::kReplicate;
  ReduceOp op_ = ReduceOp::kSum;
  int64_t dim_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Placement& placement);

// Parses one placement: "R", "S(d)" (d an integer, possibly negative), "P"
// (= "P(sum)") or "P(op)". Surrounding whitespace is ignored. An error names
// the text.
absl::StatusOr<Placement> ParsePlacement(std::string_view text);

// `placement` with a negative Shard dim counted from the end of a tensor of
// rank `tensor_rank`; non-shard placements unchanged. An error names the dim
// when it is outside [-tensor_rank, tensor_rank).
absl::StatusOr<Placement> NormalizePlacement(Placement placement,
                                             int64_t tensor_rank);

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_PLACEMENT_H_
