#include "dtensor/ops/matmul_ops.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/einsum_strategy.h"
#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/local_fn.h"
#include "dtensor/ops/reduction_ops.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/matmul.h"

namespace dtensor {
namespace ops {
namespace {

constexpr ArgSpec kAddmmArgs[] = {{"beta", ArgKind::kScalar, "1"},
                                  {"alpha", ArgKind::kScalar, "1"}};
constexpr auto kBeta = KeyOf<ArgKind::kScalar>(kAddmmArgs, "beta");
constexpr auto kAlpha = KeyOf<ArgKind::kScalar>(kAddmmArgs, "alpha");

// An op's output shape and its einsum view.
struct MatmulView {
  Shape out;
  EinsumSpec spec;
};

// Computes the view of a call from its input specs (null: absent); errors
// name the op and the shapes.
using ViewFn = std::function<absl::StatusOr<MatmulView>(
    absl::string_view op, absl::Span<const DTensorSpec* const> inputs)>;

const std::vector<ReduceOp> kLinear = {ReduceOp::kSum, ReduceOp::kAvg};

absl::Status ShapeError(absl::string_view op, absl::string_view what,
                        const Shape& a, const Shape& b) {
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", what, " (", ShapeToString(a), " and ", ShapeToString(b), ")"));
}

std::vector<int> Iota(int begin, int end) {
  std::vector<int> values;
  for (int v = begin; v < end; ++v) values.push_back(v);
  return values;
}

// torch.matmul. Loops: the output's batch dims, then M, K, N.
absl::StatusOr<MatmulView> MatmulLoops(absl::string_view op, const Shape& a,
                                       const Shape& b) {
  if (a.empty() || b.empty()) {
    return ShapeError(op, "both operands need at least one dim", a, b);
  }
  const int64_t ra = static_cast<int64_t>(a.size());
  const int64_t rb = static_cast<int64_t>(b.size());
  const int64_t k_b = rb == 1 ? b[0] : b[rb - 2];
  if (a.back() != k_b) {
    return ShapeError(op, "inner dims differ", a, b);
  }
  const Shape a_batch(a.begin(), a.end() - std::min<int64_t>(ra, 2));
  const Shape b_batch(b.begin(), b.end() - std::min<int64_t>(rb, 2));
  absl::StatusOr<Shape> batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) return ShapeError(op, "batch dims do not broadcast", a, b);
  const int nb = static_cast<int>(batch->size());
  const int m = nb, k = nb + 1, n = nb + 2;

