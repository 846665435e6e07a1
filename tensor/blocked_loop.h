#ifndef DTENSOR_TENSOR_BLOCKED_LOOP_H_
#define DTENSOR_TENSOR_BLOCKED_LOOP_H_

#include <cstdint>

namespace dtensor {

// Calls `body(i)` for every i in [0, count) in increasing order: in blocks
// of kLoopBlock with a constant trip count, then one at a time.
//
// Why: at -O2 GCC vectorizes a loop only when its trip count is a known
// multiple of the vector length and no runtime alias check is needed, so a
// plain loop over `count` elements stays scalar, while the constant-size
// blocks are vectorized. The caller's pointers must be __restrict-qualified
// function parameters (GCC ignores __restrict on local variables) for the
// compiler to see that the output does not alias the inputs.
inline constexpr int64_t kLoopBlock = 8;

template <typename Body>
inline void ForEachIndexInBlocks(int64_t count, Body&& body) {
  int64_t i = 0;
  for (; i + kLoopBlock <= count; i += kLoopBlock) {
    for (int64_t j = 0; j < kLoopBlock; ++j) body(i + j);
  }
  for (; i < count; ++i) body(i);
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_BLOCKED_LOOP_H_
