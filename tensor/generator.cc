#include "dtensor/tensor/generator.h"

#include <cmath>

#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/philox.h"

namespace dtensor {

std::array<uint32_t, 4> Philox4x32x10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  const cuda::PhiloxWords block = cuda::Philox4x32x10Block(
      {{counter[0], counter[1], counter[2], counter[3]}}, key[0], key[1]);
  return {block.words[0], block.words[1], block.words[2], block.words[3]};
}

// Draw i of the stream: cuda::PhiloxDraw(seed, i) (word i % 4 of the block
// for counter i / 4), with the last block kept for the next three draws.
uint32_t Generator::NextU32() {
  const uint64_t block = offset_ / 4;
  if (!cached_block_valid_ || cached_block_index_ != block) {
    cached_block_ = Philox4x32x10(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0,
         0},
        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    cached_block_index_ = block;
    cached_block_valid_ = true;
  }
  return cached_block_[offset_++ % 4];
}

float Generator::NextUniformFloat() { return cuda::UniformFloatOf(NextU32()); }

double Generator::NextUniformDouble() {
  // 27 bits from the first draw and 26 from the second, scaled by 2^-53.
  const uint64_t high = NextU32() >> 5;
  const uint64_t low = NextU32() >> 6;
  return static_cast<double>((high << 26) | low) * 0x1p-53;
}

double Generator::NextNormal() {
  // Box-Muller from two 32-bit draws, keeping only the cosine branch so that
  // normal i always uses draws 2i and 2i + 1. radius_draw lies in (0, 1], so
  // the log is finite.
  const double radius_draw = (static_cast<double>(NextU32()) + 1.0) * 0x1p-32;
  const double angle_draw = static_cast<double>(NextU32()) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(radius_draw)) *
         std::cos(2.0 * M_PI * angle_draw);
}

}  // namespace dtensor
