#ifndef DTENSOR_PARALLEL_MIXED_PRECISION_POLICY_H_
#define DTENSOR_PARALLEL_MIXED_PRECISION_POLICY_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/json_value.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {
namespace parallel {

// A mixed-precision policy, as FSDP2's MixedPrecisionPolicy: the parameters
// stay in their own dtype (f32: the master weights, which the optimizer
// updates and whose dtype its state takes), and
// - param_dtype: each step casts them to this dtype before use (FSDP casts
//   its shard, then all-gathers the cast copy), so forward and backward
//   compute in it; their gradients flow back through the cast to the
//   masters, in the masters' dtype;
// - reduce_dtype: the data-parallel gradient all-reduces and FSDP's
//   reduce-scatters run in this dtype (the gradients cast to it before and
//   back after); default the masters' dtype;
// - output_dtype: the root module's output (the logits) is cast to it, so
//   that the loss is computed in it; default as computed.
// A floating input of a module that owns parameters is cast to param_dtype
// (FSDP2's cast_forward_inputs). Unset fields leave that part alone.
// dtensor/parallel/mixed_precision.h installs a policy; a plan carries one
// (Plan::mixed_precision, plan key "mixed_precision").
struct MixedPrecisionPolicy {
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;
  std::optional<DType> output_dtype;
};

// torchtitan's policy: parameters gathered and computed in `param_dtype`,
// gradients reduced and the loss computed in f32 (reduce_dtype and
// output_dtype f32). `train_llama --mixed-precision bf16` trains with it.
MixedPrecisionPolicy ComputeIn(DType param_dtype);

// The dtype `name` ("f32" or "bf16") for the policy field `field` (named in
// errors). f16 needs loss scaling, which dtensor does not have.
// Errors: any other name (InvalidArgument naming the field and the value).
absl::StatusOr<DType> ParseMixedPrecisionDType(absl::string_view field,
                                               absl::string_view name);

// Errors: a field set to a dtype other than f32 and bf16 (InvalidArgument
// naming the field and the dtype).
absl::Status CheckMixedPrecisionPolicy(const MixedPrecisionPolicy& policy);

// The plan object {"param_dtype": "bf16", "reduce_dtype": "f32",
// "output_dtype": "f32"} (every key optional).
// Errors: not an object, unknown keys, values that are not strings or not
// f32/bf16 (InvalidArgument naming the key and the value).
absl::StatusOr<MixedPrecisionPolicy> ParseMixedPrecisionPolicy(
    const JsonValue& value);

// "param_dtype=bf16 reduce_dtype=f32" (set fields only; "none" when none).
std::string MixedPrecisionToString(const MixedPrecisionPolicy& policy);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_MIXED_PRECISION_POLICY_H_
