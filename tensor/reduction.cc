#include "dtensor/tensor/reduction.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/fixed_array.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/blocked_loop.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/reduction_cuda.h"
#include "dtensor/tensor/strided_loop.h"

namespace dtensor {
namespace {

using internal::CheckCpu;

// Which elements of the input fold into which element of the result.
struct ReductionPlan {
  // Per input dim: whether it is reduced.
  std::vector<bool> reduced;
  // Elements folded into each result element.
  int64_t count = 1;
  // The result element of each input element, as strides over the input's
  // dims: row-major over the kept dims and 0 on the reduced ones. The result
  // is laid out the same way with or without keepdim.
  Strides result_strides;
  Shape result_shape;
  int64_t result_numel = 1;
};

absl::StatusOr<ReductionPlan> PlanReduction(absl::string_view op,
                                            const Tensor& a,
                                            absl::Span<const int64_t> dims,
                                            bool keepdim) {
  DT_RETURN_IF_ERROR(CheckCpu(a, op, "a"));
  const int64_t rank = a.dim();
  ReductionPlan plan;
  plan.reduced.assign(rank, dims.empty());
  // A 0-d tensor accepts dim 0 (or -1), as in torch; it has nothing to fold.
  std::vector<bool> seen(std::max<int64_t>(rank, 1), false);
  for (int64_t dim : dims) {
    absl::StatusOr<int64_t> d = NormalizeDim(dim, std::max<int64_t>(rank, 1));
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", d.status().message()));
    }
    if (seen[*d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": dim ", dim, " repeats in dims [",
                       absl::StrJoin(dims, ", "), "]"));
    }
    seen[*d] = true;
    if (rank > 0) plan.reduced[*d] = true;
  }
  plan.result_strides.assign(rank, 0);
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (plan.reduced[d]) {
      plan.count *= a.shape()[d];
    } else {
      plan.result_strides[d] = plan.result_numel;
      plan.result_numel *= a.shape()[d];
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (!plan.reduced[d]) {
      plan.result_shape.push_back(a.shape()[d]);
    } else if (keepdim) {
      plan.result_shape.push_back(1);
    }
  }
  return plan;
}

// PlanReduction for a reduction of floating dtypes only (on the CPU).
absl::StatusOr<ReductionPlan> PlanFloatingReduction(
    absl::string_view op, const Tensor& a, absl::Span<const int64_t> dims,
    bool keepdim) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingCpu(a, op, "a"));
  return PlanReduction(op, a, dims, keepdim);
}

// Max, min and argmax have no value for an empty extent.
absl::Status CheckNonEmptyExtent(absl::string_view op, const Tensor& a,
                                 absl::Span<const int64_t> dims,
                                 const ReductionPlan& plan) {
  if (plan.count > 0) return absl::OkStatus();
  const std::string reduced =
      dims.empty() ? "all dims"
                   : absl::StrCat("dims [", absl::StrJoin(dims, ", "), "]");
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": the reduced extent (", reduced, " of shape ",
                   ShapeToString(a.shape()), ") is empty"));
}

// ForEachStridedRun over `shape` with the dims reordered so that operand 1
// (the tensor being reduced) is walked in memory order: by decreasing stride,
// ties broken by operand 0's strides. Innermost and outer reductions of a
// contiguous tensor thus both read it sequentially.
template <size_t N, typename RunFn>
void ForEachRunInMemoryOrder(absl::Span<const int64_t> shape,
                             const std::array<Strides, N>& strides,
                             RunFn&& run) {
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    return std::make_pair(strides[1][i], strides[0][i]) >
           std::make_pair(strides[1][j], strides[0][j]);
  });
  Shape sorted_shape;
  std::array<Strides, N> sorted_strides;
  for (size_t d : order) {
    sorted_shape.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) sorted_strides[k].push_back(strides[k][d]);
  }
  std::array<absl::Span<const int64_t>, N> spans;
  for (size_t k = 0; k < N; ++k) spans[k] = sorted_strides[k];
  ForEachStridedRun<N>(sorted_shape, spans, OperandOffsets<N>{},
                       std::forward<RunFn>(run));
}

// ---- Reducers: a reducer folds the terms of the input elements into
// accumulators of type Acc. `Term(x, result)` is the term of input value x
// that folds into result element `result`; Combine is associative and
// `identity` is its neutral element; kSelects says whether Combine picks one
// of its operands (max, min) rather than computing (sums). ----

template <typename Acc>
struct SumReducer {
  using AccType = Acc;
  static constexpr bool kSelects = false;
  Acc identity = 0;
  Acc Term(Acc x, int64_t /*result*/) const { return x; }
  static Acc Combine(Acc a, Acc b) { return a + b; }
};

