#include "dtensor/tensor/nn_functional.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/loss_cuda.h"
#include "dtensor/tensor/nn_functional_cuda.h"
#include "dtensor/tensor/norm_cuda.h"
#include "dtensor/tensor/rotary_tables.h"
#include "dtensor/tensor/vector_exp.h"

namespace dtensor {
namespace {

using internal::CheckCpu;
using internal::CheckFloatingCpu;
using internal::CheckFloatingOn;
using internal::CheckIndexInRange;
using internal::CheckNormInput;
using internal::CheckNormParam;
using internal::CheckSameDType;
using internal::DispatchFloatingDType;
using internal::ReadIndices;

// ---- Softmax. ----

// A contiguous tensor seen as [outer, n, inner] around one of its dims.
struct DimSplit {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};

DimSplit SplitAround(const Shape& shape, int64_t dim) {
  DimSplit split;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) split.outer *= shape[d];
    if (d == dim) split.n = shape[d];
    if (d > dim) split.inner *= shape[d];
  }
  return split;
}

// Softmax (or log-softmax) of the `split.n` elements of each [outer, inner]
// position, `stride` = split.inner apart. Subtracting the maximum first keeps
// exp in range; the exps are taken in one vectorized pass (vector_exp.h)
// and summed in double.
template <typename T>
void SoftmaxKernel(const T* x, T* y, const DimSplit& split, bool log) {
  using C = ComputeType<T>;
  const int64_t stride = split.inner;
  std::vector<C> exps(split.n);
  for (int64_t o = 0; o < split.outer; ++o) {
    for (int64_t i = 0; i < split.inner; ++i) {
      const T* in = x + o * split.n * stride + i;
      T* out = y + o * split.n * stride + i;
      C max = -std::numeric_limits<C>::infinity();
      for (int64_t j = 0; j < split.n; ++j) {
        exps[j] = static_cast<C>(in[j * stride]);
        max = std::max(max, exps[j]);
      }
      ExpShiftedInPlace(exps.data(), split.n, max);
      double sum = 0;
      for (int64_t j = 0; j < split.n; ++j) sum += exps[j];
      if (log) {
        // x - max first: exact for the large entries, where adding max and
        // log(sum) would round away the small log(sum).
        const C log_sum = static_cast<C>(std::log(sum));
        for (int64_t j = 0; j < split.n; ++j) {
          out[j * stride] =
              static_cast<T>(static_cast<C>(in[j * stride]) - max - log_sum);
        }
      } else {
        const C inverse_sum = static_cast<C>(1.0 / sum);
        for (int64_t j = 0; j < split.n; ++j) {
          out[j * stride] = static_cast<T>(exps[j] * inverse_sum);
        }
      }
    }
  }
}

absl::StatusOr<Tensor> SoftmaxImpl(const Tensor& x, int64_t dim, bool log,
                                   const char* op) {
  DT_RETURN_IF_ERROR(CheckFloatingCpu(x, op, "x"));
  // Like torch, a 0-d tensor takes dim 0 (or -1) as its only element.
  DT_ASSIGN_OR_RETURN(const int64_t d,
                      NormalizeDim(dim, std::max<int64_t>(x.dim(), 1)));
  const Tensor input = x.Contiguous();
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.shape(), x.dtype()));
  const DimSplit split = x.dim() == 0 ? DimSplit{} : SplitAround(x.shape(), d);
  DispatchFloatingDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    SoftmaxKernel(input.data<T>(), out.data<T>(), split, log);
  });
  return out;
}

// log(sum(exp(row))) of `n` >= 1 elements, computed around the maximum in
// double.
template <typename T>
double LogSumExp(const T* row, int64_t n) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    max =
        std::max(max, static_cast<double>(static_cast<ComputeType<T>>(row[j])));
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    sum += std::exp(static_cast<ComputeType<T>>(row[j]) - max);
  }
  return max + std::log(sum);
}

// ---- Normalization over the last dim. ----

// The values of an optional per-feature parameter as V; `fill` for every
// feature when it is undefined.
template <typename V>
absl::StatusOr<std::vector<V>> ParamValues(const Tensor& param, int64_t size,
                                           V fill) {
  if (!param.defined()) return std::vector<V>(size, fill);
  return param.ToVector<V>();
}

// Applies `normalize(row_in, row_out)` to every row of the last dim of `x`
// (contiguous copy when needed); returns the contiguous result.
template <typename T, typename RowFn>
absl::StatusOr<Tensor> MapRows(const Tensor& x, RowFn&& normalize) {
  const Tensor input = x.Contiguous();
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.shape(), x.dtype()));
  const int64_t width = x.size(-1);
  if (width == 0) return out;
  const int64_t rows = x.numel() / width;
  for (int64_t r = 0; r < rows; ++r) {
    normalize(input.data<T>() + r * width, out.data<T>() + r * width);
  }
  return out;
}

