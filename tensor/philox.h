#ifndef DTENSOR_TENSOR_PHILOX_H_
#define DTENSOR_TENSOR_PHILOX_H_

#include <array>
#include <cstdint>

namespace dtensor {

// The Philox-4x32-10 block function of Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011), as in Random123: four 32-bit random
// words for a 128-bit `counter` under a 64-bit `key`.
std::array<uint32_t, 4> Philox4x32x10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_PHILOX_H_
