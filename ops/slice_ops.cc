#include "dtensor/ops/slice_ops.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/join_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/ops/rule_helpers.h"
#include "dtensor/ops/view_ops.h"

namespace dtensor {
namespace ops {
namespace {

constexpr ArgSpec kNarrowArgs[] = {{"dim", ArgKind::kInt},
                                   {"start", ArgKind::kInt},
                                   {"length", ArgKind::kInt}};
constexpr auto kNarrowDim = KeyOf<ArgKind::kInt>(kNarrowArgs, "dim");
constexpr auto kNarrowStart = KeyOf<ArgKind::kInt>(kNarrowArgs, "start");
constexpr auto kNarrowLength = KeyOf<ArgKind::kInt>(kNarrowArgs, "length");

constexpr ArgSpec kSliceArgs[] = {{"dim", ArgKind::kInt},
                                  {"start", ArgKind::kInt},
                                  {"end", ArgKind::kInt},
                                  {"step", ArgKind::kInt, "1"}};
constexpr auto kSliceDim = KeyOf<ArgKind::kInt>(kSliceArgs, "dim");
constexpr auto kSliceStart = KeyOf<ArgKind::kInt>(kSliceArgs, "start");
constexpr auto kSliceEnd = KeyOf<ArgKind::kInt>(kSliceArgs, "end");
constexpr auto kSliceStep = KeyOf<ArgKind::kInt>(kSliceArgs, "step");

// ---- Backward definitions. ----

// Zeros shaped like `like` but for `size` along `dim`, laid out like `like`
// with `dim` unsharded (so that they concatenate with it along `dim`).
absl::StatusOr<DTensor> ZerosAlong(const DTensor& like, int64_t dim,
                                   int64_t size) {
  Shape shape = like.shape();
  shape[dim] = size;
  const MeshDimList sharding_dim = like.sharding().MeshDimsSharding(dim);
  const Sharding sharding = like.sharding().WithReplicated(
      std::vector<int64_t>(sharding_dim.begin(), sharding_dim.end()));
  return FullWithSharding(like, shape, sharding, 0, like.dtype());
}

// The gradient of x, of `size` along `dim`, from the gradient `part` of its
// elements [start, start + part's extent): zeros elsewhere.
absl::StatusOr<DTensor> PadAlong(const DTensor& part, int64_t dim,
                                 int64_t start, int64_t size) {
  const int64_t after = size - start - part.shape()[dim];
  if (start == 0 && after == 0) return part;
  std::vector<DTensor> pieces;
  if (start > 0) {
    DT_ASSIGN_OR_RETURN(DTensor before, ZerosAlong(part, dim, start));
    pieces.push_back(std::move(before));
  }
  pieces.push_back(part);
  if (after > 0) {
    DT_ASSIGN_OR_RETURN(DTensor rest, ZerosAlong(part, dim, after));
    pieces.push_back(std::move(rest));
  }
  return Cat(pieces, dim);
}

absl::StatusOr<InputGrads> NarrowBackward(const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const int64_t d = *NormalizeDim(call.args.Get(kNarrowDim), x.spec().ndim());
  const int64_t size = x.shape()[d];
  int64_t start = call.args.Get(kNarrowStart);
  if (start < 0) start += size;
  DT_ASSIGN_OR_RETURN(DTensor dx,
                      PadAlong(call.grad_outputs[0], d, start, size));
  return InputGrads{std::move(dx)};
}

// The elements start, start + step, ... of x get the gradient's; the others
// zero: the gradient interleaved with step - 1 zeros after each element, cut
// to x and padded.
absl::StatusOr<InputGrads> SliceBackward(const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& g = call.grad_outputs[0];
  const int64_t d = *NormalizeDim(call.args.Get(kSliceDim), x.spec().ndim());
  const int64_t size = x.shape()[d];
  const int64_t step = call.args.Get(kSliceStep);
  // The tensor layer's clamping of start.
  int64_t start = call.args.Get(kSliceStart);
  if (start < 0) start += size;
  start = std::clamp<int64_t>(start, 0, size);
  const int64_t count = g.shape()[d];
  DTensor spread = g;
  if (step > 1 && count > 0) {
    DT_ASSIGN_OR_RETURN(DTensor column, Unsqueeze(g, d + 1));
    DT_ASSIGN_OR_RETURN(DTensor gaps, ZerosAlong(column, d + 1, step - 1));
    const DTensor pair[] = {column, gaps};
    DT_ASSIGN_OR_RETURN(DTensor interleaved, Cat(pair, d + 1));
    Shape shape = g.shape();
    shape[d] = count * step;
    DT_ASSIGN_OR_RETURN(spread, Reshape(interleaved, shape));
    DT_ASSIGN_OR_RETURN(
        spread, Narrow(spread, d, 0, std::min(count * step, size - start)));
  }
  DT_ASSIGN_OR_RETURN(DTensor dx, PadAlong(spread, d, start, size));
  return InputGrads{std::move(dx)};
}

// `dim` is the key of the dim in `args`.
OpDef SliceOp(absl::string_view name, absl::string_view summary,
              absl::Span<const ArgSpec> args, ArgKey<ArgKind::kInt> dim,
              LocalFn fn, BackwardFn backward) {
  OpDef def = NamedOpDef(name, summary, args);
  def.infer = InferByShapeProbe(name, fn);
  def.strategies = [dim](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    // Checked by infer.
    const std::vector<int> loops =
        IdentityLoops(rank, {*NormalizeDim(ctx.args.Get(dim), rank)});
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    spec.loops = {{loops}, {loops}};
    spec.partial_rules = {{{0}, AnyReduceOps()}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  def.backward = std::move(backward);
  return def;
}

OpDef MakeNarrow() {
  return SliceOp(
      "narrow", "elements [start, start + length) of dim", kNarrowArgs,
      kNarrowDim,
      [](absl::Span<const Tensor> in, const OpArgs& args) {
        return in[0].Narrow(args.Get(kNarrowDim), args.Get(kNarrowStart),
                            args.Get(kNarrowLength));
      },
      NarrowBackward);
}

OpDef MakeSlice() {
  return SliceOp(
      "slice", "elements [start, end) of dim by step", kSliceArgs, kSliceDim,
      [](absl::Span<const Tensor> in, const OpArgs& args) {
        return in[0].Slice(args.Get(kSliceDim), args.Get(kSliceStart),
                           args.Get(kSliceEnd), args.Get(kSliceStep));
      },
      SliceBackward);
}

const OpDef& NarrowDef() { return StaticOpDef<MakeNarrow>(); }
const OpDef& SliceDef() { return StaticOpDef<MakeSlice>(); }

OpArgs NarrowArgs(int64_t dim, int64_t start, int64_t length) {
  OpArgs args;
  args.AddInt(dim).AddInt(start).AddInt(length);
  return args;
}

// The parts of `x` along `dim` that the tensor layer's `parts` of a probe of
// x's shape have, narrowed from one sharding of x that suits them all.
absl::StatusOr<std::vector<DTensor>> NarrowParts(
    absl::string_view op, const DTensor& x, int64_t dim,
    const absl::StatusOr<std::vector<Tensor>>& parts) {
  if (!parts.ok()) return WithOpName(op, parts.status());
  std::vector<DTensor> out;
  if (parts->empty()) return out;
  // `parts` succeeded, so the dim is valid.
  const int64_t d = *NormalizeDim(dim, x.spec().ndim());
  const DTensorSpec* spec[] = {&x.spec()};
  DT_ASSIGN_OR_RETURN(
      std::shared_ptr<const Propagation> first,
      PropagationCache::Shared().Get(NarrowDef(), spec,
                                     NarrowArgs(d, 0, (*parts)[0].shape()[d]),
                                     *x.runtime()));
  DTensor source = x;
  if (first->strategy.inputs[0] != x.sharding()) {
    DT_ASSIGN_OR_RETURN(source, x.Redistribute(first->strategy.inputs[0]));
  }
  int64_t start = 0;
  for (const Tensor& part : *parts) {
    const int64_t length = part.shape()[d];
    DT_ASSIGN_OR_RETURN(DTensor piece, Narrow(source, d, start, length));
    out.push_back(std::move(piece));
    start += length;
  }
  return out;
}

// A probe of x's shape; an error naming `op` when x is undefined.
absl::StatusOr<Tensor> ProbeOf(absl::string_view op, const DTensor& x) {
  if (!x.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": x is undefined"));
  }
  return ShapeProbe(x.shape(), x.dtype());
}

}  // namespace

absl::StatusOr<DTensor> Narrow(const DTensor& x, int64_t dim, int64_t start,
                               int64_t length) {
  const DTensor* in[] = {&x};
  return DispatchOne(NarrowDef(), in, NarrowArgs(dim, start, length));
}

absl::StatusOr<DTensor> Slice(const DTensor& x, int64_t dim, int64_t start,
                              int64_t end, int64_t step) {
  const DTensor* in[] = {&x};
  OpArgs args;
  args.AddInt(dim).AddInt(start).AddInt(end).AddInt(step);
  return DispatchOne(SliceDef(), in, args);
}

absl::StatusOr<std::vector<DTensor>> Split(const DTensor& x, int64_t split_size,
                                           int64_t dim) {
  DT_ASSIGN_OR_RETURN(Tensor probe, ProbeOf("split", x));
  return NarrowParts("split", x, dim, probe.Split(split_size, dim));
}

absl::StatusOr<std::vector<DTensor>> Split(const DTensor& x,
                                           absl::Span<const int64_t> sizes,
                                           int64_t dim) {
  DT_ASSIGN_OR_RETURN(Tensor probe, ProbeOf("split", x));
  return NarrowParts("split", x, dim, probe.Split(sizes, dim));
}

absl::StatusOr<std::vector<DTensor>> Chunk(const DTensor& x, int64_t chunks,
                                           int64_t dim) {
  DT_ASSIGN_OR_RETURN(Tensor probe, ProbeOf("chunk", x));
  return NarrowParts("chunk", x, dim, probe.Chunk(chunks, dim));
}

std::vector<const OpDef*> SliceOps() { return {&NarrowDef(), &SliceDef()}; }

}  // namespace ops
}  // namespace dtensor
