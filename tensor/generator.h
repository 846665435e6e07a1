#ifndef DTENSOR_TENSOR_GENERATOR_H_
#define DTENSOR_TENSOR_GENERATOR_H_

#include <array>
#include <cstdint>

namespace dtensor {

// A counter-based random generator (Philox-4x32-10): the value at position i
// of the stream of `seed` depends only on (seed, i), so the same seed gives the
// same numbers on every machine, and any position can be reached without
// drawing the ones before it (ranks derive their stream from the global offset
// of their shard).
class Generator {
 public:
  explicit Generator(uint64_t seed, uint64_t offset = 0)
      : seed_(seed), offset_(offset) {}

  uint64_t seed() const { return seed_; }
  // Position in the stream of 32-bit draws.
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

  // The next 32 random bits.
  uint32_t NextU32();
  // Uniform in [0, 1), 24 bits of precision (one draw).
  float NextUniformFloat();
  // Uniform in [0, 1), 53 bits of precision (two draws).
  double NextUniformDouble();
  // Standard normal by Box-Muller (two draws, one normal).
  double NextNormal();

 private:
  uint64_t seed_;
  uint64_t offset_;
  // The last Philox block computed: four consecutive draws share one.
  bool cached_block_valid_ = false;
  uint64_t cached_block_index_ = 0;
  std::array<uint32_t, 4> cached_block_{};
};

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_GENERATOR_H_
