#ifndef DTENSOR_TENSOR_CUDA_MMA_FRAGMENTS_H_
#define DTENSOR_TENSOR_CUDA_MMA_FRAGMENTS_H_

// Where the 32 lanes of a warp hold the elements of the operands of the
// tensor-core product `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`
// (D [16x8] f32 = A [16x16] B [16x8] + C), and of `ldmatrix ... m8n8` loads,
// as the PTX ISA documents them ("Matrix Fragments for mma.m16n8k16 with
// floating point type", "Warp-level matrix load instruction: ldmatrix").
// The device wrappers are in mma_sync.cuh; these maps are what kernels index
// their registers with, and what CPU tests emulate a warp's product with
// (EmulateMma), so that a kernel's fragment bookkeeping is checked without a
// device.
//
// Lane l is (group g = l / 4, thread t = l % 4). A register of a 16-bit
// operand holds two elements: `half` 0 in its low 16 bits (the lower column
// of A, the lower k row of B).

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

inline constexpr int kMmaM = 16;
inline constexpr int kMmaN = 8;
inline constexpr int kMmaK = 16;
inline constexpr int kWarpLanes = 32;
// log2(e): the tensor-core kernels' softmax runs on exp2, the scores' scale
// (and the log-sum-exps) prescaled by it.
inline constexpr float kFa2Log2e = 1.4426950408889634f;

// A (row, column) of an operand or of an 8x8 ldmatrix tile.
struct FragmentElement {
  int row;
  int col;
};

// A [16 x 16], four registers: (g, 2t), (g + 8, 2t), (g, 2t + 8),
// (g + 8, 2t + 8), each with its next column. Requires: reg < 4, half < 2.
DT_HOST_DEVICE constexpr FragmentElement MmaAElement(int lane, int reg,
                                                     int half) {
  return {lane / 4 + reg % 2 * 8, lane % 4 * 2 + half + reg / 2 * 8};
}

// B [16 (k) x 8 (n)], two registers: (2t, g), (2t + 8, g), each with the next
// k row. `row` is k, `col` is n. Requires: reg < 2, half < 2.
DT_HOST_DEVICE constexpr FragmentElement MmaBElement(int lane, int reg,
                                                     int half) {
  return {lane % 4 * 2 + half + reg * 8, lane / 4};
}

// C and D [16 x 8] f32, four values: (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1). Requires: i < 4.
DT_HOST_DEVICE constexpr FragmentElement MmaCElement(int lane, int i) {
  return {lane / 4 + i / 2 * 8, lane % 4 * 2 + i % 2};
}

// The accumulators of two adjacent n tiles (columns [16j, 16j + 8) and
// [16j + 8, 16j + 16) of a [16 x 16k] product) are, element for element, the
// A operand of the 16 columns [16j, 16j + 16): what lets a kernel feed its
// scores' accumulators (rounded) straight into the next product
// (FlashAttention-2's P V). Which accumulator value of which of the two tiles
// A's (reg, half) is: tile = reg / 2, value = reg % 2 * 2 + half.
DT_HOST_DEVICE constexpr int AccumulatorTileOfA(int reg) { return reg / 2; }
DT_HOST_DEVICE constexpr int AccumulatorValueOfA(int reg, int half) {
  return reg % 2 * 2 + half;
}

// `ldmatrix.x4` (and .x2, .x1 on the first matrices): lane l gives the
// address of row l % 8 of matrix l / 8; register i of every lane receives
// matrix i's element (l / 4, 2 (l % 4) + half), or with .trans the element
// (2 (l % 4) + half, l / 4) of the matrix as stored.
DT_HOST_DEVICE constexpr FragmentElement LdMatrixElement(int lane, int half,
                                                         bool trans) {
  return trans ? FragmentElement{lane % 4 * 2 + half, lane / 4}
               : FragmentElement{lane / 4, lane % 4 * 2 + half};
}

// The warp's product on the host: d[l][i] += sum over k of A (row, k) B (k,
// col) for (row, col) = MmaCElement(l, i), with A and B given as the lanes'
// registers (a[l][reg][half], b[l][reg][half], already rounded to the input
// type) and the sum in f32 in k order (the device's order of additions is
// unspecified; tests compare with a tolerance).
inline void EmulateMma(const float (&a)[kWarpLanes][4][2],
                       const float (&b)[kWarpLanes][2][2],
                       float (&d)[kWarpLanes][4]) {
  float a_matrix[kMmaM][kMmaK] = {};
  float b_matrix[kMmaK][kMmaN] = {};
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int reg = 0; reg < 4; ++reg) {
        const FragmentElement e = MmaAElement(lane, reg, half);
        a_matrix[e.row][e.col] = a[lane][reg][half];
      }
      for (int reg = 0; reg < 2; ++reg) {
        const FragmentElement e = MmaBElement(lane, reg, half);
        b_matrix[e.row][e.col] = b[lane][reg][half];
      }
    }
  }
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const FragmentElement e = MmaCElement(lane, i);
      float sum = d[lane][i];
      for (int k = 0; k < kMmaK; ++k) {
        sum += a_matrix[e.row][k] * b_matrix[k][e.col];
      }
      d[lane][i] = sum;
    }
  }
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_MMA_FRAGMENTS_H_
