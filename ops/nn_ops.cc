#include "dtensor/ops/nn_ops.h"

#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/tensor/nn_functional.h"

namespace dtensor {
namespace ops {
namespace {

absl::StatusOr<DTensor> Call(const OpDef& op,
                             std::initializer_list<const DTensor*> in,
                             const OpArgs& args) {
  return DispatchOne(op, absl::MakeConstSpan(in.begin(), in.size()), args);
}

// ---- softmax, log_softmax. ----

constexpr ArgSpec kSoftmaxArgs[] = {{"dim", ArgKind::kInt}};
constexpr auto kSoftmaxDim = KeyOf<ArgKind::kInt>(kSoftmaxArgs, "dim");

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - e^y sum(g), the
// sums along dim.
absl::StatusOr<InputGrads> SoftmaxBackward(bool log, const BackwardCall& call) {
  const DTensor& y = call.outputs[0];
  const DTensor& g = call.grad_outputs[0];
  const int64_t dims[] = {call.args.Get(kSoftmaxDim)};
  DTensor dx;
  if (log) {
    DT_ASSIGN_OR_RETURN(DTensor total, Sum(g, dims, /*keepdim=*/true));
    DT_ASSIGN_OR_RETURN(DTensor p, Exp(y));
    DT_ASSIGN_OR_RETURN(DTensor spread, Mul(p, total));
    DT_ASSIGN_OR_RETURN(dx, Sub(g, spread));
  } else {
    DT_ASSIGN_OR_RETURN(DTensor gy, Mul(g, y));
    DT_ASSIGN_OR_RETURN(DTensor total, Sum(gy, dims, /*keepdim=*/true));
    DT_ASSIGN_OR_RETURN(DTensor centered, Sub(g, total));
    DT_ASSIGN_OR_RETURN(dx, Mul(y, centered));
  }
  return InputGrads{std::move(dx)};
}

// softmax, or with `log` log_softmax.
OpDef MakeSoftmax(bool log) {
  const absl::string_view name = log ? "log_softmax" : "softmax";
  const absl::string_view summary =
      log ? "log of softmax along dim" : "softmax along dim";
  LocalFn fn = [log](absl::Span<const Tensor> in, const OpArgs& args) {
    return log ? dtensor::LogSoftmax(in[0], args.Get(kSoftmaxDim))
               : dtensor::Softmax(in[0], args.Get(kSoftmaxDim));
  };
  OpDef def = NamedOpDef(name, summary, kSoftmaxArgs);
  def.infer = SameShapeInfer(name, fn);
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    std::vector<int> loops;
    if (rank > 0) {
      // The probe in infer has checked the dim.
      const int64_t dim = *NormalizeDim(ctx.args.Get(kSoftmaxDim), rank);
      loops = IdentityLoops(rank, {dim});
    }
    spec.loops = {{loops}, {loops}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  def.backward = [log](const BackwardCall& call) {
    return SoftmaxBackward(log, call);
  };
  return def;
}

// ---- rotary_embedding. ----

// `inverse` rotates by minus the angles (the gradient's rotation).
constexpr ArgSpec kRotaryArgs[] = {{"theta", ArgKind::kScalar, "10000"},
                                   {"inverse", ArgKind::kBool, "false"}};
constexpr auto kTheta = KeyOf<ArgKind::kScalar>(kRotaryArgs, "theta");
constexpr auto kInverse = KeyOf<ArgKind::kBool>(kRotaryArgs, "inverse");

// The tensor layer's checks, which a probe of size-1 dims cannot run (an odd
// head_dim of 1).
absl::Status CheckRotary(absl::string_view op,
                         absl::Span<const DTensorSpec* const> inputs,
                         const OpArgs& args) {
  const DTensorSpec& x = *inputs[0];
  if (!IsFloatingPoint(x.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x must have a floating dtype, got ",
                     std::string(DTypeName(x.dtype()))));
  }
  if (x.ndim() < 3 || x.shape().back() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op,
        ": x must be [..., seq, heads, head_dim] with an even head_dim, "
        "got shape ",
        ShapeToString(x.shape())));
  }
  if (!(args.Get(kTheta) > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": theta must be positive, got ", args.Get(kTheta)));
  }
  const DTensorSpec* positions = inputs[1];
  if (positions == nullptr) return absl::OkStatus();
  const int64_t seq = x.shape()[x.ndim() - 3];
  if (positions->shape() != Shape{seq}) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": positions ", ShapeToString(positions->shape()),
                     " must be [seq] for x ", ShapeToString(x.shape())));
  }
  if (positions->dtype() != DType::kI32 && positions->dtype() != DType::kI64) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": positions must be i32 or i64, got ",
                     std::string(DTypeName(positions->dtype()))));
  }
  return absl::OkStatus();
}

