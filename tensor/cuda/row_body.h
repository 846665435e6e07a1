#ifndef DTENSOR_TENSOR_CUDA_ROW_BODY_H_
#define DTENSOR_TENSOR_CUDA_ROW_BODY_H_

// Per-row bodies of the row kernels (softmax, RMSNorm, cross entropy, the
// reductions, the attention softmax, LayerNorm), shared by the CUDA launches
// and their host forms. A row's elements are split among `lanes` workers:
// worker `lane` visits j = lane, lane + lanes, ... and returns a partial
// result; the CUDA kernel combines the partials of its block's threads, the
// host form runs one lane (lanes = 1), which visits the elements in the order
// of the CPU kernels of dtensor/tensor/ and so gives their results bit for bit.
// The math follows dtensor/tensor/nn_functional.cc and
// dtensor/tensor/reduction.cc: sums accumulate in double, the rest in the
// compute type.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// A row of `n` elements `stride` apart.
template <typename T>
struct Row {
  const T* data;
  int64_t n;
  int64_t stride;
  DT_HOST_DEVICE Compute<T> operator[](int64_t j) const {
    return Load(data[j * stride]);
  }
};

// The larger of a and b, keeping `a` when b is NaN (as std::max(a, b) does).
template <typename C>
DT_HOST_DEVICE inline C MaxKeepingFirst(C a, C b) {
  return a < b ? b : a;
}

// The larger of a and b propagating NaN (dtensor/tensor/reduction.cc's max).
template <typename C>
DT_HOST_DEVICE inline C MaxPropagatingNan(C a, C b) {
  return (a != a || a > b) ? a : b;
}
template <typename C>
DT_HOST_DEVICE inline C MinPropagatingNan(C a, C b) {
  return (a != a || a < b) ? a : b;
}

template <typename C>
DT_HOST_DEVICE inline C NegativeInfinity() {
  return -static_cast<C>(INFINITY);
}

// ---- Softmax and log-softmax (nn_functional.cc's SoftmaxKernel). ----

template <typename T>
DT_HOST_DEVICE inline Compute<T> SoftmaxMaxPartial(Row<T> row, int lane,
                                                   int lanes) {
  Compute<T> max = NegativeInfinity<Compute<T>>();
  for (int64_t j = lane; j < row.n; j += lanes)
    max = MaxKeepingFirst(max, row[j]);
  return max;
}

template <typename T>
DT_HOST_DEVICE inline double SoftmaxSumPartial(Row<T> row, Compute<T> max,
                                               int lane, int lanes) {
  double sum = 0;
  for (int64_t j = lane; j < row.n; j += lanes) sum += FastExpOf(row[j] - max);
  return sum;
}

// Writes softmax (or log-softmax) of the row given its max and exp-sum.
template <typename T>
DT_HOST_DEVICE inline void SoftmaxWrite(Row<T> row, T* out, Compute<T> max,
                                        double sum, bool log, int lane,
                                        int lanes) {
  using C = Compute<T>;
  if (log) {
    const C log_sum = static_cast<C>(Log(sum));
    for (int64_t j = lane; j < row.n; j += lanes) {
      out[j * row.stride] = Store<T>(row[j] - max - log_sum);
    }
  } else {
    const C inverse_sum = static_cast<C>(1.0 / sum);
    for (int64_t j = lane; j < row.n; j += lanes) {
      out[j * row.stride] = Store<T>(FastExpOf(row[j] - max) * inverse_sum);
    }
  }
}

// ---- RMSNorm (nn_functional.cc's RmsNorm). ----

template <typename T>
DT_HOST_DEVICE inline double SumSquaresPartial(Row<T> row, int lane,
                                               int lanes) {
  double sum = 0;
  for (int64_t j = lane; j < row.n; j += lanes) {
    const double value = row[j];
    sum += value * value;
  }
  return sum;
}

// out = x * scale * weight (weight may be null: all ones), where
// scale = 1 / sqrt(sum_squares / n + eps) rounded to the compute type.
template <typename T>
DT_HOST_DEVICE inline void RmsNormWrite(Row<T> row, const T* weight, T* out,
                                        double sum_squares, double eps,
                                        int lane, int lanes) {
  using C = Compute<T>;
  const C scale = static_cast<C>(1.0 / Sqrt(sum_squares / row.n + eps));
  for (int64_t j = lane; j < row.n; j += lanes) {
    const C w = weight == nullptr ? C(1) : Load(weight[j]);
    out[j] = Store<T>(row[j] * scale * w);
  }
}

// ---- LayerNorm (nn_functional.cc's LayerNorm): the mean (a kSum of
// ReducePartial<double> over n), then the variance around it, all in double.
// ----

template <typename T>
DT_HOST_DEVICE inline double CenteredSquaresPartial(Row<T> row, double mean,
                                                    int lane, int lanes) {
  double sum = 0;
  for (int64_t j = lane; j < row.n; j += lanes) {
    const double centered = row[j] - mean;
    sum += centered * centered;
  }
  return sum;
}

// out = (x - mean) * scale * weight + bias in double, rounded to the compute
// type and then to T, where scale = 1 / sqrt(centered_squares / n + eps);
// weight and bias may be null (ones, zeros).
template <typename T>
DT_HOST_DEVICE inline void LayerNormWrite(Row<T> row, const T* weight,
                                          const T* bias, T* out, double mean,
                                          double centered_squares, double eps,
                                          int lane, int lanes) {
  const double scale = 1.0 / Sqrt(centered_squares / row.n + eps);
  for (int64_t j = lane; j < row.n; j += lanes) {
    const double w = weight == nullptr ? 1.0 : Load(weight[j]);
    const double b = bias == nullptr ? 0.0 : Load(bias[j]);
    const double centered = row[j] - mean;
    out[j] = Store<T>(static_cast<Compute<T>>(centered * scale * w + b));
  }
}