  MatmulView view;
  view.out = *batch;
  view.spec.num_loops = nb + 3;
  std::vector<int> a_loops = BroadcastLoops(a_batch, *batch);
  std::vector<int> b_loops = BroadcastLoops(b_batch, *batch);
  std::vector<int> out_loops = Iota(0, nb);
  if (ra >= 2) {
    a_loops.push_back(m);
    view.out.push_back(a[ra - 2]);
    out_loops.push_back(m);
  }
  a_loops.push_back(k);
  b_loops.push_back(k);
  if (rb >= 2) {
    b_loops.push_back(n);
    view.out.push_back(b[rb - 1]);
    out_loops.push_back(n);
  }
  view.spec.loops.inputs = {std::move(a_loops), std::move(b_loops)};
  view.spec.loops.outputs = {std::move(out_loops)};
  view.spec.contraction = {ReduceOp::kSum};
  view.spec.partial_rules = {{{0}, kLinear}, {{1}, kLinear}};
  return view;
}

absl::StatusOr<MatmulView> MatmulView2(
    absl::string_view op, absl::Span<const DTensorSpec* const> in) {
  return MatmulLoops(op, in[0]->shape(), in[1]->shape());
}

absl::StatusOr<MatmulView> MmView(absl::string_view op,
                                  absl::Span<const DTensorSpec* const> in) {
  if (in[0]->ndim() != 2 || in[1]->ndim() != 2) {
    return ShapeError(op, "needs two 2-D operands", in[0]->shape(),
                      in[1]->shape());
  }
  return MatmulView2(op, in);
}

absl::StatusOr<MatmulView> BmmView(absl::string_view op,
                                   absl::Span<const DTensorSpec* const> in) {
  const Shape& a = in[0]->shape();
  const Shape& b = in[1]->shape();
  if (a.size() != 3 || b.size() != 3) {
    return ShapeError(op, "needs two 3-D operands", a, b);
  }
  if (a[0] != b[0]) return ShapeError(op, "batch sizes differ", a, b);
  return MatmulView2(op, in);
}

// linear(x, weight, bias). Loops: x's batch dims, then K (in), N (out).
absl::StatusOr<MatmulView> LinearView(absl::string_view op,
                                      absl::Span<const DTensorSpec* const> in) {
  const Shape& x = in[0]->shape();
  const Shape& w = in[1]->shape();
  if (x.empty() || w.size() != 2 || x.back() != w[1]) {
    return ShapeError(op, "input [..., in] needs weight [out, in]", x, w);
  }
  if (in[2] != nullptr && (in[2]->ndim() != 1 || in[2]->shape()[0] != w[0])) {
    return ShapeError(op, "bias must be [out] for weight [out, in]",
                      in[2]->shape(), w);
  }
  const int nb = static_cast<int>(x.size()) - 1;
  const int k = nb, n = nb + 1;
  MatmulView view;
  view.out = Shape(x.begin(), x.end() - 1);
  view.out.push_back(w[0]);
  view.spec.num_loops = nb + 2;
  std::vector<int> x_loops = Iota(0, nb);
  x_loops.push_back(k);
  std::vector<int> out_loops = Iota(0, nb);
  out_loops.push_back(n);
  view.spec.loops.inputs = {
      std::move(x_loops),
      {n, k},
      in[2] != nullptr ? std::vector<int>{n} : std::vector<int>{}};
  view.spec.loops.outputs = {std::move(out_loops)};
  view.spec.contraction = {ReduceOp::kSum};
  view.spec.contraction_partners = {2};
  view.spec.partial_rules = {{{0, 2}, kLinear}, {{1, 2}, kLinear}};
  return view;
}

// linear_weight_grad(g, x). Loops: the shared leading dims (contracted:
// every row adds its outer product), then N (out), K (in).
absl::StatusOr<MatmulView> LinearWeightGradView(
    absl::string_view op, absl::Span<const DTensorSpec* const> in) {
  const Shape& g = in[0]->shape();
  const Shape& x = in[1]->shape();
  if (g.empty() || g.size() != x.size() ||
      !std::equal(g.begin(), g.end() - 1, x.begin())) {
    return ShapeError(op, "needs g [..., out] and x [..., in]", g, x);
  }
  const int nb = static_cast<int>(g.size()) - 1;
  const int n = nb, k = nb + 1;
  MatmulView view;
  view.out = {g.back(), x.back()};
  view.spec.num_loops = nb + 2;
  std::vector<int> g_loops = Iota(0, nb);
  g_loops.push_back(n);
  std::vector<int> x_loops = Iota(0, nb);
  x_loops.push_back(k);
  view.spec.loops.inputs = {std::move(g_loops), std::move(x_loops)};
  view.spec.loops.outputs = {{n, k}};
  view.spec.contraction = {ReduceOp::kSum};
  view.spec.partial_rules = {{{0}, kLinear}, {{1}, kLinear}};
  return view;
}

// The local g [..., out] and x [..., in] as rows: g^T x.
absl::StatusOr<Tensor> LinearWeightGradLocal(absl::Span<const Tensor> in,
                                             const OpArgs&) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < in[0].dim(); ++d) rows *= in[0].size(d);
  DT_ASSIGN_OR_RETURN(const Tensor g, in[0].Reshape({rows, in[0].size(-1)}));
  DT_ASSIGN_OR_RETURN(const Tensor x, in[1].Reshape({rows, in[1].size(-1)}));
  DT_ASSIGN_OR_RETURN(const Tensor g_t, g.Transpose(0, 1));
  return dtensor::Matmul(g_t, x);
}

