#include "dtensor/ops/random_ops.h"

#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/nn_functional_cuda.h"

namespace dtensor {
namespace ops {
namespace {

// offset: the stream position of the tensor's first element.
constexpr ArgSpec kDropoutArgs[] = {{"p", ArgKind::kScalar},
                                    {"seed", ArgKind::kInt},
                                    {"offset", ArgKind::kScalar, "0"}};
constexpr auto kP = KeyOf<ArgKind::kScalar>(kDropoutArgs, "p");
constexpr auto kSeed = KeyOf<ArgKind::kInt>(kDropoutArgs, "seed");
constexpr auto kOffset = KeyOf<ArgKind::kScalar>(kDropoutArgs, "offset");

absl::Status CheckDropout(const DTensorSpec& x, const OpArgs& args) {
  if (!IsFloatingPoint(x.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout: x must have a floating dtype, got ",
                     std::string(DTypeName(x.dtype()))));
  }
  const double p = args.Get(kP);
  if (!(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout: p ", p, " is outside [0, 1]"));
  }
  const double offset = args.Get(kOffset);
  if (!(offset >= 0 && offset < 0x1p53 && std::floor(offset) == offset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dropout: offset ", offset, " is not a whole number in [0, 2^53)"));
  }
  return absl::OkStatus();
}

// Dropout of `x`, the block of a tensor of `global_shape` that starts at
// `block_offset`: each row of the last dim draws its run of the stream from
// the global index of its first element.
absl::StatusOr<Tensor> DropoutBlock(const Tensor& x, const OpArgs& args,
                                    const Shape& global_shape,
                                    absl::Span<const int64_t> block_offset) {
  const double p = args.Get(kP);
  if (p == 1) return Tensor::Zeros(x.shape(), x.dtype(), x.device());
  const double scale = 1.0 / (1.0 - p);
  const uint64_t offset = static_cast<uint64_t>(args.Get(kOffset));
  const int64_t rank = x.dim();
  const Strides global_strides = ContiguousStrides(global_shape);
  if (cuda::OnCuda(x)) {
    // The same positions, from the block's first element.
    uint64_t base = offset;
    for (int64_t d = 0; d < rank; ++d) {
      base += static_cast<uint64_t>(block_offset[d] * global_strides[d]);
    }
    return cuda::DropoutOnDevice(x, p, static_cast<uint64_t>(args.Get(kSeed)),
                                 base, global_strides);
  }
  const int64_t width = rank == 0 ? 1 : x.shape().back();
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  std::vector<double> mask(x.numel());
  // The local index of the current row's first element.
  std::vector<int64_t> index(rank, 0);
  Generator generator(static_cast<uint64_t>(args.Get(kSeed)));
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t first = offset;
    for (int64_t d = 0; d < rank; ++d) {
      first += static_cast<uint64_t>((block_offset[d] + index[d]) *
                                     global_strides[d]);
    }
    generator.set_offset(first);
    for (int64_t j = 0; j < width; ++j) {
      mask[r * width + j] = generator.NextUniformFloat() >= p ? scale : 0.0;
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < x.shape()[d]) break;
      index[d] = 0;
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor mask_tensor,
                      Tensor::FromVector<double>(mask, x.shape()));
  DT_ASSIGN_OR_RETURN(mask_tensor, mask_tensor.To(x.dtype()));
  DT_ASSIGN_OR_RETURN(mask_tensor, mask_tensor.To(x.device()));
  return dtensor::Mul(x, mask_tensor);
}

OpDef MakeDropout() {
  OpDef def = NamedOpDef(
      "dropout", "zero elements with probability p (by global position)",
      kDropoutArgs);
  def.infer =
      [](absl::Span<const DTensorSpec* const> inputs,
         const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_RETURN_IF_ERROR(CheckDropout(*inputs[0], args));
    return std::vector<TensorMeta>{{inputs[0]->shape(), inputs[0]->dtype()}};
  };
  def.strategies = [](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    spec.loops = {{IdentityLoops(rank)}, {IdentityLoops(rank)}};
    // x * mask with mask >= 0 the same on every rank.
    spec.partial_rules = {{{0}, AnyReduceOps()}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = [](const KernelContext& ctx,
                  absl::Span<const Tensor> inputs) -> absl::StatusOr<OpLocals> {
    const DTensorSpec& spec = *ctx.input(0);
    DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, spec));
    DT_ASSIGN_OR_RETURN(Tensor out, DropoutBlock(inputs[0], ctx.args(),
                                                 spec.shape(), block.offset));
    return OpLocals{std::move(out)};
  };
  // The same mask (it depends on the seed and the global positions only)
  // scales the gradient.
  def.backward = [](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    const OpArgs& args = call.args;
    DT_ASSIGN_OR_RETURN(DTensor dx,
                        Dropout(call.grad_outputs[0], args.Get(kP),
                                static_cast<uint64_t>(args.Get(kSeed)),
                                static_cast<uint64_t>(args.Get(kOffset))));
    return InputGrads{std::move(dx)};
  };
  return def;
}

const OpDef& DropoutDef() { return StaticOpDef<MakeDropout>(); }

}  // namespace

absl::StatusOr<DTensor> Dropout(const DTensor& x, double p, uint64_t seed,
                                uint64_t offset) {
  const DTensor* in[] = {&x};
  OpArgs args;
  args.AddScalar(p)
      .AddInt(static_cast<int64_t>(seed))
      .AddScalar(static_cast<double>(offset));
  return DispatchOne(DropoutDef(), in, args);
}

std::vector<const OpDef*> RandomOps() { return {&DropoutDef()}; }

}  // namespace ops
}  // namespace dtensor
