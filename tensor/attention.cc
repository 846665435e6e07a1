// ScaledDotProductAttention (declared in nn_functional.h) and its backward
// (attention.h): argument checks, then the tiled passes of
// dtensor/tensor/cuda/attention_body.h on the host, or the CUDA kernels.
#include "dtensor/tensor/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/attention_cuda.h"
#include "dtensor/tensor/blas_gemm.h"
#include "dtensor/tensor/cuda/attention_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/vector_exp.h"

namespace dtensor {
namespace {

using internal::CheckFloatingOn;
using internal::CheckSameDType;

constexpr char kForward[] = "ScaledDotProductAttention";
constexpr char kBackward[] = "ScaledDotProductAttentionBackward";

// The host's tiles: a query tile of kHostQueryTile rows against
// kHostKeyTile keys at a time. Wider than the device's, so that each BLAS
// call has enough work; the [query tile, key tile] buffers stay in cache
// (bench/kernels_bench.cc BM_Attention*, docs/performance.md).
constexpr int64_t kHostQueryTile = 64;
constexpr int64_t kHostKeyTile = 256;

// The shapes of one attention call: the broadcast batch of q, k, v and the
// output [batch..., Lq, Ev].
struct AttentionShapes {
  Shape batch;
  Shape out;
};

// The shapes of q, k, v after checking their devices, dtypes and shapes;
// errors name `op`.
absl::StatusOr<AttentionShapes> CheckAttention(const Tensor& q, const Tensor& k,
                                               const Tensor& v,
                                               const char* op) {
  const Device device = q.defined() ? q.device() : Device::CPU();
  DT_RETURN_IF_ERROR(CheckFloatingOn(q, device, op, "q"));
  DT_RETURN_IF_ERROR(CheckFloatingOn(k, device, op, "k"));
  DT_RETURN_IF_ERROR(CheckFloatingOn(v, device, op, "v"));
  DT_RETURN_IF_ERROR(CheckSameDType(q, k, op, "q", "k"));
  DT_RETURN_IF_ERROR(CheckSameDType(q, v, op, "q", "v"));
  AttentionShapes shapes;
  DT_ASSIGN_OR_RETURN(
      shapes.out, AttentionOutputShape(q.shape(), k.shape(), v.shape(), op));
  shapes.batch.assign(shapes.out.begin(), shapes.out.end() - 2);
  return shapes;
}

// `t` (out or grad_out of the backward) has the output's shape and q's
// dtype and device.
absl::Status CheckLikeOutput(const Tensor& t, const Tensor& q,
                             const Shape& shape, const char* arg) {
  DT_RETURN_IF_ERROR(CheckFloatingOn(t, q.device(), kBackward, arg));
  DT_RETURN_IF_ERROR(CheckSameDType(q, t, kBackward, "q", arg));
  if (t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        kBackward, ": ", arg, " has shape ", ShapeToString(t.shape()),
        "; the output's is ", ShapeToString(shape)));
  }
  return absl::OkStatus();
}

// ---- The host passes. ----

struct NoSync {
  void operator()() const {}
};
using HostLanes = cuda::Lanes<NoSync>;
constexpr HostLanes kOneWorker{0, 1, NoSync()};

// c = a b + beta c (a: m x depth, b: depth x n, as stored or transposed) on
// BLAS, beta 0 (c is overwritten) or 1; zero sizes (which BLAS does not
// take) give the empty sum.
template <typename C>
void Product(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int64_t m,
             int64_t n, int64_t depth, const C* a, int64_t lda, const C* b,
             int64_t ldb, C beta, C* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (depth == 0) {
    if (beta != C(0)) return;
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0);
    return;
  }
  internal::BlasGemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n),
                     static_cast<int>(depth), a, static_cast<int>(lda), b,
                     static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// The exp of a row on the host: the vectorized loop of vector_exp.h.
struct HostExpRow {
  template <typename C>
  void operator()(C* row, int64_t n, C shift) const {
    ExpShiftedInPlace(row, n, shift);
  }
};

// The Products of attention_body.h on the host: one batch entry's operands
// (all in the compute type) multiplied by BLAS.
template <typename C>
struct BlasProducts {
  cuda::AttentionEntry<C, C> in;
  HostExpRow exp_row;