// Squares: the squared 2-norm.
struct SquareSumReducer {
  using AccType = double;
  static constexpr bool kSelects = false;
  double identity = 0;
  double Term(double x, int64_t /*result*/) const { return x * x; }
  static double Combine(double a, double b) { return a + b; }
};

// Squared deviations from a per-result-element mean: the numerator of var.
struct SquaredDeviationReducer {
  using AccType = double;
  static constexpr bool kSelects = false;
  const double* mean;
  double identity = 0;
  double Term(double x, int64_t result) const {
    const double deviation = x - mean[result];
    return deviation * deviation;
  }
  static double Combine(double a, double b) { return a + b; }
};

// The least value of C: -inf for the floating types.
template <typename C>
constexpr C Lowest() {
  if constexpr (std::numeric_limits<C>::has_infinity) {
    return -std::numeric_limits<C>::infinity();
  } else {
    return std::numeric_limits<C>::lowest();
  }
}

template <typename C>
constexpr C Highest() {
  if constexpr (std::numeric_limits<C>::has_infinity) {
    return std::numeric_limits<C>::infinity();
  } else {
    return std::numeric_limits<C>::max();
  }
}

// Which extreme a max/min reduction selects.
enum class Extreme { kMax, kMin };

// Selects the maximum or the minimum; NaN propagates, like torch.amax.
template <typename C, Extreme kWhich>
struct ExtremeReducer {
  using AccType = C;
  static constexpr bool kSelects = true;
  C identity = kWhich == Extreme::kMax ? Lowest<C>() : Highest<C>();
  C Term(C x, int64_t /*result*/) const { return x; }
  static C Combine(C a, C b) {
    const bool beyond = kWhich == Extreme::kMax ? b > a : b < a;
    return (beyond || b != b) ? b : a;
  }
};

// Converts an input element to an accumulator.
template <typename Acc, typename T>
Acc ToAcc(T x) {
  return static_cast<Acc>(static_cast<ComputeType<T>>(x));
}

// Folds `count` elements p[0], p[step], ... into one value. Unit steps keep
// kLoopBlock independent partial results, which the compiler vectorizes and
// whose combines overlap. How GCC vectorizes them best depends on Combine:
// arithmetic ones (sums) fully unrolled, with the partial results in
// registers; selecting ones (max, min) only in the loop vectorizer, which
// if-converts the selection but keeps the partial results in memory.
template <typename T, typename Reducer>
typename Reducer::AccType FoldRun(const T* p, int64_t step, int64_t count,
                                  int64_t result, const Reducer& reducer) {
  using Acc = typename Reducer::AccType;
  const auto term = [&](int64_t i) {
    return reducer.Term(ToAcc<Acc>(p[i * step]), result);
  };
  if (step != 1) {
    Acc total = reducer.identity;
    for (int64_t i = 0; i < count; ++i) {
      total = Reducer::Combine(total, term(i));
    }
    return total;
  }
  Acc partial[kLoopBlock];
  std::fill(partial, partial + kLoopBlock, reducer.identity);
  const auto fold = [&](int64_t i, int64_t j) {
    partial[j] = Reducer::Combine(partial[j],
                                  reducer.Term(ToAcc<Acc>(p[i + j]), result));
  };
  int64_t i = 0;
  if constexpr (Reducer::kSelects) {
    for (; i + kLoopBlock <= count; i += kLoopBlock) {
      for (int64_t j = 0; j < kLoopBlock; ++j) fold(i, j);
    }
  } else {
    for (; i + kLoopBlock <= count; i += kLoopBlock) {
#pragma GCC unroll 8  // = kLoopBlock
      for (int64_t j = 0; j < kLoopBlock; ++j) fold(i, j);
    }
  }
  for (; i < count; ++i) partial[0] = Reducer::Combine(partial[0], term(i));
  for (int64_t width = kLoopBlock / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) {
      partial[j] = Reducer::Combine(partial[j], partial[j + width]);
    }
  }
  return partial[0];
}

// r[i] = Combine(r[i], term of p[i]) for i < count, where r[i] is result
// element first_result + i. Not inlined: GCC drops what __restrict promises
// when it inlines, and then no longer vectorizes the loop.
template <typename T, typename Reducer>
ABSL_ATTRIBUTE_NOINLINE DT_VECTOR_CLONES void AccumulateRun(
    typename Reducer::AccType* __restrict r, const T* __restrict p,
    int64_t count, int64_t first_result, const Reducer& reducer) {
  using Acc = typename Reducer::AccType;
  ForEachIndexInBlocks(count, [&](int64_t i) {
    r[i] = Reducer::Combine(r[i],
                            reducer.Term(ToAcc<Acc>(p[i]), first_result + i));
  });
}

