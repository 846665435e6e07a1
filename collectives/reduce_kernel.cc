#include "dtensor/collectives/reduce_kernel.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "dtensor/tensor/blocked_loop.h"
#include "dtensor/tensor/dispatch.h"

namespace dtensor {
namespace {

// Elements reduced per block: the accumulators stay in L1 while every input
// streams through once.
constexpr int64_t kBlock = 2048;

// What a T accumulates in: float for f32, bf16 and f16 (the 16-bit floats
// compute in f32 like every kernel), T itself otherwise.
template <typename T>
using Accumulator =
    std::conditional_t<std::is_same_v<T, double>, double,
                       std::conditional_t<std::is_integral_v<T>, T, float>>;

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

// The accumulated value stored as T: the average divides by `n`.
template <typename T, ReduceOp kOp>
T Finish(Accumulator<T> acc, int64_t n) {
  if constexpr (std::is_floating_point_v<Accumulator<T>>) {
    using Acc = Accumulator<T>;
    const Acc value = kOp == ReduceOp::kAvg ? acc / static_cast<Acc>(n) : acc;
    return T(value);
  } else {
    return static_cast<T>(acc);
  }
}

// The block loop with `op` fixed at compile time; the inner loops run in
// constant-size blocks so that GCC vectorizes them at -O2. The accumulators
// are a local array, so the stores never alias the inputs.
template <typename T, ReduceOp kOp>
void ReduceTyped(absl::Span<const void* const> inputs,
                 absl::Span<void* const> outputs, int64_t count) {
  using Acc = Accumulator<T>;
  const int64_t n = static_cast<int64_t>(inputs.size());
  Acc acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t length = std::min(kBlock, count - begin);
    // The first pass combines the first two inputs: one pass fewer over the
    // accumulators than starting from a copy of the first.
    const T* first = static_cast<const T*>(inputs[0]) + begin;
    if (n == 1) {
      ForEachIndexInBlocks(
          length, [&](int64_t i) { acc[i] = static_cast<Acc>(first[i]); });
    } else {
      const T* second = static_cast<const T*>(inputs[1]) + begin;
      ForEachIndexInBlocks(length, [&](int64_t i) {
        acc[i] = Combine<Acc>(kOp, static_cast<Acc>(first[i]),
                              static_cast<Acc>(second[i]));
      });
    }
    for (int64_t r = 2; r < n; ++r) {
      const T* in = static_cast<const T*>(inputs[r]) + begin;
      ForEachIndexInBlocks(length, [&](int64_t i) {
        acc[i] = Combine<Acc>(kOp, acc[i], static_cast<Acc>(in[i]));
      });
    }
    // Every input of the block is read: outputs may now overwrite them.
    for (void* out : outputs) {
      T* dst = static_cast<T*>(out) + begin;
      ForEachIndexInBlocks(
          length, [&](int64_t i) { dst[i] = Finish<T, kOp>(acc[i], n); });
    }
  }
}

// AccumulateInto and FinishAccumulated with `op` fixed at compile time.
template <typename T, ReduceOp kOp>
void AccumulateTyped(bool first, const void* input, void* acc_out,
                     int64_t count) {
  using Acc = Accumulator<T>;
  const T* in = static_cast<const T*>(input);
  Acc* acc = static_cast<Acc*>(acc_out);
  if (first) {
    ForEachIndexInBlocks(count,
                         [&](int64_t i) { acc[i] = static_cast<Acc>(in[i]); });
  } else {
    ForEachIndexInBlocks(count, [&](int64_t i) {
      acc[i] = Combine<Acc>(kOp, acc[i], static_cast<Acc>(in[i]));
    });
  }
}

template <typename T, ReduceOp kOp>
void FinishTyped(const void* acc_in, const void* input, int64_t n, void* out,
                 int64_t count) {
  using Acc = Accumulator<T>;
  const Acc* acc = static_cast<const Acc*>(acc_in);
  const T* in = static_cast<const T*>(input);
  T* dst = static_cast<T*>(out);
  ForEachIndexInBlocks(count, [&](int64_t i) {
    dst[i] =
        Finish<T, kOp>(Combine<Acc>(kOp, acc[i], static_cast<Acc>(in[i])), n);
  });
}

// Calls `fn` with a T of `dtype` and `op` as a ReduceOp constant.
template <typename Fn>
void DispatchReduce(DType dtype, ReduceOp op, Fn&& fn) {
  DispatchDType(dtype, [&](auto tag) {
    using Sum = std::integral_constant<ReduceOp, ReduceOp::kSum>;
    using Avg = std::integral_constant<ReduceOp, ReduceOp::kAvg>;
    using Max = std::integral_constant<ReduceOp, ReduceOp::kMax>;
    using Min = std::integral_constant<ReduceOp, ReduceOp::kMin>;
    switch (op) {
      case ReduceOp::kSum:
        return fn(tag, Sum());
      case ReduceOp::kAvg:
        return fn(tag, Avg());
      case ReduceOp::kMax:
        return fn(tag, Max());
      case ReduceOp::kMin:
        return fn(tag, Min());
    }
  });
}

}  // namespace

void ReduceInto(DType dtype, ReduceOp op, absl::Span<const void* const> inputs,
                void* out, int64_t count) {
  void* const outputs[] = {out};
  ReduceIntoEach(dtype, op, inputs, outputs, count);
}

void ReduceIntoEach(DType dtype, ReduceOp op,
                    absl::Span<const void* const> inputs,
                    absl::Span<void* const> outputs, int64_t count) {
  if (inputs.empty() || count <= 0) return;
  DispatchReduce(dtype, op, [&](auto tag, auto kOp) {
    ReduceTyped<decltype(tag), decltype(kOp)::value>(inputs, outputs, count);
  });
}

DType AccumulatorDType(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 ? DType::kF32 : dtype;
}

void AccumulateInto(DType dtype, ReduceOp op, bool first, const void* input,
                    void* acc, int64_t count) {
  if (count <= 0) return;
  DispatchReduce(dtype, op, [&](auto tag, auto kOp) {
    AccumulateTyped<decltype(tag), decltype(kOp)::value>(first, input, acc,
                                                         count);
  });
}

void FinishAccumulated(DType dtype, ReduceOp op, const void* acc,
                       const void* input, int64_t n, void* out, int64_t count) {
  if (count <= 0) return;
  DispatchReduce(dtype, op, [&](auto tag, auto kOp) {
    FinishTyped<decltype(tag), decltype(kOp)::value>(acc, input, n, out, count);
  });
}

}  // namespace dtensor
