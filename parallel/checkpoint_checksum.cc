#include "dtensor/parallel/checkpoint_checksum.h"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace dtensor {
namespace parallel {
namespace {

// The reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82F63B78u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    }
    table[i] = crc;
  }
  return table;
}

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeTable();
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc = (crc >> 8) ^ table[(crc ^ bytes[i]) & 0xFFu];
  }
  return ~crc;
}

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
#if defined(__SSE4_2__)
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, sizeof(word));
    state = _mm_crc32_u64(state, word);
  }
  uint32_t tail = static_cast<uint32_t>(state);
  for (; i < size; ++i) tail = _mm_crc32_u8(tail, bytes[i]);
  return ~tail;
#else
  return Crc32cPortable(data, size, crc);
#endif
}

}  // namespace parallel
}  // namespace dtensor