  void Scores(int64_t q0, int64_t rows, int64_t k0, int64_t n, C* s, int64_t ss,
              const HostLanes&) const {
    Product<C>(CblasNoTrans, CblasTrans, rows, n, in.e, in.q + q0 * in.e, in.e,
               in.k + k0 * in.e, in.e, 0, s, ss);
  }
  void ProbGrads(int64_t q0, int64_t rows, int64_t k0, int64_t n, C* dp,
                 int64_t ss, const HostLanes&) const {
    Product<C>(CblasNoTrans, CblasTrans, rows, n, in.ev, in.dout + q0 * in.ev,
               in.ev, in.v + k0 * in.ev, in.ev, 0, dp, ss);
  }
  void Accumulate(int64_t rows, int64_t k0, int64_t n, const C* p, int64_t ss,
                  const C* correction, C* acc, int64_t as,
                  const HostLanes&) const {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t c = 0; c < in.ev; ++c) acc[i * as + c] *= correction[i];
    }
    Product<C>(CblasNoTrans, CblasNoTrans, rows, in.ev, n, p, ss,
               in.v + k0 * in.ev, in.ev, 1, acc, as);
  }
  void AddTransposedTimes(int64_t rows, int64_t n, const C* a, int64_t ss,
                          const C* src, int64_t cols, C* dst,
                          int64_t dst_stride, const HostLanes&) const {
    Product<C>(CblasTrans, CblasNoTrans, n, cols, rows, a, ss, src, cols, 1,
               dst, dst_stride);
  }
  void AddQueryGrads(int64_t q0, int64_t rows, int64_t k0, int64_t n,
                     const C* ds, int64_t ss, const HostLanes&) const {
    Product<C>(CblasNoTrans, CblasNoTrans, rows, in.e, n, ds, ss,
               in.k + k0 * in.e, in.e, 1, in.dq + q0 * in.e, in.e);
  }
};

// For each output batch entry (row-major over `batch`), the index of the
// matrix of an operand of `shape` [batch'..., rows, cols] (batch' broadcast
// to `batch`) in the operand's own row-major order.
std::vector<int64_t> MatrixOfEntry(const Shape& shape, const Shape& batch) {
  const int64_t out_dims = static_cast<int64_t>(batch.size());
  const int64_t own_dims = static_cast<int64_t>(shape.size()) - 2;
  std::vector<int64_t> stride(out_dims, 0);
  int64_t matrices = 1;
  for (int64_t d = own_dims - 1; d >= 0; --d) {
    if (shape[d] != 1) stride[out_dims - own_dims + d] = matrices;
    matrices *= shape[d];
  }
  std::vector<int64_t> index(NumElements(batch), 0);
  for (int64_t entry = 0; entry < static_cast<int64_t>(index.size()); ++entry) {
    for (int64_t d = out_dims - 1, rest = entry; d >= 0; --d) {
      index[entry] += rest % batch[d] * stride[d];
      rest /= batch[d];
    }
  }
  return index;
}

// Contiguous compute-type q, k, v (C), and where each batch entry finds its
// matrices.
template <typename C>
struct HostOperands {
  cuda::AttentionProblem<C> problem;
  Tensor q;
  Tensor k;
  Tensor v;
  std::vector<int64_t> q_matrix;
  std::vector<int64_t> k_matrix;
  std::vector<int64_t> v_matrix;

  const C* QueryOf(int64_t entry) const {
    return q.data<C>() + q_matrix[entry] * problem.lq * problem.e;
  }
  const C* KeyOf(int64_t entry) const {
    return k.data<C>() + k_matrix[entry] * problem.lk * problem.e;
  }
  const C* ValueOf(int64_t entry) const {
    return v.data<C>() + v_matrix[entry] * problem.lk * problem.ev;
  }
};