// addmm(bias, a, b). Loops: M, K, N.
absl::StatusOr<MatmulView> AddmmView(absl::string_view op,
                                     absl::Span<const DTensorSpec* const> in) {
  const Shape& a = in[1]->shape();
  const Shape& b = in[2]->shape();
  if (a.size() != 2 || b.size() != 2) {
    return ShapeError(op, "needs two 2-D matrices", a, b);
  }
  if (a[1] != b[0]) return ShapeError(op, "inner dims differ", a, b);
  const Shape out = {a[0], b[1]};
  const Shape& bias = in[0]->shape();
  absl::StatusOr<Shape> broadcast = BroadcastShapes(bias, out);
  if (!broadcast.ok() || *broadcast != out) {
    return ShapeError(op, "bias does not broadcast to the product", bias, out);
  }
  MatmulView view;
  view.out = out;
  view.spec.num_loops = 3;
  // The product's dims 0 and 1 iterate loops M = 0 and N = 2.
  std::vector<int> bias_loops = BroadcastLoops(bias, out);
  for (int& loop : bias_loops) {
    if (loop == 1) loop = 2;
  }
  view.spec.loops.inputs = {std::move(bias_loops), {0, 1}, {1, 2}};
  view.spec.loops.outputs = {{0, 2}};
  view.spec.contraction = {ReduceOp::kSum};
  view.spec.contraction_partners = {0};
  view.spec.partial_rules = {{{0, 1}, kLinear}, {{0, 2}, kLinear}};
  return view;
}

absl::StatusOr<Tensor> AddmmLocal(absl::Span<const Tensor> in,
                                  const OpArgs& args) {
  const double beta = args.Get(kBeta);
  const double alpha = args.Get(kAlpha);
  DT_ASSIGN_OR_RETURN(Tensor product, dtensor::Matmul(in[1], in[2]));
  if (alpha != 1) {
    DT_ASSIGN_OR_RETURN(product, dtensor::Mul(product, alpha));
  }
  if (beta == 0) {
    // Checked like the bias term would be, then ignored.
    DT_RETURN_IF_ERROR(dtensor::Add(in[0], product).status());
    return product;
  }
  Tensor bias = in[0];
  if (beta != 1) {
    DT_ASSIGN_OR_RETURN(bias, dtensor::Mul(bias, beta));
  }
  return dtensor::Add(bias, product);
}

// ---- Backward definitions. ----

// x with its last two dims swapped.
absl::StatusOr<DTensor> SwapLast(const DTensor& x) {
  return Transpose(x, -2, -1);
}

// torch.matmul's gradients: 1-D operands promoted to matrices (a [K] as
// [1, K], b [K] as [K, 1], the gradient given the dims they drop), then
// da = g b^T and db = a^T g, summed over broadcast batch dims.
absl::StatusOr<InputGrads> MatmulBackward(const BackwardCall& call) {
  const DTensor& a = call.inputs[0];
  const DTensor& b = call.inputs[1];
  DTensor a2 = a, b2 = b, g = call.grad_outputs[0];
  if (a.spec().ndim() == 1) {
    DT_ASSIGN_OR_RETURN(a2, Unsqueeze(a, 0));
    DT_ASSIGN_OR_RETURN(g, Unsqueeze(g, b.spec().ndim() == 1 ? 0 : -2));
  }
  if (b.spec().ndim() == 1) {
    DT_ASSIGN_OR_RETURN(b2, Unsqueeze(b, 1));
    DT_ASSIGN_OR_RETURN(g, Unsqueeze(g, -1));
  }
  DT_ASSIGN_OR_RETURN(DTensor b2_t, SwapLast(b2));
  DT_ASSIGN_OR_RETURN(DTensor da, Matmul(g, b2_t));
  DT_ASSIGN_OR_RETURN(DTensor a2_t, SwapLast(a2));
  DT_ASSIGN_OR_RETURN(DTensor db, Matmul(a2_t, g));
  DT_ASSIGN_OR_RETURN(da, SumToShape(da, a2.shape()));
  DT_ASSIGN_OR_RETURN(db, SumToShape(db, b2.shape()));
  if (a2.shape() != a.shape()) {
    DT_ASSIGN_OR_RETURN(da, Reshape(da, a.shape()));
  }
  if (b2.shape() != b.shape()) {
    DT_ASSIGN_OR_RETURN(db, Reshape(db, b.shape()));
  }
  return InputGrads{std::move(da), std::move(db)};
}

// linear: dx = g W; dW = g^T x over the rows of all leading dims
// (linear_weight_grad, which keeps any sharding of them: a batch on dp and
// a sequence on cp give a Partial(sum) dW over both, where flattening them
// into rows would move the activations); dbias = g summed over them.
absl::StatusOr<InputGrads> LinearBackward(const BackwardCall& call) {
  const DTensor& x = call.inputs[0];
  const DTensor& w = call.inputs[1];
  const DTensor& g = call.grad_outputs[0];
  DT_ASSIGN_OR_RETURN(DTensor dx, Matmul(g, w));
  DT_ASSIGN_OR_RETURN(DTensor dw, LinearWeightGrad(g, x));
  InputGrads grads = {std::move(dx), std::move(dw), DTensor()};
  if (call.inputs[2].defined()) {
    DT_ASSIGN_OR_RETURN(grads[2], SumToShape(g, call.inputs[2].shape()));
  }
  return grads;
}

