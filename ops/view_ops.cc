#include "dtensor/ops/view_ops.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/rule_helpers.h"

namespace dtensor {
namespace ops {
namespace {

// ---- The schemas. ----

// view, reshape and expand.
constexpr ArgSpec kShapeArgs[] = {{"shape", ArgKind::kInts}};
constexpr auto kShape = KeyOf<ArgKind::kInts>(kShapeArgs, "shape");

constexpr ArgSpec kFlattenArgs[] = {{"start_dim", ArgKind::kInt, "0"},
                                    {"end_dim", ArgKind::kInt, "-1"}};
constexpr auto kStartDim = KeyOf<ArgKind::kInt>(kFlattenArgs, "start_dim");
constexpr auto kEndDim = KeyOf<ArgKind::kInt>(kFlattenArgs, "end_dim");

constexpr ArgSpec kUnflattenArgs[] = {{"dim", ArgKind::kInt},
                                      {"sizes", ArgKind::kInts}};
constexpr auto kUnflattenDim = KeyOf<ArgKind::kInt>(kUnflattenArgs, "dim");
constexpr auto kSizes = KeyOf<ArgKind::kInts>(kUnflattenArgs, "sizes");

// Empty dims squeeze every size-1 dim.
constexpr ArgSpec kSqueezeArgs[] = {{"dims", ArgKind::kInts, ""}};
constexpr auto kSqueezeDims = KeyOf<ArgKind::kInts>(kSqueezeArgs, "dims");

constexpr ArgSpec kUnsqueezeArgs[] = {{"dim", ArgKind::kInt}};
constexpr auto kUnsqueezeDim = KeyOf<ArgKind::kInt>(kUnsqueezeArgs, "dim");

constexpr ArgSpec kTransposeArgs[] = {{"dim0", ArgKind::kInt},
                                      {"dim1", ArgKind::kInt}};
constexpr auto kDim0 = KeyOf<ArgKind::kInt>(kTransposeArgs, "dim0");
constexpr auto kDim1 = KeyOf<ArgKind::kInt>(kTransposeArgs, "dim1");

constexpr ArgSpec kPermuteArgs[] = {{"dims", ArgKind::kInts}};
constexpr auto kPermuteDims = KeyOf<ArgKind::kInts>(kPermuteArgs, "dims");

// ---- Reshapes. ----

// A run of dims of the input and of the output whose sizes multiply to the
// same count: its outermost dims, and that count. A size-1 input dim met
// where a size-1 output dim is (between groups) is a group of its own, so a
// shard of it survives the view as in PyTorch; other size-1 dims belong to
// no group.
struct DimGroup {
  int64_t in_dim;
  int64_t out_dim;
  int64_t numel;
};

// The groups of a reshape from `in` to `out` (equal element counts); none
// for an empty tensor.
std::vector<DimGroup> GroupDims(const Shape& in, const Shape& out) {
  std::vector<DimGroup> groups;
  if (NumElements(in) == 0) return groups;
  const int64_t in_rank = static_cast<int64_t>(in.size());
  const int64_t out_rank = static_cast<int64_t>(out.size());
  int64_t i = 0, j = 0;
  while (i < in_rank || j < out_rank) {
    if (i < in_rank && j < out_rank && in[i] == 1 && out[j] == 1) {
      groups.push_back(DimGroup{i++, j++, 1});
      continue;
    }
    if (i < in_rank && in[i] == 1) {
      ++i;
      continue;
    }
    if (j < out_rank && out[j] == 1) {
      ++j;
      continue;
    }
    if (i == in_rank || j == out_rank) return groups;  // Unequal counts.
    DimGroup group{i, j, 0};
    int64_t in_count = in[i++];
    int64_t out_count = out[j++];
    while (in_count != out_count) {
      if (in_count < out_count && i < in_rank) {
        in_count *= in[i++];
      } else if (out_count < in_count && j < out_rank) {
        out_count *= out[j++];
      } else {
        return groups;  // Unreachable for equal element counts.
      }
    }
    group.numel = in_count;
    groups.push_back(group);
  }
  return groups;
}

// Whether the mesh dims `nesting` splitting a group's outermost input dim of
// `in_extent` and its outermost output dim of `out_extent` give every rank
// the same run of the group's `numel` elements. The chunks of both tile the
// group in the order of the coordinates, so equal sizes everywhere make
// equal offsets.
bool SameRuns(int64_t in_extent, int64_t out_extent, int64_t numel,
              absl::Span<const int64_t> nesting,
              absl::Span<const int64_t> mesh_shape) {
  return SameScaledChunks(in_extent, numel / in_extent, out_extent,
                          numel / out_extent, nesting, mesh_shape);
}

absl::StatusOr<std::vector<OpStrategy>> ReshapeStrategies(
    const StrategyContext& ctx) {
  const Shape& in = ctx.inputs[0]->shape();
  const Shape& out = ctx.outputs[0].shape;
  const std::vector<DimGroup> groups = GroupDims(in, out);
  EinsumSpec spec;
  spec.num_loops = static_cast<int>(groups.size());
  std::vector<int> in_loops(in.size(), kNoLoop);
  std::vector<int> out_loops(out.size(), kNoLoop);
  for (size_t g = 0; g < groups.size(); ++g) {
    in_loops[groups[g].in_dim] = static_cast<int>(g);
    out_loops[groups[g].out_dim] = static_cast<int>(g);
  }
  spec.loops = {{std::move(in_loops)}, {std::move(out_loops)}};
  spec.partial_rules = {{{0}, AnyReduceOps()}};
  DT_ASSIGN_OR_RETURN(std::vector<OpStrategy> all, EinsumStrategies(ctx, spec));
  std::vector<OpStrategy> kept;
  for (OpStrategy& s : all) {
    bool valid = true;
    for (const DimGroup& g : groups) {
      // The output dim has the same mesh dims in the same order (one loop).
      const MeshDimList nesting = s.inputs[0].MeshDimsSharding(g.in_dim);
      valid &= nesting.empty() || SameRuns(in[g.in_dim], out[g.out_dim],
                                           g.numel, nesting, ctx.mesh_shape);
    }
    if (valid) kept.push_back(std::move(s));
  }
  return kept;
}

// The input's local block made into the output's: a reshape (or an expand)
// to the shape of this rank's output block.
KernelFn ToOutputBlock(bool expand) {
  return [expand](const KernelContext& ctx,
                  absl::Span<const Tensor> inputs) -> absl::StatusOr<OpLocals> {
    DT_ASSIGN_OR_RETURN(ShardBlock block, BlockOfRank(ctx, ctx.output(0)));
    DT_ASSIGN_OR_RETURN(Tensor out, expand ? inputs[0].Expand(block.shape)
                                           : inputs[0].Reshape(block.shape));
    return OpLocals{std::move(out)};
  };
}

OpDef ReshapeOp(absl::string_view name, absl::string_view summary,
                absl::Span<const ArgSpec> args, LocalFn fn) {
  OpDef def = NamedOpDef(name, summary, args);
  def.infer = InferByShapeProbe(name, std::move(fn));
  def.strategies = ReshapeStrategies;
  def.kernel = ToOutputBlock(/*expand=*/false);
  def.backward = [](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(DTensor dx,
                        Reshape(call.grad_outputs[0], call.inputs[0].shape()));
    return InputGrads{std::move(dx)};
  };
  return def;
}

absl::StatusOr<Tensor> UnflattenLocal(const Tensor& x, int64_t dim,
                                      absl::Span<const int64_t> sizes) {
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, x.dim()));
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, sizes.begin(), sizes.end());
  DT_ASSIGN_OR_RETURN(Tensor out, x.Reshape(shape));
  const int64_t product =
      NumElements(absl::MakeConstSpan(out.shape()).subspan(d, sizes.size()));
  if (product != x.shape()[d]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Unflatten: sizes ", ShapeToString(sizes), " do not multiply to dim ",
        dim, " of size ", x.shape()[d]));
  }
  return out;
}

