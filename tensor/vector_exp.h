#ifndef DTENSOR_TENSOR_VECTOR_EXP_H_
#define DTENSOR_TENSOR_VECTOR_EXP_H_

#include <cstdint>

namespace dtensor {

// The exp loops of softmax and cross entropy, vectorized: exp(x - shift) of
// n elements by cuda::FastExpOf (dtensor/tensor/cuda/fast_exp.h: for float
// within 2 ulp of the correctly rounded exp; std::exp for double), so the
// values are those of the elementwise Exp op and of the CUDA kernel bodies.

// out[j] = exp(in[j] - shift) for j < n; `in` and `out` do not overlap.
void ExpShifted(const float* in, float* out, int64_t n, float shift);
void ExpShifted(const double* in, double* out, int64_t n, double shift);

// row[j] = exp(row[j] - shift) for j < n.
void ExpShiftedInPlace(float* row, int64_t n, float shift);
void ExpShiftedInPlace(double* row, int64_t n, double shift);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_VECTOR_EXP_H_
