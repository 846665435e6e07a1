#include "dtensor/redistribute/chunk_tiling.h"

#include <algorithm>
#include <array>

#include "absl/container/inlined_vector.h"

namespace dtensor {
namespace {

constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;
// Two fixed bases (any in [2, kPrime) will do; fixed, so that every run
// decides alike).
constexpr std::array<uint64_t, 2> kBases = {0x1f3a5c7e9b2d4f61 % kPrime,
                                            0x2b7e151628aed2a7 % kPrime};

uint64_t MulMod(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  const uint64_t low = static_cast<uint64_t>(product & kPrime);
  const uint64_t high = static_cast<uint64_t>(product >> 61);
  const uint64_t sum = low + high;
  return sum >= kPrime ? sum - kPrime : sum;
}

uint64_t AddMod(uint64_t a, uint64_t b) {
  const uint64_t sum = a + b;
  return sum >= kPrime ? sum - kPrime : sum;
}

// A sequence of chunk sizes s_0..s_{n-1} as its length and, per base B, the
// fingerprint sum s_i B^(n-1-i) and B^n (all mod kPrime).
struct Fingerprint {
  int64_t length = 0;
  std::array<uint64_t, 2> hash = {0, 0};
  std::array<uint64_t, 2> power = {1, 1};
};

// The fingerprint of x followed by y.
Fingerprint Concat(const Fingerprint& x, const Fingerprint& y) {
  Fingerprint xy;
  xy.length = x.length + y.length;
  for (size_t k = 0; k < kBases.size(); ++k) {
    xy.hash[k] = AddMod(MulMod(x.hash[k], y.power[k]), y.hash[k]);
    xy.power[k] = MulMod(x.power[k], y.power[k]);
  }
  return xy;
}

// The fingerprint of `count` copies of x, by repeated squaring.
Fingerprint Repeat(Fingerprint x, int64_t count) {
  Fingerprint copies;
  for (; count > 0; count >>= 1) {
    if (count & 1) copies = Concat(copies, x);
    x = Concat(x, x);
  }
  return copies;
}

// The fingerprint of the non-empty chunk sizes of [0, extent) split by
// `sizes` (outermost first), as ChunkOf splits.
Fingerprint ChunksOf(int64_t extent, absl::Span<const int64_t> sizes) {
  if (extent == 0) return {};
  if (sizes.empty()) {
    Fingerprint leaf;
    leaf.length = 1;
    for (size_t k = 0; k < kBases.size(); ++k) {
      leaf.hash[k] = static_cast<uint64_t>(extent) % kPrime;
      leaf.power[k] = kBases[k];
    }
    return leaf;
  }
  // `full` chunks of `chunk`, then the remainder (the rest are empty).
  const int64_t chunk = extent / sizes[0] + (extent % sizes[0] != 0);
  const int64_t full = extent / chunk;
  return Concat(Repeat(ChunksOf(chunk, sizes.subspan(1)), full),
                ChunksOf(extent - full * chunk, sizes.subspan(1)));
}

absl::InlinedVector<int64_t, 8> WithoutOnes(absl::Span<const int64_t> sizes) {
  absl::InlinedVector<int64_t, 8> kept;
  for (int64_t size : sizes) {
    if (size != 1) kept.push_back(size);
  }
  return kept;
}

}  // namespace

bool SameNonEmptyChunks(int64_t extent, absl::Span<const int64_t> a,
                        absl::Span<const int64_t> b) {
  const absl::InlinedVector<int64_t, 8> split_a = WithoutOnes(a);
  const absl::InlinedVector<int64_t, 8> split_b = WithoutOnes(b);
  if (split_a == split_b) return true;
  const Fingerprint fa = ChunksOf(extent, split_a);
  const Fingerprint fb = ChunksOf(extent, split_b);
  return fa.length == fb.length && fa.hash == fb.hash;
}

}  // namespace dtensor
