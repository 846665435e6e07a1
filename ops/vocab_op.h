#ifndef DTENSOR_OPS_VOCAB_OP_H_
#define DTENSOR_OPS_VOCAB_OP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/nn_functional.h"

// What the files of the vocabulary family share (dtensor/ops/vocab_ops.h):
// vocab_ops.cc (cross_entropy and its LossParallelScope variant) and
// vocab_backward_ops.cc (cross_entropy_backward, the fused gradient).
namespace dtensor {
namespace ops {

// The arguments of every cross-entropy op; reduction is a Reduction's integer
// value (1 mean).
inline constexpr ArgSpec kCrossEntropyArgs[] = {
    {"reduction", ArgKind::kInt, "1"}, {"ignore_index", ArgKind::kInt, "-100"}};
inline constexpr auto kReduction =
    KeyOf<ArgKind::kInt>(kCrossEntropyArgs, "reduction");
inline constexpr auto kIgnoreIndex =
    KeyOf<ArgKind::kInt>(kCrossEntropyArgs, "ignore_index");

inline Reduction ReductionOf(const OpArgs& args) {
  return static_cast<Reduction>(args.Get(kReduction));
}

// cross_entropy's outputs (loss, count, log_sum_exp) for `logits` and
// `target` (inputs[0], inputs[1]); errors name `op`.
// Errors: a non-floating logits dtype, a non-integer target, shapes that are
// not [d0, ..., dk, C] and [d0, ..., dk], a reduction not in 0..2.
absl::StatusOr<std::vector<TensorMeta>> CrossEntropyMetas(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args);

// The OpDef of cross_entropy_backward (vocab_backward_ops.cc), part of
// VocabOps().
const OpDef& CrossEntropyBackwardDef();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_VOCAB_OP_H_