template <typename C>
absl::StatusOr<HostOperands<C>> HostOperandsOf(const Tensor& q, const Tensor& k,
                                               const Tensor& v,
                                               const Shape& batch, bool causal,
                                               double scale) {
  HostOperands<C> in;
  in.problem = {q.size(-2), k.size(-2), q.size(-1),
                v.size(-1), causal,     static_cast<C>(scale)};
  const DType dtype = CppToDType<C>();
  DT_ASSIGN_OR_RETURN(in.q, q.To(dtype));
  DT_ASSIGN_OR_RETURN(in.k, k.To(dtype));
  DT_ASSIGN_OR_RETURN(in.v, v.To(dtype));
  in.q = in.q.Contiguous();
  in.k = in.k.Contiguous();
  in.v = in.v.Contiguous();
  in.q_matrix = MatrixOfEntry(q.shape(), batch);
  in.k_matrix = MatrixOfEntry(k.shape(), batch);
  in.v_matrix = MatrixOfEntry(v.shape(), batch);
  return in;
}

// The forward over every batch entry: out [entries, lq, ev] (null: the
// log-sum-exps alone) and lse [entries, lq].
template <typename C>
void ForwardOnHost(const HostOperands<C>& in, C* out, C* lse) {
  const cuda::AttentionProblem<C>& p = in.problem;
  std::vector<C> scores(kHostQueryTile * kHostKeyTile);
  std::vector<cuda::SoftmaxRunning<C>> running(kHostQueryTile);
  std::vector<C> correction(kHostQueryTile);
  for (int64_t entry = 0; entry < static_cast<int64_t>(in.q_matrix.size());
       ++entry) {
    const BlasProducts<C> products{
        {in.QueryOf(entry), in.KeyOf(entry), in.ValueOf(entry), nullptr,
         nullptr, p.e, p.ev},
        HostExpRow()};
    for (int64_t q0 = 0; q0 < p.lq; q0 += kHostQueryTile) {
      const int64_t first_row = entry * p.lq + q0;
      const cuda::ForwardTile<C> tile{
          scores.data(),
          kHostKeyTile,
          running.data(),
          correction.data(),
          out == nullptr ? nullptr : out + first_row * p.ev,
          p.ev};
      cuda::ForwardQueryTile(p, q0, std::min(kHostQueryTile, p.lq - q0),
                             kHostKeyTile, tile, lse + first_row,
                             out != nullptr, products, kOneWorker);
    }
  }
}

// The shape of the log-sum-exps of an attention of output shape `out`.
Shape LseShapeOf(const Shape& out) { return Shape(out.begin(), out.end() - 1); }

template <typename C>
absl::StatusOr<AttentionWithLse> AttentionOnHost(const Tensor& q,
                                                 const Tensor& k,
                                                 const Tensor& v,
                                                 const AttentionShapes& shapes,
                                                 bool causal, double scale) {
  DT_ASSIGN_OR_RETURN(const HostOperands<C> in,
                      HostOperandsOf<C>(q, k, v, shapes.batch, causal, scale));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shapes.out, CppToDType<C>()));
  AttentionWithLse result;
  DT_ASSIGN_OR_RETURN(result.lse,
                      Tensor::Empty(LseShapeOf(shapes.out), CppToDType<C>()));
  ForwardOnHost(in, out.data<C>(), result.lse.data<C>());
  DT_ASSIGN_OR_RETURN(result.out, out.To(q.dtype()));
  return result;
}

