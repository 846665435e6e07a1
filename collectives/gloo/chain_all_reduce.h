#ifndef DTENSOR_COLLECTIVES_GLOO_CHAIN_ALL_REDUCE_H_
#define DTENSOR_COLLECTIVES_GLOO_CHAIN_ALL_REDUCE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/dtype.h"
#include "gloo/context.h"

namespace dtensor {

// all_reduce whose results are the in-process backend's bits (ReduceInto of
// the ranks' inputs in rank order) with messages linear in the ranks. The
// flattened tensor is cut into chunks; chunk c's partial result flows
// rank 0 -> 1 -> ... -> n-1 in the accumulator dtype (reduce_kernel.h),
// each rank combining its own elements, and the last rank finishes it and
// sends the result down the chain n-1 -> 0 -> 1 -> ... -> n-2. The chunks
// are pipelined: rank r works on chunk c while rank r+1 works on chunk c-1.
// 2 (n - 1) messages a chunk in all; each link carries the tensor once in
// the accumulator dtype and once in `dtype`.
//
// `data` is `count` contiguous elements of `dtype`, this rank's input and,
// on return, the result. `partial_slot` and `result_slot` are Gloo slots no
// other message of the context uses meanwhile. Every rank must pass the same
// dtype, op and count.
// Requires: context.size >= 2.
// Throws Gloo's exceptions (a timeout at `deadline`, a lost peer).
void ChainAllReduce(gloo::Context& context, DType dtype, ReduceOp op,
                    void* data, int64_t count, uint64_t partial_slot,
                    uint64_t result_slot, absl::Time deadline);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_CHAIN_ALL_REDUCE_H_