// linear_weight_grad (dW = g^T x over the rows): dg = x dW^T, dx = g dW.
absl::StatusOr<InputGrads> LinearWeightGradBackward(const BackwardCall& call) {
  const DTensor& dw = call.grad_outputs[0];
  DT_ASSIGN_OR_RETURN(DTensor dw_t, SwapLast(dw));
  DT_ASSIGN_OR_RETURN(DTensor dg, Matmul(call.inputs[1], dw_t));
  DT_ASSIGN_OR_RETURN(DTensor dx, Matmul(call.inputs[0], dw));
  return InputGrads{std::move(dg), std::move(dx)};
}

// addmm: dbias = beta g (summed to its shape), da = alpha g b^T,
// db = alpha a^T g.
absl::StatusOr<InputGrads> AddmmBackward(const BackwardCall& call) {
  const double beta = call.args.Get(kBeta);
  const double alpha = call.args.Get(kAlpha);
  DTensor g = call.grad_outputs[0];
  DT_ASSIGN_OR_RETURN(DTensor dbias, Mul(g, beta));
  DT_ASSIGN_OR_RETURN(dbias, SumToShape(dbias, call.inputs[0].shape()));
  if (alpha != 1) {
    DT_ASSIGN_OR_RETURN(g, Mul(g, alpha));
  }
  DT_ASSIGN_OR_RETURN(DTensor b_t, SwapLast(call.inputs[2]));
  DT_ASSIGN_OR_RETURN(DTensor da, Mm(g, b_t));
  DT_ASSIGN_OR_RETURN(DTensor a_t, SwapLast(call.inputs[1]));
  DT_ASSIGN_OR_RETURN(DTensor db, Mm(a_t, g));
  return InputGrads{std::move(dbias), std::move(da), std::move(db)};
}

// 2·K flops per output element, K the last dim of input `k_input` (the
// contracted one of every op of the family).
FlopsFn MatmulFlops(int k_input) {
  return [k_input](absl::Span<const Tensor> in, absl::Span<const Tensor> out,
                   const OpArgs&) {
    const Tensor& a = in[k_input];
    if (!a.defined() || a.dim() == 0 || out.empty()) return 0.0;
    return 2.0 * static_cast<double>(out[0].numel()) *
           static_cast<double>(a.size(-1));
  };
}

// `k_input`: the input whose last dim is contracted (MatmulFlops).
OpDef MatmulOp(absl::string_view name, absl::string_view summary,
               int num_inputs, int num_optional, absl::Span<const ArgSpec> args,
               ViewFn view_fn, LocalFn fn, BackwardFn backward,
               int k_input = 0) {
  OpDef def = NamedOpDef(name, summary, args);
  def.flops = MatmulFlops(k_input);
  def.num_inputs = num_inputs;
  def.num_optional_inputs = num_optional;
  def.infer =
      [name, view_fn, fn](
          absl::Span<const DTensorSpec* const> inputs,
          const OpArgs& args) -> absl::StatusOr<std::vector<TensorMeta>> {
    DT_ASSIGN_OR_RETURN(MatmulView view, view_fn(name, inputs));
    DT_ASSIGN_OR_RETURN(DType dtype, ProbeDType(name, fn, inputs, args));
    return std::vector<TensorMeta>{{std::move(view.out), dtype}};
  };
  def.strategies = [name, view_fn](const StrategyContext& ctx)
      -> absl::StatusOr<std::vector<OpStrategy>> {
    DT_ASSIGN_OR_RETURN(MatmulView view, view_fn(name, ctx.inputs));
    return EinsumStrategies(ctx, view.spec);
  };
  def.kernel = LocalKernel(std::move(fn));
  def.backward = std::move(backward);
  return def;
}

absl::StatusOr<Tensor> MatmulLocal(absl::Span<const Tensor> in, const OpArgs&) {
  return dtensor::Matmul(in[0], in[1]);
}

