#ifndef DTENSOR_TENSOR_CUDA_NORM_BODY_H_
#define DTENSOR_TENSOR_CUDA_NORM_BODY_H_

// Per-row and per-element bodies of the backward of RMSNorm and LayerNorm
// (dtensor/tensor/norm_backward.h), shared by the CUDA launches
// (norm_kernels.cu) and the CPU kernel (dtensor/tensor/norm_backward.cc, one
// lane). A row's elements are split among `lanes` workers as in row_body.h;
// the row statistics reuse row_body.h's partials (the forward's).
//
// With r = 1 / sqrt(mean((x - mean)^2) + eps) over the row (mean 0 for
// RMSNorm), xhat = (x - mean) r and gh = g * weight (g the output gradient):
//   dx      = r (gh - mean(gh) - xhat mean(gh xhat))   (no mean(gh) for
//             RMSNorm)
//   dweight = the sum over rows of g xhat, dbias = the sum over rows of g.
// Precision: the statistics and every sum in double (as in the forward);
// xhat is formed in double and rounded to the compute type C (float for f32,
// bf16 and f16; double for f64), the rest of each element's math is in C.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"

namespace dtensor::cuda {

// One row's statistics: its mean (0 for RMSNorm) and r.
struct NormStats {
  double mean;
  double rstd;
};

// The statistics of a row of `n` elements from its mean and the sum of its
// squares around the mean (row_body.h's CenteredSquaresPartial; with mean 0,
// RMSNorm's sum of squares).
DT_HOST_DEVICE inline NormStats NormStatsOf(double mean,
                                            double centered_squares, int64_t n,
                                            double eps) {
  return {mean, 1.0 / Sqrt(centered_squares / n + eps)};
}

// xhat of an element of value x.
template <typename C>
DT_HOST_DEVICE inline C Normalized(C x, NormStats s) {
  return static_cast<C>((static_cast<double>(x) - s.mean) * s.rstd);
}

// The weight at feature j (1 without a weight).
template <typename T>
DT_HOST_DEVICE inline Compute<T> WeightAt(const T* weight, int64_t j) {
  return weight == nullptr ? Compute<T>(1) : Load(weight[j]);
}

// The row sums dx needs: of gh * xhat and of gh.
struct NormDots {
  double gh_xhat = 0;
  double gh = 0;
};

template <typename T>
DT_HOST_DEVICE inline NormDots NormDotsPartial(Row<T> x, Row<T> g,
                                               const T* weight, NormStats s,
                                               int lane, int lanes) {
  NormDots dots;
  for (int64_t j = lane; j < x.n; j += lanes) {
    const Compute<T> gh = g[j] * WeightAt(weight, j);
    dots.gh_xhat += gh * Normalized(x[j], s);
    dots.gh += gh;
  }
  return dots;
}

// Writes the row's dx from its statistics and sums (`layer_norm` subtracts
// mean(gh)). A non-null `addend` (the row's gradient of a residual stream
// that x also flows into: the fused add + RMSNorm's backward) is added to
// each element in C before the one rounding to T. Requires x.n > 0.
template <typename T>
DT_HOST_DEVICE inline void NormBackwardWrite(Row<T> x, Row<T> g,
                                             const T* weight, NormStats s,
                                             NormDots dots, bool layer_norm,
                                             T* dx, int lane, int lanes,
                                             const T* addend = nullptr) {
  using C = Compute<T>;
  const C r = static_cast<C>(s.rstd);
  const C projection = static_cast<C>(dots.gh_xhat / x.n);
  const C shift = layer_norm ? static_cast<C>(dots.gh / x.n) : C(0);
  for (int64_t j = lane; j < x.n; j += lanes) {
    const C gh = g[j] * WeightAt(weight, j);
    const C value = r * (gh - shift - Normalized(x[j], s) * projection);
    dx[j] = Store<T>(addend == nullptr ? value : value + Load(addend[j]));
  }
}

// One element's term of dweight: g xhat, in C.
template <typename C>
DT_HOST_DEVICE inline C WeightGradTerm(C x, C g, NormStats s) {
  return g * Normalized(x, s);
}

// Adds the row's terms to the parameter gradients' sums (double, [n]):
// dweight[j] += g_j xhat_j, dbias[j] += g_j; a null sum is not wanted. The
// CPU kernel's accumulation, row after row.
template <typename T>
DT_HOST_DEVICE inline void NormParamGradsAddRow(Row<T> x, Row<T> g, NormStats s,
                                                double* dweight, double* dbias,
                                                int lane, int lanes) {
  for (int64_t j = lane; j < x.n; j += lanes) {
    if (dweight != nullptr) dweight[j] += WeightGradTerm(x[j], g[j], s);
    if (dbias != nullptr) dbias[j] += g[j];
  }
}

// How many chunks of rows the device sums the parameter gradients in: each
// chunk's column sums are a partial sum (a thread per column and chunk), the
// chunks' partials are then summed in chunk order. Fixed by `rows` alone, so
// the result does not depend on the device.
DT_HOST_DEVICE inline int64_t NormParamChunks(int64_t rows) {
  constexpr int64_t kMaxChunks = 64;
  return rows < kMaxChunks ? rows : kMaxChunks;
}

// The sums of the parameter gradients' terms of column j over the rows
// [begin, end) of contiguous x and g [rows, width], in row order, with each
// row's statistics `stats[row]`: the device's per-chunk partial sums (a
// thread per column, so that a warp reads consecutive elements of a row).
struct NormParamSums {
  double dweight = 0;
  double dbias = 0;
};

template <typename T>
DT_HOST_DEVICE inline NormParamSums NormParamColumnPartial(
    const T* x, const T* g, const NormStats* stats, int64_t width,
    int64_t begin, int64_t end, int64_t j) {
  NormParamSums sums;
  for (int64_t row = begin; row < end; ++row) {
    const Compute<T> x_value = Load(x[row * width + j]);
    const Compute<T> g_value = Load(g[row * width + j]);
    sums.dweight += WeightGradTerm(x_value, g_value, stats[row]);
    sums.dbias += g_value;
  }
  return sums;
}

// The sum of column j of `partials` [chunks, width] in chunk order: a
// parameter gradient from its per-chunk partial sums.
DT_HOST_DEVICE inline double ColumnSum(const double* partials, int64_t chunks,
                                       int64_t width, int64_t j) {
  double sum = 0;
  for (int64_t c = 0; c < chunks; ++c) sum += partials[c * width + j];
  return sum;
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_NORM_BODY_H_
