#ifndef DTENSOR_TENSOR_CUDA_ATTENTION_BLOCKS_H_
#define DTENSOR_TENSOR_CUDA_ATTENTION_BLOCKS_H_

// The blocks of the tiled attention's device kernels (attention_kernels.cu):
// the tile steps of attention_body.h run by a block's threads over operands
// staged through shared memory, and the shared memory's layout. Compiled by
// any C++ compiler too, so that the CPU tests run a block with one lane
// (attention_body_test).

#include <stdint.h>

#include "dtensor/tensor/cuda/attention_body.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

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

// The inputs of a forward or backward launch: every output batch entry's q,
// k, v start at the element offsets `batch` gives for its row-major index
// (broadcast dims at stride 0), rows contiguous.
template <typename T, typename C>
struct AttentionOperands {
  AttentionProblem<C> problem;
  StridedShape<3> batch;
  const T* q;
  const T* k;
  const T* v;
};

// One forward launch: out [batch entries, lq, ev] (contiguous; null for the
// log-sum-exps alone) and lse [batch entries, lq].
template <typename T, typename C>
struct AttentionForwardArgs : AttentionOperands<T, C> {
  T* out;
  C* lse;
};

// What block `block` of a forward (ceil(lq / kQueries) blocks per batch
// entry, the causal ones' heaviest (last) query tiles first) or backward
// (ceil(lk / kKeys) blocks per entry) launch works on: the layout of its
// shared memory, its batch entry, its tile's first query or key and how many
// it holds, and q's, k's and v's element offsets in the entry.
template <typename C>
struct AttentionBlockFrame {
  AttentionSharedLayout<C> layout;
  int64_t entry;
  int64_t first;
  int64_t count;
  int64_t at[3];
};

template <typename C>
DT_HOST_DEVICE AttentionBlockFrame<C> BlockFrameOf(const AttentionProblem<C>& p,
                                                   const StridedShape<3>& batch,
                                                   int64_t block,
                                                   bool backward) {
  const int64_t length = backward ? p.lk : p.lq;
  const int64_t tile =
      backward ? AttentionTiles<C>::kKeys : AttentionTiles<C>::kQueries;
  const int64_t tiles = (length + tile - 1) / tile;
  const int64_t index = backward ? block % tiles : tiles - 1 - block % tiles;
  AttentionBlockFrame<C> frame{AttentionSharedLayout<C>(p.e, p.ev, backward),
                               block / tiles,
                               index * tile,
                               0,
                               {}};
  frame.count = MinOf(tile, length - frame.first);
  OperandOffsetsAt(batch, frame.entry, frame.at);
  return frame;
}

// Adds nothing: the forward never adds query gradients.
struct NoQueryGrads {
  template <typename C>
  DT_HOST_DEVICE void operator()(C*, C) const {}
};

// Block `block` of a forward launch (BlockFrameOf); `shared` holds
// AttentionSharedLayout<C>(e, ev, false).bytes() bytes.
template <typename T, typename C, typename Sync>
DT_HOST_DEVICE void AttentionForwardBlock(const AttentionForwardArgs<T, C>& a,
                                          int64_t block, C* shared,
                                          const Lanes<Sync>& w) {
  using Tiles = AttentionTiles<C>;
  const AttentionProblem<C>& p = a.problem;
  const auto frame = BlockFrameOf(p, a.batch, block, /*backward=*/false);
  StagedProducts<T, C, NoQueryGrads> products{
      {a.q + frame.at[0], a.k + frame.at[1], a.v + frame.at[2], nullptr,
       nullptr, p.e, p.ev},
      shared,
      shared + frame.layout.stage_b,
      NoQueryGrads(),
      ExpRowLoop()};
  const ForwardTile<C> t{
      shared + frame.layout.scores,
      AttentionSharedLayout<C>::kScoreStride,
      reinterpret_cast<SoftmaxRunning<C>*>(shared + frame.layout.running),
      shared + frame.layout.correction,
      shared + frame.layout.acc,
      p.ev};
  const int64_t first_row = frame.entry * p.lq + frame.first;
  const bool accumulate = a.out != nullptr;
  ForwardQueryTile(p, frame.first, frame.count, Tiles::kKeys, t,
                   a.lse + first_row, accumulate, products, w);
  if (!accumulate) return;
  T* out = a.out + first_row * p.ev;
  for (int64_t x = w.lane; x < frame.count * p.ev; x += w.lanes) {
    out[x] = Store<T>(t.acc[x]);
  }
}

// One backward launch: dout [batch entries, lq, ev] (contiguous); lse and
// delta [batch entries, lq] (the forward's log-sum-exps, RowDelta); dq, dk,
// dv: compute-type accumulators of q's, k's and v's shapes, contiguous, at the
// same element offsets as q, k, v (so that broadcast batch entries add into
// one matrix), zeroed before the launch.
template <typename T, typename C>
struct AttentionBackwardArgs : AttentionOperands<T, C> {
  const T* dout;
  const C* lse;
  const C* delta;
  C* dq;
  C* dk;
  C* dv;
};

// Block `block` of a backward launch (BlockFrameOf): the key tile's gradients
// summed over every query in shared memory, then added to dk and dv by `add`,
// as are the queries' gradients to dq.
template <typename T, typename C, typename Sync, typename Add>
DT_HOST_DEVICE void AttentionBackwardBlock(const AttentionBackwardArgs<T, C>& a,
                                           int64_t block, C* shared,
                                           const Lanes<Sync>& w, Add add) {
  using Tiles = AttentionTiles<C>;
  const AttentionProblem<C>& p = a.problem;
  const auto frame = BlockFrameOf(p, a.batch, block, /*backward=*/true);
  const StagedProducts<T, C, Add> products{
      {a.q + frame.at[0], a.k + frame.at[1], a.v + frame.at[2],
       a.dout + frame.entry * p.lq * p.ev, a.dq + frame.at[0], p.e, p.ev},
      shared,
      shared + frame.layout.stage_b,
      add,
      ExpRowLoop()};
  const BackwardTile<C> t{shared + frame.layout.scores,
                          shared + frame.layout.grads,
                          AttentionSharedLayout<C>::kScoreStride,
                          shared + frame.layout.dk,
                          p.e,
                          shared + frame.layout.dv,
                          p.ev};
  // dk and dv lie back to back.
  for (int64_t x = w.lane; x < Tiles::kKeys * (p.e + p.ev); x += w.lanes) {
    t.dk[x] = C(0);
  }
  w.sync();
  BackwardKeyTile(p, frame.first, frame.count, Tiles::kQueries, t,
                  a.lse + frame.entry * p.lq, a.delta + frame.entry * p.lq,
                  products, w);
  for (int64_t x = w.lane; x < frame.count * p.e; x += w.lanes) {
    add(a.dk + frame.at[1] + frame.first * p.e + x, t.dk[x]);
  }
  for (int64_t x = w.lane; x < frame.count * p.ev; x += w.lanes) {
    add(a.dv + frame.at[2] + frame.first * p.ev + x, t.dv[x]);
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ATTENTION_BLOCKS_H_