OpDef MakeMatmul() {
  return MatmulOp("matmul", "torch.matmul: 1-D..n-D, batch dims broadcast", 2,
                  0, {}, MatmulView2, MatmulLocal, MatmulBackward);
}

OpDef MakeMm() {
  return MatmulOp("mm", "[M, K] @ [K, N]", 2, 0, {}, MmView, MatmulLocal,
                  MatmulBackward);
}

OpDef MakeBmm() {
  return MatmulOp("bmm", "[B, M, K] @ [B, K, N]", 2, 0, {}, BmmView,
                  MatmulLocal, MatmulBackward);
}

OpDef MakeLinear() {
  return MatmulOp(
      "linear", "x [..., in] @ weight [out, in]^T + bias [out] (optional)", 3,
      1, {}, LinearView,
      [](absl::Span<const Tensor> in, const OpArgs&) {
        return dtensor::Linear(in[0], in[1], in[2]);
      },
      LinearBackward);
}

OpDef MakeLinearWeightGrad() {
  OpDef def = MatmulOp("linear_weight_grad",
                       "g [..., out], x [..., in] -> g^T x [out, in] summed "
                       "over the leading dims (linear's weight gradient)",
                       2, 0, {}, LinearWeightGradView, LinearWeightGradLocal,
                       LinearWeightGradBackward);
  // 2 flops per output element and row.
  def.flops = [](absl::Span<const Tensor> in, absl::Span<const Tensor> out,
                 const OpArgs&) {
    if (out.empty() || !in[0].defined() || in[0].dim() == 0) return 0.0;
    const int64_t rows = in[0].numel() / std::max<int64_t>(in[0].size(-1), 1);
    return 2.0 * static_cast<double>(out[0].numel()) *
           static_cast<double>(rows);
  };
  return def;
}

OpDef MakeAddmm() {
  return MatmulOp("addmm", "beta * bias + alpha * (a @ b) (inputs bias, a, b)",
                  3, 0, kAddmmArgs, AddmmView, AddmmLocal, AddmmBackward,
                  /*k_input=*/1);
}

const OpDef& MatmulDef() { return StaticOpDef<MakeMatmul>(); }
const OpDef& MmDef() { return StaticOpDef<MakeMm>(); }
const OpDef& BmmDef() { return StaticOpDef<MakeBmm>(); }
const OpDef& LinearDef() { return StaticOpDef<MakeLinear>(); }
const OpDef& AddmmDef() { return StaticOpDef<MakeAddmm>(); }
const OpDef& LinearWeightGradDef() {
  return StaticOpDef<MakeLinearWeightGrad>();
}

}  // namespace

absl::StatusOr<DTensor> Matmul(const DTensor& a, const DTensor& b) {
  const DTensor* in[] = {&a, &b};
  return DispatchOne(MatmulDef(), in, OpArgs());
}

absl::StatusOr<DTensor> Mm(const DTensor& a, const DTensor& b) {
  const DTensor* in[] = {&a, &b};
  return DispatchOne(MmDef(), in, OpArgs());
}

absl::StatusOr<DTensor> Bmm(const DTensor& a, const DTensor& b) {
  const DTensor* in[] = {&a, &b};
  return DispatchOne(BmmDef(), in, OpArgs());
}

absl::StatusOr<DTensor> Linear(const DTensor& x, const DTensor& weight,
                               const DTensor& bias) {
  const DTensor* in[] = {&x, &weight, &bias};
  return DispatchOne(LinearDef(), in, OpArgs());
}

absl::StatusOr<DTensor> Addmm(const DTensor& bias, const DTensor& a,
                              const DTensor& b, double beta, double alpha) {
  const DTensor* in[] = {&bias, &a, &b};
  OpArgs args;
  args.AddScalar(beta).AddScalar(alpha);
  return DispatchOne(AddmmDef(), in, args);
}

absl::StatusOr<DTensor> LinearWeightGrad(const DTensor& g, const DTensor& x) {
  const DTensor* in[] = {&g, &x};
  return DispatchOne(LinearWeightGradDef(), in, OpArgs());
}

std::vector<const OpDef*> MatmulOps() {
  return {&MatmulDef(), &MmDef(),    &BmmDef(),
          &LinearDef(), &AddmmDef(), &LinearWeightGradDef()};
}

}  // namespace ops
}  // namespace dtensor
