#ifndef DTENSOR_TENSOR_CUDA_FUSED_NORM_BODY_H_
#define DTENSOR_TENSOR_CUDA_FUSED_NORM_BODY_H_

// Per-row bodies of the fused residual add + RMSNorm
// (dtensor/tensor/fused_norm.h): sum = residual + delta, written out, and
// normed = rmsnorm(sum) * weight, in one pass over the row's inputs. Shared
// by the CUDA launch (fused_norm_kernels.cu) and the CPU kernel (one lane).
//
// A row is read in packs of V consecutive elements (Pack<T, V>, aligned to
// its size, so that the device loads 16 bytes at once where the row allows;
// V = 1 elsewhere); worker `lane` of `lanes` visits packs lane,
// lane + lanes, ... as row_body.h's workers visit elements.
//
// Precision: each sum element is rounded to T as an elementwise add stores it
// (the compute type C: float for f32, bf16 and f16, double for f64); the sum
// of squares of the rounded sums accumulates in double and the output is
// row_body.h's RmsNormWrite of the rounded sums, so that with one lane and
// V = 1 the result equals an add followed by RmsNorm bit for bit.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// V consecutive elements of T, loaded and stored at once.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// One element of the residual sum, rounded to T.
template <typename T>
DT_HOST_DEVICE inline T ResidualSum(T residual, T delta) {
  return Store<T>(Load(residual) + Load(delta));
}

// The first pass over a row of `packs` packs: writes sum = residual + delta
// and returns the partial sum of squares of the rounded sums.
template <typename T, int V>
DT_HOST_DEVICE inline double AddSquaresPartial(const Pack<T, V>* residual,
                                               const Pack<T, V>* delta,
                                               Pack<T, V>* sum, int64_t packs,
                                               int lane, int lanes) {
  double squares = 0;
  for (int64_t p = lane; p < packs; p += lanes) {
    const Pack<T, V> r = residual[p];
    const Pack<T, V> d = delta[p];
    Pack<T, V> s;
    for (int k = 0; k < V; ++k) {
      s.v[k] = ResidualSum(r.v[k], d.v[k]);
      const double value = Load(s.v[k]);
      squares += value * value;
    }
    sum[p] = s;
  }
  return squares;
}

// The second pass: out = sum * scale * weight (weight null: ones), with
// scale = 1 / sqrt(sum_squares / n + eps) rounded to C, n = packs * V.
// Reads back the packs this worker wrote in the first pass only.
template <typename T, int V>
DT_HOST_DEVICE inline void AddRmsNormWrite(const Pack<T, V>* sum,
                                           const Pack<T, V>* weight,
                                           Pack<T, V>* out, int64_t packs,
                                           double sum_squares, double eps,
                                           int lane, int lanes) {
  using C = Compute<T>;
  const C scale = static_cast<C>(1.0 / Sqrt(sum_squares / (packs * V) + eps));
  for (int64_t p = lane; p < packs; p += lanes) {
    const Pack<T, V> s = sum[p];
    Pack<T, V> w{};
    if (weight != nullptr) w = weight[p];
    Pack<T, V> o;
    for (int k = 0; k < V; ++k) {
      const C factor = weight == nullptr ? C(1) : Load(w.v[k]);
      o.v[k] = Store<T>(Load(s.v[k]) * scale * factor);
    }
    out[p] = o;
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_FUSED_NORM_BODY_H_