// ---- Cross entropy (nn_functional.cc's LogSumExp, in double). ----

template <typename T>
DT_HOST_DEVICE inline double LogSumExpMaxPartial(Row<T> row, int lane,
                                                 int lanes) {
  double max = NegativeInfinity<double>();
  for (int64_t j = lane; j < row.n; j += lanes) {
    max = MaxKeepingFirst(max, static_cast<double>(row[j]));
  }
  return max;
}

template <typename T>
DT_HOST_DEVICE inline double LogSumExpSumPartial(Row<T> row, double max,
                                                 int lane, int lanes) {
  double sum = 0;
  for (int64_t j = lane; j < row.n; j += lanes) sum += Exp(row[j] - max);
  return sum;
}

// The loss of one sample: logsumexp(row) - row[target]. A target outside
// the row reads nothing (logsumexp alone): on the device the targets' range
// check is deferred (index_checks.h), and its error replaces this value.
template <typename T>
DT_HOST_DEVICE inline double CrossEntropyLoss(Row<T> row, double max,
                                              double sum, int64_t target) {
  const double logsumexp = max + Log(sum);
  return target >= 0 && target < row.n ? logsumexp - row[target] : logsumexp;
}

// ---- Reductions (reduction.cc: floating sums in double). ----

// kSumSquares is reduction.cc's SumOfSquares: the sum of x * x in double,
// each element widened before it is squared (RMSNorm's SumSquaresPartial);
// floating x only, the result is f64.
enum class ReduceOp { kSum, kMax, kMin, kSumSquares };

// True for the ops whose partials add up (kSum, kSumSquares).
DT_HOST_DEVICE inline bool IsSum(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kSumSquares;
}

// The partial reduction of a row in accumulator type A (double for floating
// sums and for sums of squares, int64 for integer sums, the compute type for
// max/min).
template <typename A, typename T>
DT_HOST_DEVICE inline A ReducePartial(ReduceOp op, Row<T> row, int lane,
                                      int lanes) {
  if (op == ReduceOp::kSum) {
    A sum = 0;
    for (int64_t j = lane; j < row.n; j += lanes) sum += static_cast<A>(row[j]);
    return sum;
  }
  if (op == ReduceOp::kSumSquares) {
    return static_cast<A>(SumSquaresPartial(row, lane, lanes));
  }
  A acc = static_cast<A>(row[lane < row.n ? lane : 0]);
  for (int64_t j = lane; j < row.n; j += lanes) {
    const A value = static_cast<A>(row[j]);
    acc = op == ReduceOp::kMax ? MaxPropagatingNan(acc, value)
                               : MinPropagatingNan(acc, value);
  }
  return acc;
}

template <typename A>
DT_HOST_DEVICE inline A ReduceCombine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kSumSquares:
      return a + b;
    case ReduceOp::kMax:
      return MaxPropagatingNan(a, b);
    case ReduceOp::kMin:
      return MinPropagatingNan(a, b);
  }
  return a;
}

// ---- The attention softmax of materialized scores (the CUDA fallback of
// dtensor/tensor/attention.cc for head dims too large for the tiled kernel),
// in place on a row of scores of compute type C: query `query` of `lq` sees
// the first `visible` keys. ----

DT_HOST_DEVICE inline int64_t VisibleKeys(int64_t query, int64_t lq, int64_t lk,
                                          bool causal) {
  if (!causal) return lk;
  const int64_t visible = query + (lk - lq) + 1;
  return visible < 0 ? 0 : (visible > lk ? lk : visible);
}

template <typename C>
DT_HOST_DEVICE inline C ScaledMaxPartial(C* row, int64_t visible, C scale,
                                         int lane, int lanes) {
  C max = NegativeInfinity<C>();
  for (int64_t j = lane; j < visible; j += lanes) {
    row[j] *= scale;
    max = MaxKeepingFirst(max, row[j]);
  }
  return max;
}

template <typename C>
DT_HOST_DEVICE inline double ExpInPlacePartial(C* row, int64_t visible, C max,
                                               int lane, int lanes) {
  double sum = 0;
  for (int64_t j = lane; j < visible; j += lanes) {
    row[j] = FastExpOf(row[j] - max);
    sum += row[j];
  }
  return sum;
}

template <typename C>
DT_HOST_DEVICE inline void NormalizeMasked(C* row, int64_t visible, int64_t lk,
                                           double sum, int lane, int lanes) {
  const C inverse_sum = static_cast<C>(1.0 / sum);
  for (int64_t j = lane; j < lk; j += lanes) {
    row[j] = j < visible ? row[j] * inverse_sum : C(0);
  }
}

// ---- Rotary embedding (nn_functional.cc's RotateHalf) on one pair. ----

template <typename T>
DT_HOST_DEVICE inline void RotatePair(const T* in, T* out, int64_t i,
                                      int64_t half, double cos, double sin) {
  using C = Compute<T>;
  const C c = static_cast<C>(cos);
  const C s = static_cast<C>(sin);
  const C x1 = Load(in[i]);
  const C x2 = Load(in[i + half]);
  out[i] = Store<T>(x1 * c - x2 * s);
  out[i + half] = Store<T>(x2 * c + x1 * s);
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_ROW_BODY_H_
