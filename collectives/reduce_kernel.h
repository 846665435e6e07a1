#ifndef DTENSOR_COLLECTIVES_REDUCE_KERNEL_H_
#define DTENSOR_COLLECTIVES_REDUCE_KERNEL_H_

#include <cstdint>

#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor {

// out[i] = the `op` reduction of inputs[0][i], inputs[1][i], ... for i in
// [0, count), combined in the order of `inputs`, so that every rank that
// reduces the same inputs gets the same bits. All buffers are contiguous and
// hold `dtype`. f32, bf16 and f16 accumulate in float and f64 in double,
// rounding once at the end (a sum of two values is exactly the correctly
// rounded sum); integers wrap around like two's complement; kAvg divides the
// sum by inputs.size() (callers reject it for non-floating dtypes). `out` may
// be one of the inputs (the same address, not a shifted overlap).
void ReduceInto(DType dtype, ReduceOp op, absl::Span<const void* const> inputs,
                void* out, int64_t count);

// ReduceInto that writes the result into every one of `outputs` in the same
// pass (an all_reduce slice lands in every rank's buffer while it is in
// cache). Each output may be one of the inputs (the same address).
void ReduceIntoEach(DType dtype, ReduceOp op,
                    absl::Span<const void* const> inputs,
                    absl::Span<void* const> outputs, int64_t count);

// A reduction chained over the ranks (a pipeline in which each rank
// combines its own input into the partial result of the ranks before it)
// with ReduceInto's bits at the end of the chain: the partial results are
// kept in the dtype ReduceInto accumulates in, AccumulatorDType(dtype) (f32
// for the 16-bit floats, `dtype` itself otherwise).
DType AccumulatorDType(DType dtype);

// A step of the chain: `acc` (`count` elements of AccumulatorDType(dtype))
// becomes `input` (`dtype`) when `first` (the chain's first rank), otherwise
// the `op` combination of `acc` and `input`, in that order.
void AccumulateInto(DType dtype, ReduceOp op, bool first, const void* input,
                    void* acc, int64_t count);

// The chain's last step, over `n` inputs in all: `out` (`dtype`) = `acc`
// combined with `input` and rounded (kAvg: divided by n) as ReduceInto
// does. `out` may be `input` (the same address).
void FinishAccumulated(DType dtype, ReduceOp op, const void* acc,
                       const void* input, int64_t n, void* out, int64_t count);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_REDUCE_KERNEL_H_
