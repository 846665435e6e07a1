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
// shared-memory products below (StagedProducts), on the host BLAS. Compute
// type C (float for f32, bf16 and f16; double for f64); scores are q.k
// before scaling.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/fast_exp.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// ---- Tiles of the device kernels. ----

// A block holds kQueries query rows against kKeys keys (kAttentionThreads
// threads), staging its operands' head dims kAttentionDimChunk columns at a
// time. Half the rows for double, whose elements take twice the shared
// memory.
template <typename C>
struct AttentionTiles {
  static constexpr int kQueries = sizeof(C) == 4 ? 64 : 32;
  static constexpr int kKeys = kQueries;
};
inline constexpr int kAttentionThreads = 256;
inline constexpr int kAttentionDimChunk = 32;
// The row stride of a staged chunk: one more than its width, so that the
// workers reading down a column hit distinct shared-memory banks.
inline constexpr int kAttentionStageStride = kAttentionDimChunk + 1;

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

// delta = sum(dout * out) over a row of ev elements: the weights' share of
// the score gradient, ds = p (dp - delta).
template <typename T>
DT_HOST_DEVICE inline Compute<T> RowDelta(const T* dout, const T* out,
                                          int64_t ev) {
  Compute<T> sum = 0;
  for (int64_t c = 0; c < ev; ++c) sum += Load(dout[c]) * Load(out[c]);
  return sum;
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

// ---- The device products: operands staged through shared memory. ----

// dst [rows][kAttentionStageStride] = columns [c0, c0 + width) of the rows
// of src (storage type T, row stride `row_stride`), in the compute type;
// width <= kAttentionDimChunk. Consecutive workers read consecutive columns.
template <typename T, typename C>
DT_HOST_DEVICE inline void StageColumns(const T* src, int64_t row_stride,
                                        int64_t rows, int64_t c0, int64_t width,
                                        C* dst, int lane, int lanes) {
  for (int64_t x = lane; x < rows * kAttentionDimChunk; x += lanes) {
    const int64_t r = x / kAttentionDimChunk;
    const int64_t c = x % kAttentionDimChunk;
    if (c < width) {
      dst[r * kAttentionStageStride + c] = Load(src[r * row_stride + c0 + c]);
    }
  }
}

// The Products of the device kernels over one batch entry's operands in
// global memory, staged a chunk of head dims at a time into stage_a and
// stage_b ([tile rows][stage stride] each); the query gradients go to dq
// through `add` (atomicAdd on the device: key tiles of several blocks add to
// one query).
template <typename T, typename C, typename Add>
struct StagedProducts {
  AttentionEntry<T, C> in;
  C* stage_a;
  C* stage_b;
  Add add;
  ExpRowLoop exp_row;

  // out[i][j] = sum over the `depth` columns of a_rows[i] . b_rows[j], the
  // rows staged chunk by chunk; zeros for depth 0.
  template <typename Sync>
  DT_HOST_DEVICE void RowProducts(const T* a_rows, int64_t m, const T* b_rows,
                                  int64_t n, int64_t depth, C* out,
                                  int64_t out_stride,
                                  const Lanes<Sync>& w) const {
    if (depth == 0) {
      for (int64_t x = w.lane; x < m * n; x += w.lanes) {
        out[x / n * out_stride + x % n] = C(0);
      }
      w.sync();
    }
    for (int64_t c0 = 0; c0 < depth; c0 += kAttentionDimChunk) {
      const int64_t width = MinOf(kAttentionDimChunk, depth - c0);
      StageColumns(a_rows, depth, m, c0, width, stage_a, w.lane, w.lanes);
      StageColumns(b_rows, depth, n, c0, width, stage_b, w.lane, w.lanes);
      w.sync();
      const bool first = c0 == 0;
      TileProduct(
          TileOperand<C>{stage_a, kAttentionStageStride, 1},
          TileOperand<C>{stage_b, kAttentionStageStride, 1}, m, n, width,
          [&](int64_t i, int64_t j, C value) {
            C& slot = out[i * out_stride + j];
            slot = first ? value : slot + value;
          },
          w.lane, w.lanes);
      w.sync();
    }
  }

  // sink(i, c, sum over l < depth of a(i, l) * src[l][c]) for i < m and the
  // `cols` columns of the rows [0, depth) of src (row stride `cols`), staged
  // a chunk of columns at a time.
  template <typename Sync, typename Sink>
  DT_HOST_DEVICE void TimesRows(TileOperand<C> a, int64_t m, int64_t depth,
                                const T* src, int64_t cols, const Sink& sink,
                                const Lanes<Sync>& w) const {
    for (int64_t c0 = 0; c0 < cols; c0 += kAttentionDimChunk) {
      const int64_t width = MinOf(kAttentionDimChunk, cols - c0);
      StageColumns(src, cols, depth, c0, width, stage_b, w.lane, w.lanes);
      w.sync();
      TileProduct(
          a, TileOperand<C>{stage_b, 1, kAttentionStageStride}, m, width, depth,
          [&](int64_t i, int64_t c, C value) { sink(i, c0 + c, value); },
          w.lane, w.lanes);
      w.sync();
    }
  }

  template <typename Sync>
  DT_HOST_DEVICE void Scores(int64_t q0, int64_t rows, int64_t k0, int64_t n,
                             C* s, int64_t ss, const Lanes<Sync>& w) const {
    RowProducts(in.q + q0 * in.e, rows, in.k + k0 * in.e, n, in.e, s, ss, w);
  }

  template <typename Sync>
  DT_HOST_DEVICE void ProbGrads(int64_t q0, int64_t rows, int64_t k0, int64_t n,
                                C* dp, int64_t ss, const Lanes<Sync>& w) const {
    RowProducts(in.dout + q0 * in.ev, rows, in.v + k0 * in.ev, n, in.ev, dp, ss,
                w);
  }

  template <typename Sync>
  DT_HOST_DEVICE void Accumulate(int64_t rows, int64_t k0, int64_t n,
                                 const C* p, int64_t ss, const C* correction,
                                 C* acc, int64_t as,
                                 const Lanes<Sync>& w) const {
    TimesRows(
        TileOperand<C>{p, ss, 1}, rows, n, in.v + k0 * in.ev, in.ev,
        [&](int64_t i, int64_t c, C value) {
          C& slot = acc[i * as + c];
          slot = slot * correction[i] + value;
        },
        w);
  }

  template <typename Sync>
  DT_HOST_DEVICE void AddTransposedTimes(int64_t rows, int64_t n, const C* a,
                                         int64_t ss, const T* src, int64_t cols,
                                         C* dst, int64_t dst_stride,
                                         const Lanes<Sync>& w) const {
    TimesRows(
        TileOperand<C>{a, 1, ss}, n, rows, src, cols,
        [&](int64_t j, int64_t c, C value) {
          dst[j * dst_stride + c] += value;
        },
        w);
  }

  template <typename Sync>
  DT_HOST_DEVICE void AddQueryGrads(int64_t q0, int64_t rows, int64_t k0,
                                    int64_t n, const C* ds, int64_t ss,
                                    const Lanes<Sync>& w) const {
    TimesRows(
        TileOperand<C>{ds, ss, 1}, rows, n, in.k + k0 * in.e, in.e,
        [&](int64_t i, int64_t c, C value) {
          add(in.dq + (q0 + i) * in.e + c, value);
        },
        w);
  }
};

// ---- The device kernels' blocks. ----

// Where a block's shared memory (compute type C) holds what, for head dims
// e and ev: two staging buffers, the scores (and for the backward their
// gradients) of a tile, and the forward's running softmax, corrections and
// output accumulator, or the backward's key and value gradients. Offsets in
// elements of C.
template <typename C>
struct AttentionSharedLayout {
  static constexpr int64_t kQueries = AttentionTiles<C>::kQueries;
  static constexpr int64_t kKeys = AttentionTiles<C>::kKeys;
  static constexpr int64_t kRows = kQueries > kKeys ? kQueries : kKeys;
  static constexpr int64_t kScoreStride = kKeys + 1;

  int64_t stage_b;
  int64_t scores;
  int64_t grads;       // backward
  int64_t running;     // forward: kQueries SoftmaxRunning
  int64_t correction;  // forward
  int64_t acc;         // forward: [kQueries][ev]
  int64_t dk;          // backward: [kKeys][e]
  int64_t dv;          // backward: [kKeys][ev]
  int64_t total;

  DT_HOST_DEVICE AttentionSharedLayout(int64_t e, int64_t ev, bool backward) {
    stage_b = kRows * kAttentionStageStride;
    scores = 2 * stage_b;
    const int64_t tile = kQueries * kScoreStride;
    if (backward) {
      grads = scores + tile;
      dk = grads + tile;
      dv = dk + kKeys * e;
      total = dv + kKeys * ev;
      running = correction = acc = 0;
    } else {
      running = scores + tile;
      correction = running + 2 * kQueries;
      acc = correction + kQueries;
      total = acc + kQueries * ev;
      grads = dk = dv = 0;
    }
  }

  DT_HOST_DEVICE int64_t bytes() const {
    return total * static_cast<int64_t>(sizeof(C));
  }
};

// One forward launch: every output batch entry's q, k, v start at the element
// offsets `batch` gives for its row-major index (broadcast dims at stride 0),
// rows contiguous; out [batch entries, lq, ev] (contiguous; null for the
// log-sum-exps alone) and lse [batch entries, lq].
template <typename T, typename C>
struct AttentionForwardArgs {
  AttentionProblem<C> problem;
  StridedShape<3> batch;
  const T* q;
  const T* k;
  const T* v;
  T* out;
  C* lse;
};

// Adds nothing: the forward never adds query gradients.
struct NoQueryGrads {
  template <typename C>
  DT_HOST_DEVICE void operator()(C*, C) const {}
};

// Block `block` of a forward launch of ceil(lq / kQueries) blocks per batch
// entry, the causal ones' heaviest (last) query tiles first; `shared` holds
// AttentionSharedLayout<C>(e, ev, false).bytes() bytes.
template <typename T, typename C, typename Sync>
DT_HOST_DEVICE void AttentionForwardBlock(const AttentionForwardArgs<T, C>& a,
                                          int64_t block, C* shared,
                                          const Lanes<Sync>& w) {
  using Tiles = AttentionTiles<C>;
  const AttentionProblem<C>& p = a.problem;
  const AttentionSharedLayout<C> layout(p.e, p.ev, /*backward=*/false);
  const int64_t tiles = (p.lq + Tiles::kQueries - 1) / Tiles::kQueries;
  const int64_t entry = block / tiles;
  const int64_t q0 = (tiles - 1 - block % tiles) * Tiles::kQueries;
  const int64_t rows = MinOf(Tiles::kQueries, p.lq - q0);
  int64_t at[3];
  OperandOffsetsAt(a.batch, entry, at);
  StagedProducts<T, C, NoQueryGrads> products{
      {a.q + at[0], a.k + at[1], a.v + at[2], nullptr, nullptr, p.e, p.ev},
      shared,
      shared + layout.stage_b,
      NoQueryGrads(),
      ExpRowLoop()};
  const ForwardTile<C> t{
      shared + layout.scores,
      AttentionSharedLayout<C>::kScoreStride,
      reinterpret_cast<SoftmaxRunning<C>*>(shared + layout.running),
      shared + layout.correction,
      shared + layout.acc,
      p.ev};
  const int64_t first_row = entry * p.lq + q0;
  const bool accumulate = a.out != nullptr;
  ForwardQueryTile(p, q0, rows, Tiles::kKeys, t, a.lse + first_row, accumulate,
                   products, w);
  if (!accumulate) return;
  T* out = a.out + first_row * p.ev;
  for (int64_t x = w.lane; x < rows * p.ev; x += w.lanes) {
    out[x] = Store<T>(t.acc[x]);
  }
}

// One backward launch: q, k, v as in AttentionForwardArgs; out and dout
// [batch entries, lq, ev] (contiguous); lse and delta [batch entries, lq]
// (the forward's log-sum-exps, RowDelta); dq, dk, dv: compute-type
// accumulators of q's, k's and v's shapes, contiguous, at the same element
// offsets as q, k, v (so that broadcast batch entries add into one matrix),
// zeroed before the launch.
template <typename T, typename C>
struct AttentionBackwardArgs {
  AttentionProblem<C> problem;
  StridedShape<3> batch;
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  const C* lse;
  const C* delta;
  C* dq;
  C* dk;
  C* dv;
};

// Block `block` of a backward launch of ceil(lk / kKeys) blocks per batch
// entry: the key tile's gradients summed over every query in shared memory,
// then added to dk and dv by `add`, as are the queries' gradients to dq.
template <typename T, typename C, typename Sync, typename Add>
DT_HOST_DEVICE void AttentionBackwardBlock(const AttentionBackwardArgs<T, C>& a,
                                           int64_t block, C* shared,
                                           const Lanes<Sync>& w, Add add) {
  using Tiles = AttentionTiles<C>;
  const AttentionProblem<C>& p = a.problem;
  const AttentionSharedLayout<C> layout(p.e, p.ev, /*backward=*/true);
  const int64_t tiles = (p.lk + Tiles::kKeys - 1) / Tiles::kKeys;
  const int64_t entry = block / tiles;
  const int64_t k0 = block % tiles * Tiles::kKeys;
  const int64_t n = MinOf(Tiles::kKeys, p.lk - k0);
  int64_t at[3];
  OperandOffsetsAt(a.batch, entry, at);
  const StagedProducts<T, C, Add> products{
      {a.q + at[0], a.k + at[1], a.v + at[2], a.dout + entry * p.lq * p.ev,
       a.dq + at[0], p.e, p.ev},
      shared,
      shared + layout.stage_b,
      add,
      ExpRowLoop()};
  const BackwardTile<C> t{shared + layout.scores,
                          shared + layout.grads,
                          AttentionSharedLayout<C>::kScoreStride,
                          shared + layout.dk,
                          p.e,
                          shared + layout.dv,
                          p.ev};
  // dk and dv lie back to back.
  for (int64_t x = w.lane; x < Tiles::kKeys * (p.e + p.ev); x += w.lanes) {
    t.dk[x] = C(0);
  }
  w.sync();
  BackwardKeyTile(p, k0, n, Tiles::kQueries, t, a.lse + entry * p.lq,
                  a.delta + entry * p.lq, products, w);
  for (int64_t x = w.lane; x < n * p.e; x += w.lanes) {
    add(a.dk + at[1] + k0 * p.e + x, t.dk[x]);
  }
  for (int64_t x = w.lane; x < n * p.ev; x += w.lanes) {
    add(a.dv + at[2] + k0 * p.ev + x, t.dv[x]);
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_BODY_H_
