#include "dtensor/nn/ring_attention.h"

#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/function.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/tensor/attention.h"

namespace dtensor {
namespace nn {
namespace {

// The options as recorded arguments.
constexpr ArgSpec kRingArgs[] = {{"mesh_dim", ArgKind::kInt, "0"},
                                 {"order", ArgKind::kInt, "1"},
                                 {"causal", ArgKind::kBool, "false"},
                                 {"scale", ArgKind::kDouble, "0"}};
constexpr auto kMeshDim = KeyOf<ArgKind::kInt>(kRingArgs, "mesh_dim");
constexpr auto kOrder = KeyOf<ArgKind::kInt>(kRingArgs, "order");
constexpr auto kCausal = KeyOf<ArgKind::kBool>(kRingArgs, "causal");
constexpr auto kScale = KeyOf<ArgKind::kDouble>(kRingArgs, "scale");

OpArgs ArgsOf(const ops::RingAttentionOptions& options) {
  OpArgs args;
  args.AddInt(options.mesh_dim)
      .AddInt(static_cast<int64_t>(options.order))
      .AddBool(options.causal)
      .AddDouble(options.scale);
  return args;
}

ops::RingAttentionOptions OptionsOf(const OpArgs& args) {
  return {args.Get(kMeshDim), static_cast<ops::SequenceOrder>(args.Get(kOrder)),
          args.Get(kCausal), args.Get(kScale)};
}

// Recorded outputs: the attention's out and this rank's log-sum-exps (a
// DTensor laid out like out's rows), which the backward reads.
absl::StatusOr<std::vector<DTensor>> RingBackward(const BackwardCall& call) {
  return ops::RingAttentionBackward(
      call.inputs[0], call.inputs[1], call.inputs[2], call.outputs[0],
      call.outputs[1].ToLocal(), call.grad_outputs[0], OptionsOf(call.args));
}

const Function& RingFunction() {
  static const Function function{"ring_attention", RingBackward};
  return function;
}

}  // namespace

absl::StatusOr<DTensor> RingAttention(
    const DTensor& q, const DTensor& k, const DTensor& v,
    const ops::RingAttentionOptions& options) {
  DT_ASSIGN_OR_RETURN(ops::RingAttentionResult result,
                      ops::RingAttention(q, k, v, options));
  Shape lse_shape = result.out.shape();
  lse_shape.pop_back();
  DTensor lse;
  if (q.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(const DTensorSpec spec,
                        DTensorSpec::Create(q.mesh(), q.placements(), lse_shape,
                                            AttentionLseDType(q.dtype())));
    DT_ASSIGN_OR_RETURN(lse, DTensor::FromSpec(q.runtime(), spec));
  } else {
    FromLocalOptions lse_layout;
    lse_layout.global_shape = lse_shape;
    DT_ASSIGN_OR_RETURN(
        lse, DTensor::FromLocal(q.runtime(), std::move(result.lse), q.mesh(),
                                q.placements(), lse_layout));
  }
  const DTensor* inputs[] = {&q, &k, &v};
  const DTensor outputs[] = {result.out, lse};
  GradientTape::RecordFunction(RingFunction(), inputs, ArgsOf(options),
                               outputs);
  return std::move(result.out);
}

}  // namespace nn
}  // namespace dtensor
