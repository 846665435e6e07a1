#ifndef DTENSOR_PARALLEL_CHECKPOINT_CHECKSUM_H_
#define DTENSOR_PARALLEL_CHECKPOINT_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace dtensor {
namespace parallel {

// CRC-32C (Castagnoli, the iSCSI / ext4 / gRPC checksum) of `size` bytes at
// `data`, continuing from `crc` (0 for a fresh checksum): Crc32c("123456789")
// is 0xE3069283, and Crc32c(b, Crc32c(a)) is the checksum of a followed by b.
// Uses the SSE4.2 crc32 instruction when the build targets it (x86-64-v2),
// else Crc32cPortable.
// Requires: `data` points to `size` readable bytes (any pointer, null
// included, when `size` is 0).
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// The same function computed a byte at a time from a table: the fallback of
// Crc32c, kept callable so that tests can compare the two.
uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_CHECKPOINT_CHECKSUM_H_
