#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_BODY_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_BODY_H_

// The tiled attention (FlashAttention-2 style) of ScaledDotProductAttention
// and its backward (dtensor/tensor/attention.h), shared by the CUDA kernels
// (attention_kernels.cu) and the CPU (dtensor/tensor/attention.cc): no
// [Lq, Lk] matrix is ever made, only [query tile, key tile] blocks of scores.
//
// The forward walks the key tiles of a query tile with an online softmax
// (running max, sum and output accumulator per query row) and gives the
// output rows and their log-sum-exps. The backward recomputes the attention
// weights of a key tile from the log-sum-exps, p = exp(s - lse), and with
// delta = rowsum(dout * out) adds dv += p^T dout, dq += ds k, dk += ds^T q
// for ds = p (dout v^T - delta) * scale, walking the query tiles that see
// the key tile (dk, dv of the tile held by one worker group, dq added
// across key tiles).
//
// What a worker group does between barriers is split among its `lanes`
// workers, worker `lane` taking its share of the items: a CUDA block's threads
// separated by __syncthreads, or one host worker (lanes = 1, no barrier). The
// products of the tiles are a `Products` policy: on the device the staged
// shared-memory products of attention_blocks.h (StagedProducts, which also
// has the device kernels' blocks around these steps), on the host BLAS. Compute
// type C (float for f32, bf16 and f16; double for f64); scores are q.k
// before scaling.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/fast_exp.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// ---- The problem and its causal mask. ----

// One batch entry's sizes (q [lq, e], k [lk, e], v [lk, ev]), the mask and
// the scale (> 0, already resolved from the caller's).
template <typename C>
struct AttentionProblem {
  int64_t lq = 0;
  int64_t lk = 0;
  int64_t e = 0;
  int64_t ev = 0;
  bool causal = false;
  C scale = C(1);
};