absl::StatusOr<Tensor> SqueezeLocal(const Tensor& x,
                                    absl::Span<const int64_t> dims) {
  if (dims.empty()) return x.Squeeze();
  std::vector<int64_t> normalized;
  for (int64_t dim : dims) {
    DT_ASSIGN_OR_RETURN(const int64_t d,
                        NormalizeDim(dim, std::max<int64_t>(x.dim(), 1)));
    normalized.push_back(d);
  }
  // From the last, so that the earlier positions stay valid.
  std::sort(normalized.rbegin(), normalized.rend());
  normalized.erase(std::unique(normalized.begin(), normalized.end()),
                   normalized.end());
  Tensor out = x;
  for (int64_t d : normalized) {
    DT_ASSIGN_OR_RETURN(out, out.Squeeze(d));
  }
  return out;
}

// ---- Permutations. ----

// The input dim each output dim of a permutation takes (normalised);
// requires arguments the probe accepted.
using PermutationFn =
    std::function<std::vector<int64_t>(int64_t rank, const OpArgs& args)>;

OpDef PermutationOp(absl::string_view name, absl::string_view summary,
                    absl::Span<const ArgSpec> args, LocalFn fn,
                    PermutationFn permutation) {
  OpDef def = NamedOpDef(name, summary, args);
  def.infer = InferByShapeProbe(name, fn);
  def.strategies = [permutation](const StrategyContext& ctx) {
    const int64_t rank = ctx.inputs[0]->ndim();
    std::vector<int> out_loops;
    for (int64_t d : permutation(rank, ctx.args)) {
      out_loops.push_back(static_cast<int>(d));
    }
    EinsumSpec spec;
    spec.num_loops = static_cast<int>(rank);
    spec.loops = {{IdentityLoops(rank)}, {std::move(out_loops)}};
    spec.partial_rules = {{{0}, AnyReduceOps()}};
    return EinsumStrategies(ctx, spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  // The inverse permutation moves the gradient's dims back.
  def.backward =
      [permutation](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    const std::vector<int64_t> forward =
        permutation(call.inputs[0].spec().ndim(), call.args);
    std::vector<int64_t> inverse(forward.size());
    for (size_t d = 0; d < forward.size(); ++d) inverse[forward[d]] = d;
    DT_ASSIGN_OR_RETURN(DTensor dx, Permute(call.grad_outputs[0], inverse));
    return InputGrads{std::move(dx)};
  };
  return def;
}

std::vector<int64_t> TransposePermutation(int64_t rank, const OpArgs& args) {
  std::vector<int64_t> dims(rank);
  for (int64_t d = 0; d < rank; ++d) dims[d] = d;
  std::swap(dims[*NormalizeDim(args.Get(kDim0), rank)],
            dims[*NormalizeDim(args.Get(kDim1), rank)]);
  return dims;
}

std::vector<int64_t> PermutePermutation(int64_t rank, const OpArgs& args) {
  std::vector<int64_t> dims;
  for (int64_t d : args.Get(kPermuteDims))
    dims.push_back(*NormalizeDim(d, rank));
  return dims;
}

// ---- expand. ----

// Loops: the output's dims; new leading dims and expanded size-1 dims iterate
// none.
absl::StatusOr<std::vector<OpStrategy>> ExpandStrategies(
    const StrategyContext& ctx) {
  const Shape& in = ctx.inputs[0]->shape();
  const Shape& out = ctx.outputs[0].shape;
  const int64_t leading =
      static_cast<int64_t>(out.size()) - static_cast<int64_t>(in.size());
  std::vector<int> in_loops(in.size(), kNoLoop);
  std::vector<int> out_loops(out.size(), kNoLoop);
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (in[d] == out[d + leading]) {
      in_loops[d] = static_cast<int>(d + leading);
      out_loops[d + leading] = static_cast<int>(d + leading);
    }
  }
  EinsumSpec spec;
  spec.num_loops = static_cast<int>(out.size());
  spec.loops = {{std::move(in_loops)}, {std::move(out_loops)}};
  spec.partial_rules = {{{0}, AnyReduceOps()}};
  return EinsumStrategies(ctx, spec);
}

OpDef MakeExpand() {
  OpDef def = NamedOpDef(
      "expand", "broadcast size-1 dims (and new leading dims) to shape",
      kShapeArgs);
  def.infer = InferByShapeProbe(
      "expand", [](absl::Span<const Tensor> in, const OpArgs& args) {
        return in[0].Expand(args.Get(kShape));
      });
  def.strategies = ExpandStrategies;
  def.kernel = ToOutputBlock(/*expand=*/true);
  def.backward = [](const BackwardCall& call) -> absl::StatusOr<InputGrads> {
    DT_ASSIGN_OR_RETURN(
        DTensor dx, SumToShape(call.grad_outputs[0], call.inputs[0].shape()));
    return InputGrads{std::move(dx)};
  };
  return def;
}

// ---- The family. ----

// One maker and accessor per op: `Make<Name>()` is the op `make`
// (ReshapeOp or PermutationOp) builds from its name, summary, argument
// schema, local function (the expression `local` of `in` and `args`) and the
// maker's further arguments; `<Name>Def()` builds it once.
#define DTENSOR_VIEW_DEF(Name, make, name, summary, schema, local, ...)        \
  OpDef Make##Name() {                                                         \
    return make(                                                               \
        name, summary, schema,                                                 \
        [](absl::Span<const Tensor> in, const OpArgs& args) { return local; }, \
        ##__VA_ARGS__);                                                        \
  }                                                                            \
  const OpDef& Name##Def() { return StaticOpDef<Make##Name>(); }
DTENSOR_VIEW_DEF(View, ReshapeOp, "view",
                 "the same elements in another shape (as reshape)", kShapeArgs,
                 in[0].View(args.Get(kShape)))
DTENSOR_VIEW_DEF(Reshape, ReshapeOp, "reshape",
                 "the same elements in another shape (one -1 inferred)",
                 kShapeArgs, in[0].Reshape(args.Get(kShape)))
DTENSOR_VIEW_DEF(Flatten, ReshapeOp, "flatten", "merge dims start_dim..end_dim",
                 kFlattenArgs,
                 in[0].Flatten(args.Get(kStartDim), args.Get(kEndDim)))
DTENSOR_VIEW_DEF(Unflatten, ReshapeOp, "unflatten", "split dim into sizes",
                 kUnflattenArgs,
                 UnflattenLocal(in[0], args.Get(kUnflattenDim),
                                args.Get(kSizes)))
DTENSOR_VIEW_DEF(Squeeze, ReshapeOp, "squeeze",
                 "remove size-1 dims (all, or those listed)", kSqueezeArgs,
                 SqueezeLocal(in[0], args.Get(kSqueezeDims)))
DTENSOR_VIEW_DEF(Unsqueeze, ReshapeOp, "unsqueeze", "insert a size-1 dim",
                 kUnsqueezeArgs, in[0].Unsqueeze(args.Get(kUnsqueezeDim)))
DTENSOR_VIEW_DEF(Transpose, PermutationOp, "transpose", "swap two dims",
                 kTransposeArgs,
                 in[0].Transpose(args.Get(kDim0), args.Get(kDim1)),
                 TransposePermutation)
DTENSOR_VIEW_DEF(Permute, PermutationOp, "permute", "reorder dims",
                 kPermuteArgs, in[0].Permute(args.Get(kPermuteDims)),
                 PermutePermutation)
#undef DTENSOR_VIEW_DEF

const OpDef& ExpandDef() { return StaticOpDef<MakeExpand>(); }

absl::StatusOr<DTensor> Call(const OpDef& def, const DTensor& x,
                             const OpArgs& args) {
  const DTensor* in[] = {&x};
  return DispatchOne(def, in, args);
}

}  // namespace

