#include "collectives/reduce_kernel.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/dispatch.h"

namespace dtensor {
namespace {

// Elements reduced per block: the accumulators stay in L1 while every input
// streams through once.
constexpr int64_t kBlock = 2048;

template <typename T>
using Accumulator =
    std::conditional_t<std::is_same_v<T, bool>, bool,
                       std::conditional_t<std::is_integral_v<T>, T, double>>;

template <typename Acc>
Acc Combine(ReduceOp op, Acc acc, Acc x) {
  if constexpr (std::is_same_v<Acc, bool>) {
    return op == ReduceOp::kMin ? (acc && x) : (acc || x);
  } else if constexpr (std::is_integral_v<Acc>) {
    using Unsigned = std::make_unsigned_t<Acc>;
    switch (op) {
      case ReduceOp::kMax:
        return std::max(acc, x);
      case ReduceOp::kMin:
        return std::min(acc, x);
      default:  // Sum (and avg, which integers never reach) wrap around.
        return static_cast<Acc>(static_cast<Unsigned>(acc) +
                                static_cast<Unsigned>(x));
    }
  } else {
    switch (op) {
      case ReduceOp::kMax:
        return (std::isnan(acc) || acc >= x) ? acc : x;
      case ReduceOp::kMin:
        return (std::isnan(acc) || acc <= x) ? acc : x;
      default:
        return acc + x;
    }
  }
}

// The accumulated value stored as T: the average divides by `n`, the 16-bit
// floats round through float.
template <typename T, ReduceOp kOp>
T Finish(Accumulator<T> acc, int64_t n) {
  if constexpr (std::is_floating_point_v<Accumulator<T>>) {
    const double value = kOp == ReduceOp::kAvg ? acc / n : acc;
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
      return T(static_cast<float>(value));
    } else {
      return static_cast<T>(value);
    }
  } else {
    return static_cast<T>(acc);
  }
}

// The block loop with `op` fixed at compile time so that the inner loops
// vectorize.
template <typename T, ReduceOp kOp>
void ReduceTyped(absl::Span<const void* const> inputs, T* out, int64_t count) {
  using Acc = Accumulator<T>;
  const int64_t n = static_cast<int64_t>(inputs.size());
  Acc acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t length = std::min(kBlock, count - begin);
    const T* first = static_cast<const T*>(inputs[0]) + begin;
    for (int64_t i = 0; i < length; ++i) acc[i] = static_cast<Acc>(first[i]);
    for (int64_t r = 1; r < n; ++r) {
      const T* in = static_cast<const T*>(inputs[r]) + begin;
      for (int64_t i = 0; i < length; ++i) {
        acc[i] = Combine<Acc>(kOp, acc[i], static_cast<Acc>(in[i]));
      }
    }
    T* dst = out + begin;
    for (int64_t i = 0; i < length; ++i) dst[i] = Finish<T, kOp>(acc[i], n);
  }
}

}  // namespace

void ReduceInto(DType dtype, ReduceOp op, absl::Span<const void* const> inputs,
                void* out, int64_t count) {
  if (inputs.empty() || count <= 0) return;
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* typed_out = static_cast<T*>(out);
    switch (op) {
      case ReduceOp::kSum:
        return ReduceTyped<T, ReduceOp::kSum>(inputs, typed_out, count);
      case ReduceOp::kAvg:
        return ReduceTyped<T, ReduceOp::kAvg>(inputs, typed_out, count);
      case ReduceOp::kMax:
        return ReduceTyped<T, ReduceOp::kMax>(inputs, typed_out, count);
      case ReduceOp::kMin:
        return ReduceTyped<T, ReduceOp::kMin>(inputs, typed_out, count);
    }
  });
}

}  // namespace dtensor