// The backward over every batch entry, adding into dq, dk, dv (contiguous,
// of q's, k's and v's shapes) given out and dout [entries, lq, ev] and the
// rows' log-sum-exps `given_lse` (null: computed here).
template <typename C>
void BackwardOnHost(const HostOperands<C>& in, const C* out, const C* dout,
                    const C* given_lse, C* dq, C* dk, C* dv) {
  const cuda::AttentionProblem<C>& p = in.problem;
  const int64_t entries = static_cast<int64_t>(in.q_matrix.size());
  std::vector<C> computed_lse;
  const C* lse = given_lse;
  if (lse == nullptr) {
    computed_lse.resize(entries * p.lq);
    ForwardOnHost<C>(in, /*out=*/nullptr, computed_lse.data());
    lse = computed_lse.data();
  }
  std::vector<C> delta(entries * p.lq);
  for (int64_t r = 0; r < entries * p.lq; ++r) {
    delta[r] = cuda::RowDelta(dout + r * p.ev, out + r * p.ev, p.ev);
  }
  std::vector<C> scores(kHostQueryTile * kHostKeyTile);
  std::vector<C> grads(kHostQueryTile * kHostKeyTile);
  for (int64_t entry = 0; entry < entries; ++entry) {
    const BlasProducts<C> products{
        {in.QueryOf(entry), in.KeyOf(entry), in.ValueOf(entry),
         dout + entry * p.lq * p.ev, dq + in.q_matrix[entry] * p.lq * p.e, p.e,
         p.ev},
        HostExpRow()};
    C* entry_dk = dk + in.k_matrix[entry] * p.lk * p.e;
    C* entry_dv = dv + in.v_matrix[entry] * p.lk * p.ev;
    for (int64_t k0 = 0; k0 < p.lk; k0 += kHostKeyTile) {
      const cuda::BackwardTile<C> tile{scores.data(), grads.data(),
                                       kHostKeyTile,  entry_dk + k0 * p.e,
                                       p.e,           entry_dv + k0 * p.ev,
                                       p.ev};
      cuda::BackwardKeyTile(p, k0, std::min(kHostKeyTile, p.lk - k0),
                            kHostQueryTile, tile, lse + entry * p.lq,
                            delta.data() + entry * p.lq, products, kOneWorker);
    }
  }
}

template <typename C>
absl::StatusOr<AttentionGrads> AttentionBackwardOnHost(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor* lse, const Shape& batch, bool causal,
    double scale) {
  DT_ASSIGN_OR_RETURN(const HostOperands<C> in,
                      HostOperandsOf<C>(q, k, v, batch, causal, scale));
  const DType dtype = CppToDType<C>();
  DT_ASSIGN_OR_RETURN(Tensor out_c, out.To(dtype));
  DT_ASSIGN_OR_RETURN(Tensor dout_c, grad_out.To(dtype));
  out_c = out_c.Contiguous();
  dout_c = dout_c.Contiguous();
  DT_ASSIGN_OR_RETURN(Tensor dq, Tensor::Zeros(q.shape(), dtype));
  DT_ASSIGN_OR_RETURN(Tensor dk, Tensor::Zeros(k.shape(), dtype));
  DT_ASSIGN_OR_RETURN(Tensor dv, Tensor::Zeros(v.shape(), dtype));
  const Tensor lse_c = lse == nullptr ? Tensor() : lse->Contiguous();
  BackwardOnHost(in, out_c.data<C>(), dout_c.data<C>(),
                 lse == nullptr ? nullptr : lse_c.data<C>(), dq.data<C>(),
                 dk.data<C>(), dv.data<C>());
  AttentionGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dq, dq.To(q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dk, dk.To(q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dv, dv.To(q.dtype()));
  return grads;
}

// The forward of ScaledDotProductAttention[WithLse]: lse undefined when not
// `need_lse` and the device path did not make it.
absl::StatusOr<AttentionWithLse> AttentionForward(const Tensor& q,
                                                  const Tensor& k,
                                                  const Tensor& v, bool causal,
                                                  double scale, bool need_lse) {
  DT_ASSIGN_OR_RETURN(const AttentionShapes shapes,
                      CheckAttention(q, k, v, kForward));
  const double effective = AttentionScale(scale, q.size(-1));
  if (cuda::OnCuda(q)) {
    return cuda::AttentionForwardOnDevice(q, k, v, shapes.batch, causal,
                                          effective, need_lse);
  }
  return ComputeDTypeOf(q.dtype()) == DType::kF64
             ? AttentionOnHost<double>(q, k, v, shapes, causal, effective)
             : AttentionOnHost<float>(q, k, v, shapes, causal, effective);
}

// `lse` (the backward's given log-sum-exps) has the rows' shape and the
// compute dtype, on q's device.
absl::Status CheckLse(const Tensor& lse, const Tensor& q, const Shape& out) {
  DT_RETURN_IF_ERROR(CheckFloatingOn(lse, q.device(), kBackward, "lse"));
  const Shape rows = LseShapeOf(out);
  if (lse.shape() != rows || lse.dtype() != AttentionLseDType(q.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        kBackward, ": lse is ", std::string(DTypeName(lse.dtype())), " ",
        ShapeToString(lse.shape()), "; expected ",
        std::string(DTypeName(AttentionLseDType(q.dtype()))), " ",
        ShapeToString(rows)));
  }
  return absl::OkStatus();
}

