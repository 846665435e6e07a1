#include "dtensor/tensor/vector_exp.h"

#include <cstdint>

#include "absl/base/attributes.h"
#include "dtensor/tensor/blocked_loop.h"
#include "dtensor/tensor/cuda/fast_exp.h"

namespace dtensor {
namespace {

// __restrict parameters and blocked loops: what GCC needs to vectorize at -O2
// (dtensor/tensor/blocked_loop.h); not inlined, because GCC drops what
// __restrict promises when it inlines them (ExpShifted stayed scalar).
template <typename C>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void ExpShiftedRun(
    const C* __restrict in, C* __restrict out, int64_t n, C shift) {
  ForEachIndexInBlocks(
      n, [&](int64_t j) { out[j] = cuda::FastExpOf(in[j] - shift); });
}

template <typename C>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void ExpShiftedInPlaceRun(
    C* __restrict row, int64_t n, C shift) {
  ForEachIndexInBlocks(
      n, [&](int64_t j) { row[j] = cuda::FastExpOf(row[j] - shift); });
}

}  // namespace

void ExpShifted(const float* in, float* out, int64_t n, float shift) {
  ExpShiftedRun(in, out, n, shift);
}
void ExpShifted(const double* in, double* out, int64_t n, double shift) {
  ExpShiftedRun(in, out, n, shift);
}
void ExpShiftedInPlace(float* row, int64_t n, float shift) {
  ExpShiftedInPlaceRun(row, n, shift);
}
void ExpShiftedInPlace(double* row, int64_t n, double shift) {
  ExpShiftedInPlaceRun(row, n, shift);
}

}  // namespace dtensor