// Folds every element of `a` (storage type T) into acc[its result element];
// `acc` holds plan.result_numel accumulators, already initialised.
template <typename T, typename Reducer>
void ReduceInto(const Tensor& a, const ReductionPlan& plan,
                const Reducer& reducer, typename Reducer::AccType* acc) {
  using Acc = typename Reducer::AccType;
  const T* const data = a.data<T>();
  ForEachRunInMemoryOrder<2>(
      a.shape(), {plan.result_strides, a.strides()},
      [&](const OperandOffsets<2>& offsets, const OperandOffsets<2>& steps,
          int64_t count) {
        Acc* const r = acc + offsets[0];
        const T* const p = data + offsets[1];
        if (steps[0] == 0) {  // The whole run folds into one result element.
          *r = Reducer::Combine(
              *r, FoldRun(p, steps[1], count, offsets[0], reducer));
        } else if (steps[0] == 1 && steps[1] == 1) {
          AccumulateRun(r, p, count, offsets[0], reducer);
        } else {
          for (int64_t i = 0; i < count; ++i) {
            const int64_t result = offsets[0] + i * steps[0];
            r[i * steps[0]] = Reducer::Combine(
                r[i * steps[0]],
                reducer.Term(ToAcc<Acc>(p[i * steps[1]]), result));
          }
        }
      });
}

// Runs `reducer` over `a` and returns the accumulators, one per result
// element (row-major).
template <typename T, typename Reducer>
absl::FixedArray<typename Reducer::AccType> Reduce(const Tensor& a,
                                                   const ReductionPlan& plan,
                                                   const Reducer& reducer) {
  absl::FixedArray<typename Reducer::AccType> acc(plan.result_numel,
                                                  reducer.identity);
  ReduceInto<T>(a, plan, reducer, acc.data());
  return acc;
}

// A contiguous tensor of `dtype` (storage type Out) with the plan's result
// shape, holding `values` converted.
template <typename Out, typename Acc>
absl::StatusOr<Tensor> MakeResult(const ReductionPlan& plan,
                                  const absl::FixedArray<Acc>& values) {
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(plan.result_shape, CppToDType<Out>()));
  Out* const data = out.data<Out>();
  for (size_t i = 0; i < values.size(); ++i) {
    data[i] = ConvertValue<Out>(values[i]);
  }
  return out;
}

// The per-result-element sums of `a` (floating) divided by `count`.
template <typename T>
absl::FixedArray<double> MeanOf(const Tensor& a, const ReductionPlan& plan) {
  absl::FixedArray<double> mean = Reduce<T>(a, plan, SumReducer<double>());
  for (double& m : mean) m /= static_cast<double>(plan.count);
  return mean;
}

// Folds, for each result element, its elements of `a` along `dim` into the
// value and (in `index`) the position of their first maximum; NaN counts as
// the greatest value.
template <typename T>
void ArgmaxInto(const Tensor& a, const ReductionPlan& plan, int64_t dim,
                int64_t* index) {
  using C = ComputeType<T>;
  // a.data is walked in memory order; the position along `dim` rides along as
  // a third operand whose only non-zero stride is 1 on `dim`.
  Strides position(a.dim(), 0);
  position[dim] = 1;
  absl::FixedArray<C> best(plan.result_numel, Lowest<C>());
  std::fill(index, index + plan.result_numel, 0);
  const T* const data = a.data<T>();
  const auto greater = [](C x, C current) {
    return x > current || (x != x && current == current);
  };
  ForEachRunInMemoryOrder<3>(
      a.shape(), {plan.result_strides, a.strides(), position},
      [&](const OperandOffsets<3>& offsets, const OperandOffsets<3>& steps,
          int64_t count) {
        if (steps[0] == 0) {  // A run along `dim`: one result element.
          C run_best = best[offsets[0]];
          int64_t run_index = index[offsets[0]];
          for (int64_t i = 0; i < count; ++i) {
            const C x = static_cast<C>(data[offsets[1] + i * steps[1]]);
            if (greater(x, run_best)) {
              run_best = x;
              run_index = offsets[2] + i * steps[2];
            }
          }
          best[offsets[0]] = run_best;
          index[offsets[0]] = run_index;
          return;
        }
        for (int64_t i = 0; i < count; ++i) {
          const int64_t r = offsets[0] + i * steps[0];
          const C x = static_cast<C>(data[offsets[1] + i * steps[1]]);
          if (greater(x, best[r])) {
            best[r] = x;
            index[r] = offsets[2] + i * steps[2];
          }
        }
      });
}

