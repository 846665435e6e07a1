#ifndef DTENSOR_TENSOR_NN_FUNCTIONAL_H_
#define DTENSOR_TENSOR_NN_FUNCTIONAL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Neural-network kernels on local tensors; contiguous results, bf16/f16
// computed in f32.
// Errors: (every function) a data input of a non-floating dtype, an
// undefined input, shapes other than documented, a dim out of range.

// Numerically stable softmax / log_softmax along `dim`.
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim);
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t dim);

// x / sqrt(mean(x^2 over the last dim) + eps) * weight; `weight` [last dim]
// is optional (undefined Tensor).
absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& weight,
                               double eps = 1e-6);
// (x - mean) / sqrt(var_population + eps) * weight + bias over the last dim;
// weight and bias optional.
absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, double eps = 1e-5);

// Rows of `table` [num, dim] selected by integer `indices` (any shape):
// result [indices..., dim].
// Errors: an index outside [0, num) (naming it), non-integer `indices`.
absl::StatusOr<Tensor> Embedding(const Tensor& indices, const Tensor& table);
// Embedding's gradient of a [table_rows, dim] table: row r is the sum of the
// rows of `grad` [indices..., dim] whose index is r (on the CPU added in
// index order, f32 accumulation for bf16/f16; on a device by atomic adds, in
// no fixed order). One pass over `grad` (a scatter-add), where the one-hot
// matrix product costs table_rows times more. The second form gives only the
// rows [first_row, first_row + num_rows) (a row-sharded table's block):
// indices outside it add nothing.
// Errors: `grad` not floating or not [indices..., dim]; non-integer
// `indices`; an index outside [0, table_rows) (naming it); a block outside
// the table.
absl::StatusOr<Tensor> EmbeddingBackward(const Tensor& indices,
                                         const Tensor& grad,
                                         int64_t table_rows);
absl::StatusOr<Tensor> EmbeddingBackward(const Tensor& indices,
                                         const Tensor& grad, int64_t table_rows,
                                         int64_t first_row, int64_t num_rows);

enum class Reduction { kNone, kMean, kSum };
// Cross entropy of `logits` [N, C] (or [C]) against integer `target` [N]
// (or 0-d). Targets equal to `ignore_index` contribute nothing and are not
// counted by kMean (the mean over no targets is NaN, like PyTorch). kNone gives
// the per-sample losses [N] (0 where ignored).
// Errors: other targets outside [0, C); shapes other than [N, C] and [N] or
// [C] and [] (dtensor/tensor/kernel_checks.h, shared with the CUDA kernel).
absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits, const Tensor& target,
                                    Reduction reduction = Reduction::kMean,
                                    int64_t ignore_index = -100);

// softmax(q k^T * scale [+ causal mask]) v with q [..., Lq, E], k [..., Lk, E],
// v [..., Lk, Ev]; leading dims broadcast. `scale` <= 0 means 1/sqrt(E). The
// causal mask lets query i see keys j <= i + (Lk - Lq) (aligned to the end, as
// in PyTorch with Lq == Lk). A query that sees no key (causal with Lq > Lk, or
// Lk == 0) gets an all-zero output row rather than NaN. bf16/f16 compute in f32
// and round once, f64 in f64. Tiled, never making the [Lq, Lk] scores
// (dtensor/tensor/attention.h, which also has the backward); on CUDA, head dims
// whose tiles do not fit the device's shared memory take cuBLAS products around
// the materialized scores instead.
absl::StatusOr<Tensor> ScaledDotProductAttention(const Tensor& q,
                                                 const Tensor& k,
                                                 const Tensor& v, bool causal,
                                                 double scale = 0.0);

// Rotary position embedding on `x` [..., seq, heads, head_dim]
// with the rotate-half convention of Llama: pairs (i, i + head_dim/2) rotate by
// angle position * theta^(-2i/head_dim). `positions` [seq] (integer) gives each
// row's position; they are read on the host (keep them on the CPU: a device
// tensor is copied back, which waits for its stream). Positions made of a few
// runs of consecutive positions (rotary_tables.h, RotaryTablesOf) rotate by
// cached tables on x's device; others by tables made on the host and copied
// there. Pass an undefined Tensor for 0..seq-1 (as RotaryEmbeddingFrom(x, 0,
// theta, inverse)). With `inverse`, the rotation back by minus the angles (the
// embedding's gradient), from the same tables with sin negated.
// Errors: an odd head_dim, `positions` not [seq] of an integer dtype, a
// non-positive theta.
absl::StatusOr<Tensor> RotaryEmbedding(const Tensor& x, const Tensor& positions,
                                       double theta = 10000.0,
                                       bool inverse = false);
// RotaryEmbedding with the positions first, ..., first + seq - 1, or with
// `inverse` their negations (the rotation back: the embedding's gradient).
// The angle tables are cached on x's device (rotary_tables.h): no host work
// and no copy after the first call of a shape.
// Errors: RotaryEmbedding's; a negative `first`.
absl::StatusOr<Tensor> RotaryEmbeddingFrom(const Tensor& x, int64_t first,
                                           double theta, bool inverse = false);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_NN_FUNCTIONAL_H_
