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

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_REDUCE_KERNEL_H_