// The backward, with the rows' log-sum-exps given (`lse`) or recomputed
// (null).
absl::StatusOr<AttentionGrads> AttentionBackward(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor* lse, bool causal, double scale) {
  DT_ASSIGN_OR_RETURN(const AttentionShapes shapes,
                      CheckAttention(q, k, v, kBackward));
  const Shape& batch = shapes.batch;
  DT_RETURN_IF_ERROR(CheckLikeOutput(out, q, shapes.out, "out"));
  DT_RETURN_IF_ERROR(CheckLikeOutput(grad_out, q, shapes.out, "grad_out"));
  if (lse != nullptr) DT_RETURN_IF_ERROR(CheckLse(*lse, q, shapes.out));
  const double effective = AttentionScale(scale, q.size(-1));
  if (cuda::OnCuda(q)) {
    return cuda::AttentionBackwardOnDevice(q, k, v, out, grad_out, lse, batch,
                                           causal, effective);
  }
  return ComputeDTypeOf(q.dtype()) == DType::kF64
             ? AttentionBackwardOnHost<double>(q, k, v, out, grad_out, lse,
                                               batch, causal, effective)
             : AttentionBackwardOnHost<float>(q, k, v, out, grad_out, lse,
                                              batch, causal, effective);
}

}  // namespace

absl::StatusOr<Shape> AttentionOutputShape(const Shape& q, const Shape& k,
                                           const Shape& v,
                                           absl::string_view op) {
  const auto shapes = [&] {
    return absl::StrCat("q ", ShapeToString(q), ", k ", ShapeToString(k),
                        ", v ", ShapeToString(v));
  };
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": operands need at least 2 dims, got ", shapes()));
  }
  if (q.back() != k.back() || k[k.size() - 2] != v[v.size() - 2]) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": need q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev], "
                     "got ",
                     shapes()));
  }
  const auto batch_of = [](const Shape& s) {
    return absl::MakeConstSpan(s).subspan(0, s.size() - 2);
  };
  absl::StatusOr<Shape> batch = BroadcastShapes(batch_of(q), batch_of(k));
  if (batch.ok()) batch = BroadcastShapes(*batch, batch_of(v));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": leading dims do not broadcast: ", shapes()));
  }
  Shape out = *std::move(batch);
  out.push_back(q[q.size() - 2]);
  out.push_back(v.back());
  return out;
}

double AttentionScale(double scale, int64_t e) {
  if (scale > 0) return scale;
  return e > 0 ? 1.0 / std::sqrt(static_cast<double>(e)) : 1.0;
}

DType AttentionLseDType(DType dtype) {
  return ComputeDTypeOf(dtype) == DType::kF64 ? DType::kF64 : DType::kF32;
}

absl::StatusOr<AttentionWithLse> ScaledDotProductAttentionWithLse(
    const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
    double scale) {
  return AttentionForward(q, k, v, causal, scale, /*need_lse=*/true);
}

absl::StatusOr<Tensor> ScaledDotProductAttention(const Tensor& q,
                                                 const Tensor& k,
                                                 const Tensor& v, bool causal,
                                                 double scale) {
  DT_ASSIGN_OR_RETURN(AttentionWithLse result,
                      AttentionForward(q, k, v, causal, scale,
                                       /*need_lse=*/false));
  return std::move(result.out);
}

absl::StatusOr<AttentionGrads> ScaledDotProductAttentionBackward(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, bool causal, double scale) {
  return AttentionBackward(q, k, v, out, grad_out, /*lse=*/nullptr, causal,
                           scale);
}

absl::StatusOr<AttentionGrads> ScaledDotProductAttentionBackwardWithLse(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Tensor& lse, bool causal, double scale) {
  return AttentionBackward(q, k, v, out, grad_out, &lse, causal, scale);
}

}  // namespace dtensor