// Without positions, the rows' global positions are first, first + 1, ...:
// the tensor layer's cached angle tables on x's device serve them (no host
// work in a training step). Explicit positions are read on the host.
absl::StatusOr<OpLocals> RotaryKernel(const KernelContext& ctx,
                                      absl::Span<const Tensor> inputs) {
  const double theta = ctx.args().Get(kTheta);
  const bool inverse = ctx.args().Get(kInverse);
  const Tensor& x = inputs[0];
  Tensor out;
  if (!inputs[1].defined()) {
    const DTensorSpec& x_spec = *ctx.input(0);
    const int64_t seq_dim = x_spec.ndim() - 3;
    DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, x_spec));
    DT_ASSIGN_OR_RETURN(out, dtensor::RotaryEmbeddingFrom(
                                 x, block.offset[seq_dim], theta, inverse));
  } else {
    DT_ASSIGN_OR_RETURN(out,
                        dtensor::RotaryEmbedding(x, inputs[1], theta, inverse));
  }
  return OpLocals{std::move(out)};
}

// The embedding rotates each pair by an angle proportional to its position;
// the transpose of a rotation is the rotation by minus the angle, so dx is
// the inverse rotation of g.
absl::StatusOr<InputGrads> RotaryBackward(const BackwardCall& call) {
  DT_ASSIGN_OR_RETURN(
      DTensor dx,
      RotaryEmbedding(call.grad_outputs[0], call.inputs[1],
                      call.args.Get(kTheta), !call.args.Get(kInverse)));
  return InputGrads{std::move(dx), DTensor()};
}

OpDef MakeRotary() {
  OpDef def = NamedOpDef(
      "rotary_embedding",
      "rotate-half rotary embedding of x [..., seq, heads, head_dim]",
      kRotaryArgs);
  def.num_inputs = 2;
  def.num_optional_inputs = 1;
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_RETURN_IF_ERROR(CheckRotary("rotary_embedding", inputs, args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), inputs[0]->dtype()}};
  };
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    const std::vector<int> x_loops = IdentityLoops(rank, {rank - 1});
    spec.loops.inputs = {x_loops,
                         ctx.inputs[1] == nullptr
                             ? std::vector<int>{}
                             : std::vector<int>{static_cast<int>(rank - 3)}};
    spec.loops.outputs = {x_loops};
    spec.partial_rules = {{{0}, LinearReduceOps()}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = RotaryKernel;
  def.backward = RotaryBackward;
  return def;
}

// ---- The family. ----

const OpDef& SoftmaxDef() { return StaticOpDef<MakeSoftmax, /*log=*/false>(); }
const OpDef& LogSoftmaxDef() {
  return StaticOpDef<MakeSoftmax, /*log=*/true>();
}
const OpDef& RotaryDef() { return StaticOpDef<MakeRotary>(); }

}  // namespace

absl::StatusOr<DTensor> Softmax(const DTensor& x, int64_t dim) {
  OpArgs args;
  args.AddInt(dim);
  return Call(SoftmaxDef(), {&x}, args);
}

absl::StatusOr<DTensor> LogSoftmax(const DTensor& x, int64_t dim) {
  OpArgs args;
  args.AddInt(dim);
  return Call(LogSoftmaxDef(), {&x}, args);
}

absl::StatusOr<DTensor> RotaryEmbedding(const DTensor& x,
                                        const DTensor& positions, double theta,
                                        bool inverse) {
  OpArgs args;
  args.AddScalar(theta).AddBool(inverse);
  return Call(RotaryDef(), {&x, &positions}, args);
}

std::vector<const OpDef*> NnOps() {
  return {&SoftmaxDef(), &LogSoftmaxDef(), &RotaryDef()};
}

}  // namespace ops
}  // namespace dtensor