DT_HOST_DEVICE inline int64_t MinOf(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// How many of the keys [k0, k0 + n) query `query` sees (a prefix of them:
// VisibleKeys in row_body.h).
template <typename C>
DT_HOST_DEVICE inline int64_t VisibleInTile(const AttentionProblem<C>& p,
                                            int64_t query, int64_t k0,
                                            int64_t n) {
  const int64_t visible = VisibleKeys(query, p.lq, p.lk, p.causal) - k0;
  return visible < 0 ? 0 : (visible > n ? n : visible);
}

// The keys [0, end) that some query of [q0, q0 + rows) sees: those its last
// query sees.
template <typename C>
DT_HOST_DEVICE inline int64_t KeysOfQueryTile(const AttentionProblem<C>& p,
                                              int64_t q0, int64_t rows) {
  return rows == 0 ? 0 : VisibleKeys(q0 + rows - 1, p.lq, p.lk, p.causal);
}

// The first query that sees key `key`; every later query sees it too.
template <typename C>
DT_HOST_DEVICE inline int64_t FirstQuerySeeing(const AttentionProblem<C>& p,
                                               int64_t key) {
  if (!p.causal) return 0;
  const int64_t first = key - (p.lk - p.lq);
  return first < 0 ? 0 : first;
}

// ---- Row and element bodies. ----

// A query row's softmax over the key tiles folded in so far: the largest
// scaled score and the sum of exp(score - max).
template <typename C>
struct SoftmaxRunning {
  C max;
  C sum;
};

template <typename C>
DT_HOST_DEVICE inline SoftmaxRunning<C> SoftmaxStart() {
  return {NegativeInfinity<C>(), C(0)};
}

// The largest of `init` and x[0..n) (MaxKeepingFirst) and the sum of
// x[0..n), each folded in kRowPartials interleaved partial results, so that
// the host compiler vectorizes the loops (one running result would fix the
// order of every step).
inline constexpr int kRowPartials = 8;

template <typename C>
DT_HOST_DEVICE inline C RowMax(const C* x, int64_t n, C init) {
  C part[kRowPartials];
  for (int u = 0; u < kRowPartials; ++u) part[u] = init;
  int64_t j = 0;
  for (; j + kRowPartials <= n; j += kRowPartials) {
    for (int u = 0; u < kRowPartials; ++u) {
      part[u] = MaxKeepingFirst(part[u], x[j + u]);
    }
  }
  for (; j < n; ++j) part[0] = MaxKeepingFirst(part[0], x[j]);
  for (int u = 1; u < kRowPartials; ++u)
    part[0] = MaxKeepingFirst(part[0], part[u]);
  return part[0];
}

template <typename C>
DT_HOST_DEVICE inline C RowSum(const C* x, int64_t n) {
  C part[kRowPartials] = {};
  int64_t j = 0;
  for (; j + kRowPartials <= n; j += kRowPartials) {
    for (int u = 0; u < kRowPartials; ++u) part[u] += x[j + u];
  }
  for (; j < n; ++j) part[0] += x[j];
  for (int u = 1; u < kRowPartials; ++u) part[0] += part[u];
  return part[0];
}

// row[j] = exp(row[j] - shift) for j < n, by FastExpOf: the device's form of
// the `exp_row` the bodies below take (the host passes the vectorized
// ExpShiftedInPlace of dtensor/tensor/vector_exp.h, which gives the same
// values).
struct ExpRowLoop {
  template <typename C>
  DT_HOST_DEVICE void operator()(C* row, int64_t n, C shift) const {
    for (int64_t j = 0; j < n; ++j) row[j] = FastExpOf(row[j] - shift);
  }
};

// Folds one key tile into a query row: `scores` [n] (q.k) becomes the tile's
// unnormalized weights exp(score * scale - max) for its first `visible` keys
// and 0 for the keys the query does not see, `running` takes the tile in,
// and the result is the factor by which the row's output accumulator must be
// multiplied before the tile's weighted values are added (1 for a tile the
// query does not see; 0 for the first tile it sees).
template <typename C, typename ExpRow>
DT_HOST_DEVICE inline C OnlineSoftmaxRow(C* scores, int64_t n, int64_t visible,
                                         C scale, SoftmaxRunning<C>& running,
                                         const ExpRow& exp_row) {
  for (int64_t j = 0; j < visible; ++j) scores[j] *= scale;
  for (int64_t j = visible; j < n; ++j) scores[j] = C(0);
  if (visible == 0) return C(1);
  const C max = RowMax(scores, visible, running.max);
  const C correction = FastExpOf(running.max - max);
  exp_row(scores, visible, max);
  running.max = max;
  running.sum = running.sum * correction + RowSum(scores, visible);
  return correction;
}

// The end of a query row: its accumulator `acc` [ev] divided by the softmax
// sum, all zeros for a query that saw no key (sum 0); returns the row's
// log-sum-exp of the scaled scores (-inf for such a query).
template <typename C>
DT_HOST_DEVICE inline C FinishRow(C* acc, int64_t ev,
                                  const SoftmaxRunning<C>& running) {
  const C inverse = running.sum == C(0) ? C(0) : C(1) / running.sum;
  for (int64_t c = 0; c < ev; ++c) acc[c] *= inverse;
  return running.sum == C(0) ? NegativeInfinity<C>()
                             : running.max + Log(running.sum);
}

// Worker `lane` of `lanes`'s share of RowDelta: the sum of dout * out over
// the row's elements lane, lane + lanes, ... (the device gives a row to a
// warp, whose lanes then read the row coalesced). The shares add up to
// RowDelta.
template <typename T>
DT_HOST_DEVICE inline Compute<T> RowDeltaShare(const T* dout, const T* out,
                                               int64_t ev, int lane,
                                               int lanes) {
  Compute<T> sum = 0;
  for (int64_t c = lane; c < ev; c += lanes) {
    sum += Load(dout[c]) * Load(out[c]);
  }
  return sum;
}

// delta = sum(dout * out) over a row of ev elements: the weights' share of
// the score gradient, ds = p (dp - delta).
template <typename T>
DT_HOST_DEVICE inline Compute<T> RowDelta(const T* dout, const T* out,
                                          int64_t ev) {
  return RowDeltaShare(dout, out, ev, 0, 1);
}

// One query row of a key tile in the backward, in place: the scores (q.k)
// become the weights p = exp(score * scale - lse), and the weights' gradients
// (dout.v) become the score gradients p (grad - delta) * scale (with the scale
// of q.k folded in, so that dq = ds k and dk = ds^T q); both 0 for the keys
// from `visible` on, which the query does not see. Worker `lane` of `lanes`
// takes the lane-th of `lanes` consecutive runs of keys (one key each when
// lanes == n; the whole row, a loop the host vectorizes, when lanes == 1).
template <typename C, typename ExpRow>
DT_HOST_DEVICE inline void GradRow(C* scores, C* grads, int64_t n,
                                   int64_t visible, C scale, C lse, C delta,
                                   const ExpRow& exp_row, int lane, int lanes) {
  const int64_t begin = n * lane / lanes;
  const int64_t end = n * (lane + 1) / lanes;
  const int64_t seen =
      visible < end ? (visible > begin ? visible : begin) : end;
  for (int64_t j = begin; j < seen; ++j) scores[j] *= scale;
  exp_row(scores + begin, seen - begin, lse);
  for (int64_t j = begin; j < seen; ++j) {
    grads[j] = scores[j] * (grads[j] - delta) * scale;
  }
  for (int64_t j = seen; j < end; ++j) {
    scores[j] = C(0);
    grads[j] = C(0);
  }
}

// Calls fn(r, sub_lane, sub_lanes) once for every row r < rows of a tile of
// n >= 1 columns: the workers form groups of at most n, each group taking a
// row at a time, so that every worker has a column when there are more
// workers than columns.
template <typename Fn>
DT_HOST_DEVICE inline void ForRowsInGroups(int64_t rows, int64_t n, int lane,
                                           int lanes, const Fn& fn) {
  const int groups = lanes > n ? static_cast<int>(lanes / n) : 1;
  const int group_lanes = lanes / groups;
  const int group = lane / group_lanes;
  if (group >= groups) return;
  for (int64_t r = group; r < rows; r += groups) {
    fn(r, lane % group_lanes, group_lanes);
  }
}

// ---- Tile products. ----

// A product operand read as a matrix: element (i, l) at
// data[i * i_stride + l * l_stride].
template <typename C>
struct TileOperand {
  const C* data;
  int64_t i_stride;
  int64_t l_stride;
  DT_HOST_DEVICE C operator()(int64_t i, int64_t l) const {
    return data[i * i_stride + l * l_stride];
  }
};

inline constexpr int kMicroTile = 4;

// sink(i, j, sum over l < depth of a(i, l) b(j, l)) once for every i < m,
// j < n. Each worker takes kMicroTile x kMicroTile blocks of outputs, so that
// a loaded element serves kMicroTile products.
template <typename C, typename Sink>
DT_HOST_DEVICE inline void TileProduct(TileOperand<C> a, TileOperand<C> b,
                                       int64_t m, int64_t n, int64_t depth,
                                       const Sink& sink, int lane, int lanes) {
  const int64_t col_blocks = (n + kMicroTile - 1) / kMicroTile;
  const int64_t blocks = (m + kMicroTile - 1) / kMicroTile * col_blocks;
  for (int64_t block = lane; block < blocks; block += lanes) {
    const int64_t i0 = block / col_blocks * kMicroTile;
    const int64_t j0 = block % col_blocks * kMicroTile;
    C sum[kMicroTile][kMicroTile] = {};
    for (int64_t l = 0; l < depth; ++l) {
      C av[kMicroTile];
      C bv[kMicroTile];
      for (int x = 0; x < kMicroTile; ++x) {
        av[x] = i0 + x < m ? a(i0 + x, l) : C(0);
        bv[x] = j0 + x < n ? b(j0 + x, l) : C(0);
      }
      for (int x = 0; x < kMicroTile; ++x) {
        for (int y = 0; y < kMicroTile; ++y) sum[x][y] += av[x] * bv[y];
      }
    }
    for (int x = 0; x < kMicroTile && i0 + x < m; ++x) {
      for (int y = 0; y < kMicroTile && j0 + y < n; ++y) {
        sink(i0 + x, j0 + y, sum[x][y]);
      }
    }
  }
}

// ---- The tile steps, shared by the device kernels and the host. ----

// The workers of one group: `sync` waits for all of them.
template <typename Sync>
struct Lanes {
  int lane;
  int lanes;
  Sync sync;
};

// What a Products policy provides, for the operands of one batch entry
// (q [lq, e], k [lk, e], v [lk, ev], dout [lq, ev]); every call starts and
// ends with the group synchronized, and `w` splits its work:
//   Scores(q0, rows, k0, n, s, ss, w)       s = q[q0:] k[k0:]^T  [rows, n]
//   ProbGrads(q0, rows, k0, n, dp, ss, w)   dp = dout[q0:] v[k0:]^T
//   Accumulate(rows, k0, n, p, ss, corr, acc, as, w)
//                                           acc = acc * corr (per row)
//                                                 + p v[k0:]  [rows, ev]
//   AddTransposedTimes(rows, n, a, ss, src, cols, dst, dst_stride, w)
//                                           dst += a^T src  [n, cols]
//   AddQueryGrads(q0, rows, k0, n, ds, ss, w)       dq[q0:] += ds k[k0:]
// (p, a, ds: [rows, n] with row stride ss; src: `rows` rows of one of the
// operands, `cols` wide: the key and value gradients are dk += ds^T q[q0:]
// and dv += p^T dout[q0:]; dq: the policy's own accumulator), and a member
// `exp_row` of the interface of ExpRowLoop, for the bodies above. The
// operands themselves are the policy's member `in`, an AttentionEntry.

// One batch entry's operands, contiguous rows: q [lq, e], k [lk, e],
// v [lk, ev], dout [lq, ev] in the storage type T, and the query gradients'
// accumulator dq [lq, e] in the compute type C (dout and dq are null in a
// forward).
template <typename T, typename C>
struct AttentionEntry {
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  C* dq;
  int64_t e;
  int64_t ev;
};

// A query tile's working buffers: scores [rows][score_stride], the rows'
// running softmax and correction factors, and the output accumulator
// [rows][acc_stride] (ev columns).
template <typename C>
struct ForwardTile {
  C* scores;
  int64_t score_stride;
  SoftmaxRunning<C>* running;
  C* correction;
  C* acc;
  int64_t acc_stride;
};

// The forward of the queries [q0, q0 + rows) over the keys they see,
// `key_tile` keys at a time: acc gets their output rows (unless
// !accumulate, which leaves acc alone and gives the log-sum-exps only, for
// the backward) and lse [rows] their log-sum-exps.
template <typename C, typename Products, typename Sync>
DT_HOST_DEVICE void ForwardQueryTile(const AttentionProblem<C>& p, int64_t q0,
                                     int64_t rows, int64_t key_tile,
                                     const ForwardTile<C>& t, C* lse,
                                     bool accumulate, Products& products,
                                     const Lanes<Sync>& w) {
  const int64_t ev = accumulate ? p.ev : 0;
  for (int64_t x = w.lane; x < rows * ev; x += w.lanes) {
    t.acc[x / ev * t.acc_stride + x % ev] = C(0);
  }
  for (int64_t r = w.lane; r < rows; r += w.lanes) {
    t.running[r] = SoftmaxStart<C>();
  }
  w.sync();
  const int64_t keys = KeysOfQueryTile(p, q0, rows);
  for (int64_t k0 = 0; k0 < keys; k0 += key_tile) {
    const int64_t n = MinOf(key_tile, keys - k0);
    products.Scores(q0, rows, k0, n, t.scores, t.score_stride, w);
    for (int64_t r = w.lane; r < rows; r += w.lanes) {
      t.correction[r] = OnlineSoftmaxRow(
          t.scores + r * t.score_stride, n, VisibleInTile(p, q0 + r, k0, n),
          p.scale, t.running[r], products.exp_row);
    }
    w.sync();
    if (accumulate) {
      products.Accumulate(rows, k0, n, t.scores, t.score_stride, t.correction,
                          t.acc, t.acc_stride, w);
    }
  }
  for (int64_t r = w.lane; r < rows; r += w.lanes) {
    C* row = accumulate ? t.acc + r * t.acc_stride : nullptr;
    lse[r] = FinishRow(row, ev, t.running[r]);
  }
  w.sync();
}

// A key tile's working buffers: scores and their gradients [query tile
// rows][stride], and the tile's key and value gradients dk [n][dk_stride],
// dv [n][dv_stride], which the caller zeroes and collects.
template <typename C>
struct BackwardTile {
  C* scores;
  C* grads;
  int64_t stride;
  C* dk;
  int64_t dk_stride;
  C* dv;
  int64_t dv_stride;
};

// The backward of the keys [k0, k0 + n) over the queries that see them,
// `query_tile` rows at a time: adds the tile's gradients to t.dk and t.dv,
// and the queries' gradients from these keys through `products`. lse and
// delta [lq]: each query's log-sum-exp (ForwardQueryTile) and
// sum(dout * out) (RowDelta).
template <typename C, typename Products, typename Sync>
DT_HOST_DEVICE void BackwardKeyTile(const AttentionProblem<C>& p, int64_t k0,
                                    int64_t n, int64_t query_tile,
                                    const BackwardTile<C>& t, const C* lse,
                                    const C* delta, Products& products,
                                    const Lanes<Sync>& w) {
  for (int64_t q0 = FirstQuerySeeing(p, k0); q0 < p.lq; q0 += query_tile) {
    const int64_t rows = MinOf(query_tile, p.lq - q0);
    products.Scores(q0, rows, k0, n, t.scores, t.stride, w);
    products.ProbGrads(q0, rows, k0, n, t.grads, t.stride, w);
    ForRowsInGroups(
        rows, n, w.lane, w.lanes, [&](int64_t r, int sub_lane, int sub_lanes) {
          GradRow(t.scores + r * t.stride, t.grads + r * t.stride, n,
                  VisibleInTile(p, q0 + r, k0, n), p.scale, lse[q0 + r],
                  delta[q0 + r], products.exp_row, sub_lane, sub_lanes);
        });
    w.sync();
    products.AddTransposedTimes(rows, n, t.scores, t.stride,
                                products.in.dout + q0 * p.ev, p.ev, t.dv,
                                t.dv_stride, w);
    products.AddTransposedTimes(rows, n, t.grads, t.stride,
                                products.in.q + q0 * p.e, p.e, t.dk,
                                t.dk_stride, w);
    products.AddQueryGrads(q0, rows, k0, n, t.grads, t.stride, w);
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_BODY_H_