// ---- Rotary embedding. ----

// Rotates the pairs (i, i + half) of each head_dim row of `x` (contiguous
// [outer, seq, heads, 2 * half]) at sequence index s by the angle whose cosine
// and sine are entry [s, i] of the contiguous [seq, half] tables.
template <typename T>
void RotateHalf(const T* x, T* y, int64_t outer, int64_t seq, int64_t heads,
                int64_t half, const double* cos_table,
                const double* sin_table) {
  using C = ComputeType<T>;
  const int64_t head_dim = 2 * half;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < seq; ++s) {
      const double* cos_row = cos_table + s * half;
      const double* sin_row = sin_table + s * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((o * seq + s) * heads + h) * head_dim;
        const T* in = x + base;
        T* out = y + base;
        for (int64_t i = 0; i < half; ++i) {
          const C cos = static_cast<C>(cos_row[i]);
          const C sin = static_cast<C>(sin_row[i]);
          const C x1 = static_cast<C>(in[i]);
          const C x2 = static_cast<C>(in[i + half]);
          out[i] = static_cast<T>(x1 * cos - x2 * sin);
          out[i + half] = static_cast<T>(x2 * cos + x1 * sin);
        }
      }
    }
  }
}

// x [..., seq, heads, head_dim] with an even head_dim, floating, and a
// positive theta.
absl::Status CheckRotaryInput(const Tensor& x, double theta) {
  const Device device = x.defined() ? x.device() : Device::CPU();
  DT_RETURN_IF_ERROR(CheckFloatingOn(x, device, "RotaryEmbedding", "x"));
  if (x.dim() < 3 || x.size(-1) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RotaryEmbedding: x must be [..., seq, heads, head_dim] with an even "
        "head_dim, got shape ",
        ShapeToString(x.shape())));
  }
  if (!(theta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RotaryEmbedding: theta must be positive, got ", theta));
  }
  return absl::OkStatus();
}

// x rotated by `tables` ([seq, half] on x's device).
absl::StatusOr<Tensor> Rotate(const Tensor& x, const RotaryTables& tables) {
  if (x.device().is_cuda()) {
    return cuda::RotaryOnDevice(x, tables.cos, tables.sin);
  }
  const int64_t seq = x.size(-3);
  const int64_t heads = x.size(-2);
  const int64_t half = x.size(-1) / 2;
  const Tensor input = x.Contiguous();
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.shape(), x.dtype()));
  const int64_t row = seq * heads * 2 * half;
  const int64_t outer = row == 0 ? 0 : x.numel() / row;
  DispatchFloatingDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    RotateHalf(input.data<T>(), out.data<T>(), outer, seq, heads, half,
               tables.cos.data<double>(), tables.sin.data<double>());
  });
  return out;
}

}  // namespace

absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim) {
  if (cuda::OnCuda(x)) return cuda::SoftmaxOnDevice(x, dim, /*log=*/false);
  return SoftmaxImpl(x, dim, /*log=*/false, "Softmax");
}

absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t dim) {
  if (cuda::OnCuda(x)) return cuda::SoftmaxOnDevice(x, dim, /*log=*/true);
  return SoftmaxImpl(x, dim, /*log=*/true, "LogSoftmax");
}

absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& weight,
                               double eps) {
  if (cuda::OnCuda(x)) return cuda::RmsNormOnDevice(x, weight, eps);
  DT_RETURN_IF_ERROR(CheckNormInput(x, "RmsNorm"));
  DT_RETURN_IF_ERROR(CheckNormParam(x, weight, "RmsNorm", "weight"));
  const int64_t width = x.size(-1);
  return DispatchFloatingDType(
      x.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        DT_ASSIGN_OR_RETURN(const std::vector<C> w,
                            ParamValues<C>(weight, width, C(1)));
        return MapRows<T>(x, [&](const T* in, T* out) {
          double sum_squares = 0;
          for (int64_t i = 0; i < width; ++i) {
            const double value = static_cast<C>(in[i]);
            sum_squares += value * value;
          }
          const C scale =
              static_cast<C>(1.0 / std::sqrt(sum_squares / width + eps));
          for (int64_t i = 0; i < width; ++i) {
            out[i] = static_cast<T>(static_cast<C>(in[i]) * scale * w[i]);
          }
        });
      });
}

absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  if (cuda::OnCuda(x)) return cuda::LayerNormOnDevice(x, weight, bias, eps);
  DT_RETURN_IF_ERROR(CheckNormInput(x, "LayerNorm"));
  DT_RETURN_IF_ERROR(CheckNormParam(x, weight, "LayerNorm", "weight"));
  DT_RETURN_IF_ERROR(CheckNormParam(x, bias, "LayerNorm", "bias"));
  const int64_t width = x.size(-1);
  return DispatchFloatingDType(
      x.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        DT_ASSIGN_OR_RETURN(const std::vector<double> w,
                            ParamValues<double>(weight, width, 1.0));
        DT_ASSIGN_OR_RETURN(const std::vector<double> b,
                            ParamValues<double>(bias, width, 0.0));
        return MapRows<T>(x, [&](const T* in, T* out) {
          // Two passes: the mean first, then the variance around it, which
          // avoids the cancellation of E[x^2] - E[x]^2. Centering stays in
          // double too: rounding the mean to C first would cancel nearly equal
          // inputs.
          double sum = 0;
          for (int64_t i = 0; i < width; ++i) sum += static_cast<C>(in[i]);
          const double mean = sum / width;
          double sum_squares = 0;
          for (int64_t i = 0; i < width; ++i) {
            const double centered = static_cast<C>(in[i]) - mean;
            sum_squares += centered * centered;
          }
          const double scale = 1.0 / std::sqrt(sum_squares / width + eps);
          for (int64_t i = 0; i < width; ++i) {
            const double centered = static_cast<C>(in[i]) - mean;
            out[i] =
                static_cast<T>(static_cast<C>(centered * scale * w[i] + b[i]));
          }
        });
      });
}

absl::StatusOr<Tensor> Embedding(const Tensor& indices, const Tensor& table) {
  if (cuda::OnCuda(table)) return cuda::EmbeddingOnDevice(indices, table);
  DT_RETURN_IF_ERROR(CheckFloatingCpu(table, "Embedding", "table"));
  if (table.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Embedding: table must be [num, dim], got shape ",
                     ShapeToString(table.shape())));
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> rows,
                      ReadIndices(indices, "Embedding", "indices"));
  const int64_t num = table.size(0);
  for (const int64_t row : rows) {
    DT_RETURN_IF_ERROR(CheckIndexInRange(row, num, "Embedding"));
  }
  Shape out_shape = indices.shape();
  out_shape.push_back(table.size(1));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, table.dtype()));
  const Tensor source = table.Contiguous();
  const size_t row_bytes = table.size(1) * ElementSize(table.dtype());
  const char* source_data = static_cast<const char*>(source.raw_data());
  char* out_data = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out_data + i * row_bytes, source_data + rows[i] * row_bytes,
                row_bytes);
  }
  return out;
}

namespace {

// Checks EmbeddingBackward's shapes; returns the row width.
absl::StatusOr<int64_t> EmbeddingGradWidth(const Tensor& indices,
                                           const Tensor& grad,
                                           int64_t table_rows,
                                           int64_t first_row,
                                           int64_t num_rows) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingOn(grad, grad.device(),
                                               "EmbeddingBackward", "grad"));
  Shape want = indices.shape();
  want.push_back(grad.dim() > 0 ? grad.size(-1) : 0);
  if (grad.dim() != indices.dim() + 1 || grad.shape() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EmbeddingBackward: grad has shape ", ShapeToString(grad.shape()),
        "; indices of shape ", ShapeToString(indices.shape()),
        " need [indices..., dim]"));
  }
  if (num_rows < 0 || first_row < 0 || first_row + num_rows > table_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EmbeddingBackward: rows [", first_row, ", ", first_row + num_rows,
        ") of a table of ", table_rows, " rows"));
  }
  return grad.size(-1);
}

// The positions i of `rows` inside [first, first + count) and their rows
// relative to first.
struct RowsInside {
  std::vector<int64_t> positions;
  std::vector<int64_t> rows;
};
RowsInside SelectRows(const std::vector<int64_t>& rows, int64_t first,
                      int64_t count) {
  RowsInside inside;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i] - first;
    if (r < 0 || r >= count) continue;
    inside.positions.push_back(static_cast<int64_t>(i));
    inside.rows.push_back(r);
  }
  return inside;
}

}  // namespace

absl::StatusOr<Tensor> EmbeddingBackward(const Tensor& indices,
                                         const Tensor& grad,
                                         int64_t table_rows) {
  return EmbeddingBackward(indices, grad, table_rows, 0, table_rows);
}