// The views that take one list of sizes or dims.
#define DTENSOR_DEFINE_LIST_VIEW(Name, Def)                      \
  absl::StatusOr<DTensor> Name(const DTensor& x,                 \
                               absl::Span<const int64_t> list) { \
    return Call(Def(), x, OpArgs().AddInts(list));               \
  }
DTENSOR_DEFINE_LIST_VIEW(View, ViewDef)
DTENSOR_DEFINE_LIST_VIEW(Reshape, ReshapeDef)
DTENSOR_DEFINE_LIST_VIEW(Permute, PermuteDef)
DTENSOR_DEFINE_LIST_VIEW(Squeeze, SqueezeDef)
DTENSOR_DEFINE_LIST_VIEW(Expand, ExpandDef)
#undef DTENSOR_DEFINE_LIST_VIEW

absl::StatusOr<DTensor> Flatten(const DTensor& x, int64_t start_dim,
                                int64_t end_dim) {
  return Call(FlattenDef(), x, OpArgs().AddInt(start_dim).AddInt(end_dim));
}

absl::StatusOr<DTensor> Unflatten(const DTensor& x, int64_t dim,
                                  absl::Span<const int64_t> sizes) {
  return Call(UnflattenDef(), x, OpArgs().AddInt(dim).AddInts(sizes));
}

absl::StatusOr<DTensor> Transpose(const DTensor& x, int64_t dim0,
                                  int64_t dim1) {
  return Call(TransposeDef(), x, OpArgs().AddInt(dim0).AddInt(dim1));
}

absl::StatusOr<DTensor> Unsqueeze(const DTensor& x, int64_t dim) {
  return Call(UnsqueezeDef(), x, OpArgs().AddInt(dim));
}

std::vector<const OpDef*> ViewOps() {
  return {&ViewDef(),      &ReshapeDef(), &FlattenDef(),
          &UnflattenDef(), &SqueezeDef(), &UnsqueezeDef(),
          &TransposeDef(), &PermuteDef(), &ExpandDef()};
}

}  // namespace ops
}  // namespace dtensor
