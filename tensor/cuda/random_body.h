#ifndef DTENSOR_TENSOR_CUDA_RANDOM_BODY_H_
#define DTENSOR_TENSOR_CUDA_RANDOM_BODY_H_

// The Philox stream of dtensor/tensor/generator.h (whose Generator calls these
// functions, so the host and the device draw the same numbers) and the
// per-element body of dropout (dtensor/ops/random_ops.cc's mask), shared by the
// CUDA launch and its host form.

#include <stdint.h>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

struct PhiloxWords {
  uint32_t words[4];
};

// The Philox-4x32-10 block function of Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011), as in Random123: four 32-bit random
// words for a 128-bit `counter` under the 64-bit key (key0, key1).
DT_HOST_DEVICE inline PhiloxWords Philox4x32x10Block(PhiloxWords counter,
                                                     uint32_t key0,
                                                     uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9;  // Golden ratio.
  constexpr uint32_t kWeyl1 = 0xBB67AE85;  // sqrt(3) - 1.
  uint32_t* c = counter.words;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * c[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * c[2];
    const PhiloxWords next = {
        {static_cast<uint32_t>(product1 >> 32) ^ c[1] ^ key0,
         static_cast<uint32_t>(product1),
         static_cast<uint32_t>(product0 >> 32) ^ c[3] ^ key1,
         static_cast<uint32_t>(product0)}};
    counter = next;
  }
  return counter;
}

// Draw `position` of the stream of `seed`: word position % 4 of the block
// for counter position / 4 (low word first), under the key (low, high) 32
// bits of the seed.
DT_HOST_DEVICE inline uint32_t PhiloxDraw(uint64_t seed, uint64_t position) {
  const uint64_t block = position / 4;
  const PhiloxWords counter = {
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0}};
  return Philox4x32x10Block(counter, static_cast<uint32_t>(seed),
                            static_cast<uint32_t>(seed >> 32))
      .words[position % 4];
}

// Uniform in [0, 1) from one draw: its top 24 bits scaled by 2^-24, exact in
// float, at most 1 - 2^-24.
DT_HOST_DEVICE inline float UniformFloatOf(uint32_t draw) {
  return static_cast<float>(draw >> 8) * 0x1p-24f;
}

// ---- Dropout (dtensor/ops/random_ops.cc). ----

// The multiplier of the element at stream `position`: `scale` when its
// uniform float draw is >= p, else 0.
DT_HOST_DEVICE inline double DropoutMultiplier(uint64_t seed, uint64_t position,
                                               double p, double scale) {
  return UniformFloatOf(PhiloxDraw(seed, position)) >= p ? scale : 0.0;
}

// out[i] = x[i] * multiplier for element `i` (row-major) of contiguous x and
// out, the multiplier rounded to T first (the CPU multiplies by the mask
// converted to x's dtype). Its stream position is `base` plus its multi-index
// dotted with the position strides of `positions` (operand 0): the global
// row-major position of the element in the full tensor when x is one block
// of it and `base` the stream offset plus that of the block's first element.
template <typename T>
DT_HOST_DEVICE inline void DropoutElement(const T* x, T* out,
                                          const StridedShape<1>& positions,
                                          uint64_t base, uint64_t seed,
                                          double p, double scale, int64_t i) {
  int64_t offsets[1];
  OperandOffsetsAt(positions, i, offsets);
  const T multiplier = Store<T>(DropoutMultiplier(
      seed, base + static_cast<uint64_t>(offsets[0]), p, scale));
  BinaryElement(BinaryOp::kMul, x + i, &multiplier, out + i);
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_RANDOM_BODY_H_