absl::StatusOr<Tensor> EmbeddingBackward(const Tensor& indices,
                                         const Tensor& grad, int64_t table_rows,
                                         int64_t first_row, int64_t num_rows) {
  DT_ASSIGN_OR_RETURN(
      const int64_t width,
      EmbeddingGradWidth(indices, grad, table_rows, first_row, num_rows));
  if (cuda::OnCuda(grad)) {
    return cuda::EmbeddingBackwardOnDevice(indices, grad, table_rows, first_row,
                                           num_rows);
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> rows,
                      ReadIndices(indices, "EmbeddingBackward", "indices"));
  for (const int64_t row : rows) {
    DT_RETURN_IF_ERROR(CheckIndexInRange(row, table_rows, "EmbeddingBackward"));
  }
  const RowsInside inside = SelectRows(rows, first_row, num_rows);
  const Tensor source = grad.Contiguous();
  return internal::DispatchFloatingDType(
      grad.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        using C = ComputeType<T>;
        std::vector<C> sums(num_rows * width, C(0));
        const T* g = source.data<T>();
        for (size_t k = 0; k < inside.rows.size(); ++k) {
          const T* row = g + inside.positions[k] * width;
          C* sum = sums.data() + inside.rows[k] * width;
          for (int64_t j = 0; j < width; ++j) sum[j] += static_cast<C>(row[j]);
        }
        DT_ASSIGN_OR_RETURN(Tensor out,
                            Tensor::Empty({num_rows, width}, grad.dtype()));
        T* data = out.data<T>();
        for (size_t i = 0; i < sums.size(); ++i) data[i] = T(sums[i]);
        return out;
      });
}

absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits, const Tensor& target,
                                    Reduction reduction, int64_t ignore_index) {
  if (cuda::OnCuda(logits)) {
    return cuda::CrossEntropyOnDevice(logits, target, reduction, ignore_index);
  }
  DT_RETURN_IF_ERROR(CheckFloatingCpu(logits, "CrossEntropy", "logits"));
  DT_RETURN_IF_ERROR(CheckCpu(target, "CrossEntropy", "target"));
  DT_RETURN_IF_ERROR(internal::CheckCrossEntropyShapes(logits, target));
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> targets,
                      ReadIndices(target, "CrossEntropy", "target"));
  const int64_t classes = logits.size(-1);
  DT_RETURN_IF_ERROR(
      internal::CheckCrossEntropyTargets(targets, classes, ignore_index));
  // Per-sample losses: logsumexp(row) - row[target].
  const Tensor input = logits.Contiguous();
  std::vector<double> losses(targets.size(), 0.0);
  double total = 0;
  int64_t counted = 0;
  DispatchFloatingDType(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == ignore_index) continue;
      const T* row = input.data<T>() + i * classes;
      losses[i] = LogSumExp(row, classes) -
                  static_cast<ComputeType<T>>(row[targets[i]]);
      total += losses[i];
      ++counted;
    }
  });
  switch (reduction) {
    case Reduction::kNone: {
      DT_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::FromVector<double>(losses, target.shape()));
      return out.To(logits.dtype());
    }
    case Reduction::kSum:
      return Tensor::Scalar(total, logits.dtype());
    case Reduction::kMean:
      return Tensor::Scalar(counted == 0 ? std::nan("") : total / counted,
                            logits.dtype());
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "CrossEntropy: unknown reduction ", static_cast<int>(reduction)));
}

absl::StatusOr<Tensor> RotaryEmbedding(const Tensor& x, const Tensor& positions,
                                       double theta, bool inverse) {
  DT_RETURN_IF_ERROR(CheckRotaryInput(x, theta));
  const int64_t seq = x.size(-3);
  const int64_t half = x.size(-1) / 2;
  if (!positions.defined()) {
    return RotaryEmbeddingFrom(x, /*first=*/0, theta, inverse);
  }
  if (positions.dim() != 1 || positions.size(0) != seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RotaryEmbedding: positions ", ShapeToString(positions.shape()),
        " must be [seq] for x ", ShapeToString(x.shape())));
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> position_values,
                      ReadIndices(positions, "RotaryEmbedding", "positions"));
  DT_ASSIGN_OR_RETURN(
      const RotaryTables tables,
      RotaryTablesOf(position_values, half, theta, inverse, x.device()));
  return Rotate(x, tables);
}

absl::StatusOr<Tensor> RotaryEmbeddingFrom(const Tensor& x, int64_t first,
                                           double theta, bool inverse) {
  DT_RETURN_IF_ERROR(CheckRotaryInput(x, theta));
  if (first < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RotaryEmbedding: the first position ", first, " is negative"));
  }
  DT_ASSIGN_OR_RETURN(const RotaryTables tables,
                      CachedRotaryTables(first, x.size(-3), x.size(-1) / 2,
                                         theta, inverse, x.device()));
  return Rotate(x, tables);
}

}  // namespace dtensor