// Max or Min: the CUDA kernel for device tensors, else ExtremeReducer over
// the CPU elements (an empty extent has no extreme: an error).
template <Extreme kWhich>
absl::StatusOr<Tensor> ReduceExtreme(const Tensor& a,
                                     absl::Span<const int64_t> dims,
                                     bool keepdim) {
  constexpr bool kMax = kWhich == Extreme::kMax;
  const absl::string_view op = kMax ? "Max" : "Min";
  if (cuda::OnCuda(a)) {
    return cuda::ReduceOnDevice(
        kMax ? cuda::ReduceOp::kMax : cuda::ReduceOp::kMin, false, op, a, dims,
        keepdim);
  }
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanReduction(op, a, dims, keepdim));
  DT_RETURN_IF_ERROR(CheckNonEmptyExtent(op, a, dims, plan));
  return DispatchDType(a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = decltype(tag);
    return MakeResult<T>(
        plan, Reduce<T>(a, plan, ExtremeReducer<ComputeType<T>, kWhich>()));
  });
}

}  // namespace

absl::StatusOr<Tensor> Sum(const Tensor& a, absl::Span<const int64_t> dims,
                           bool keepdim) {
  if (cuda::OnCuda(a)) {
    return cuda::ReduceOnDevice(cuda::ReduceOp::kSum, false, "Sum", a, dims,
                                keepdim);
  }
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanReduction("Sum", a, dims, keepdim));
  return DispatchDType(a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<ComputeType<T>>) {
      return MakeResult<T>(plan, Reduce<T>(a, plan, SumReducer<double>()));
    } else {
      // Integers wrap around in an unsigned accumulator; the result is i64.
      return MakeResult<int64_t>(plan,
                                 Reduce<T>(a, plan, SumReducer<uint64_t>()));
    }
  });
}

absl::StatusOr<Tensor> Mean(const Tensor& a, absl::Span<const int64_t> dims,
                            bool keepdim) {
  if (cuda::OnCuda(a)) {
    return cuda::ReduceOnDevice(cuda::ReduceOp::kSum, true, "Mean", a, dims,
                                keepdim);
  }
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanFloatingReduction("Mean", a, dims, keepdim));
  return internal::DispatchFloatingDType(
      a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        return MakeResult<T>(plan, MeanOf<T>(a, plan));
      });
}

absl::StatusOr<Tensor> Max(const Tensor& a, absl::Span<const int64_t> dims,
                           bool keepdim) {
  return ReduceExtreme<Extreme::kMax>(a, dims, keepdim);
}

absl::StatusOr<Tensor> Min(const Tensor& a, absl::Span<const int64_t> dims,
                           bool keepdim) {
  return ReduceExtreme<Extreme::kMin>(a, dims, keepdim);
}

absl::StatusOr<Tensor> SumOfSquares(const Tensor& a,
                                    absl::Span<const int64_t> dims,
                                    bool keepdim) {
  if (cuda::OnCuda(a)) {
    return cuda::ReduceOnDevice(cuda::ReduceOp::kSumSquares, false,
                                "SumOfSquares", a, dims, keepdim);
  }
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanFloatingReduction("SumOfSquares", a, dims, keepdim));
  return internal::DispatchFloatingDType(
      a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        return MakeResult<double>(plan, Reduce<T>(a, plan, SquareSumReducer()));
      });
}

absl::StatusOr<Tensor> Var(const Tensor& a, absl::Span<const int64_t> dims,
                           int64_t correction, bool keepdim) {
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanFloatingReduction("Var", a, dims, keepdim));
  return internal::DispatchFloatingDType(
      a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
        using T = decltype(tag);
        // Two passes (mean, then squared deviations) stay accurate where
        // E[x^2] - E[x]^2 would cancel.
        const absl::FixedArray<double> mean = MeanOf<T>(a, plan);
        absl::FixedArray<double> var =
            Reduce<T>(a, plan, SquaredDeviationReducer{mean.data()});
        const double divisor =
            static_cast<double>(std::max<int64_t>(plan.count - correction, 0));
        for (double& v : var) v /= divisor;
        return MakeResult<T>(plan, var);
      });
}

absl::StatusOr<Tensor> Argmax(const Tensor& a, int64_t dim, bool keepdim) {
  const int64_t dims[] = {dim};
  DT_ASSIGN_OR_RETURN(const ReductionPlan plan,
                      PlanReduction("Argmax", a, dims, keepdim));
  DT_RETURN_IF_ERROR(CheckNonEmptyExtent("Argmax", a, dims, plan));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(plan.result_shape, DType::kI64));
  if (a.dim() == 0) {  // A 0-d tensor is its own maximum, at index 0.
    *out.data<int64_t>() = 0;
    return out;
  }
  const int64_t normalized = *NormalizeDim(dim, a.dim());
  DispatchDType(a.dtype(), [&](auto tag) {
    ArgmaxInto<decltype(tag)>(a, plan, normalized, out.data<int64_t>());
  });
  return out;
}

}  // namespace dtensor
