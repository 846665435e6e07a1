#ifndef DTENSOR_TENSOR_BLOCKED_LOOP_H_
#define DTENSOR_TENSOR_BLOCKED_LOOP_H_

#include <cstdint>

#include "absl/base/attributes.h"

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

// Marks a loop function (not inlined, __restrict parameters, blocked loops)
// to be compiled twice, for AVX2 and for the baseline (-march=x86-64-v2), the
// loader picking one by the CPU (GCC function multiversioning): 8 float lanes
// where the machine has them, 4 elsewhere. AVX2 without FMA, so that both
// clones round as the scalar forms do (fast_exp_test checks the bits). Not
// under the sanitizers: the loader runs the clone's resolver before their
// runtime exists, and the instrumented resolver crashes (ThreadSanitizer).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define DT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DT_VECTOR_CLONES
#endif

// Always inlined: called out of line, the body's pointers lose the
// __restrict of the caller's parameters and the blocks stay scalar (as in a
// DT_VECTOR_CLONES clone, which GCC's inliner otherwise skips).
template <typename Body>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void ForEachIndexInBlocks(int64_t count,
                                                              Body&& body) {
  int64_t i = 0;
  for (; i + kLoopBlock <= count; i += kLoopBlock) {
    for (int64_t j = 0; j < kLoopBlock; ++j) body(i + j);
  }
  for (; i < count; ++i) body(i);
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_BLOCKED_LOOP_H_
