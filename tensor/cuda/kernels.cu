#include "dtensor/tensor/cuda/kernels.h"
#include "dtensor/tensor/cuda/launch_common.cuh"

namespace dtensor::cuda {
namespace {

// ---- Elementwise. ----

// True when every operand walks the elements in order (after the host merged
// the dims: one dim of stride 1 everywhere).
template <int N>
bool IsContiguous(const StridedShape<N>& shape) {
  if (shape.ndim == 0) return true;
  if (shape.ndim != 1) return false;
  for (int k = 0; k < N; ++k) {
    if (shape.strides[k][0] != 1) return false;
  }
  return true;
}

// ---- Rows: one block per row. ----

template <typename T>
__global__ void SoftmaxKernel(const T* x, T* out, int64_t n, int64_t inner,
                              bool log) {
  const int64_t outer_index = blockIdx.x / inner;
  const int64_t inner_index = blockIdx.x % inner;
  const int64_t base = outer_index * n * inner + inner_index;
  const Row<T> row{x + base, n, inner};
  const int lane = threadIdx.x;
  const auto max =
      BlockReduce(SoftmaxMaxPartial(row, lane, kThreads), MaxCombine());
  const double sum =
      BlockReduce(SoftmaxSumPartial(row, max, lane, kThreads), AddCombine());
  SoftmaxWrite(row, out + base, max, sum, log, lane, kThreads);
}

template <typename T>
__global__ void RmsNormKernel(const T* x, const T* weight, T* out,
                              int64_t width, double eps) {
  const int64_t base = blockIdx.x * width;
  const Row<T> row{x + base, width, 1};
  const double sum =
      BlockReduce(SumSquaresPartial(row, threadIdx.x, kThreads), AddCombine());
  RmsNormWrite(row, weight, out + base, sum, eps, threadIdx.x, kThreads);
}

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* weight, const T* bias,
                                T* out, int64_t width, double eps) {
  const int64_t base = blockIdx.x * width;
  const Row<T> row{x + base, width, 1};
  const double sum = BlockReduce(
      ReducePartial<double>(ReduceOp::kSum, row, threadIdx.x, kThreads),
      AddCombine());
  const double mean = sum / width;
  const double centered_squares = BlockReduce(
      CenteredSquaresPartial(row, mean, threadIdx.x, kThreads), AddCombine());
  LayerNormWrite(row, weight, bias, out + base, mean, centered_squares, eps,
                 threadIdx.x, kThreads);
}

template <typename T>
__global__ void CrossEntropyKernel(const T* logits, const int64_t* targets,
                                   double* losses, double* log_sum_exp,
                                   int64_t classes, int64_t ignore_index) {
  const int64_t r = blockIdx.x;
  const int64_t target = targets[r];
  // Uniform across the block.
  const bool ignored = target == ignore_index;
  if (ignored && log_sum_exp == nullptr) {
    if (threadIdx.x == 0) losses[r] = 0;
    return;
  }
  const Row<T> row{logits + r * classes, classes, 1};
  const double max = BlockReduce(
      LogSumExpMaxPartial(row, threadIdx.x, kThreads), MaxCombine());
  const double sum = BlockReduce(
      LogSumExpSumPartial(row, max, threadIdx.x, kThreads), AddCombine());
  if (threadIdx.x != 0) return;
  losses[r] = ignored ? 0 : CrossEntropyLoss(row, max, sum, target);
  if (log_sum_exp != nullptr) log_sum_exp[r] = max + Log(sum);
}

template <typename A>
struct ReduceCombineFn {
  ReduceOp op;
  __device__ A operator()(A a, A b) const { return ReduceCombine(op, a, b); }
};

template <typename A, typename Out, typename T>
__global__ void ReduceRowsKernel(ReduceOp op, const T* x, Out* out, int64_t n,
                                 double divisor) {
  const Row<T> row{x + blockIdx.x * n, n, 1};
  const A total = BlockReduce(ReducePartial<A>(op, row, threadIdx.x, kThreads),
                              ReduceCombineFn<A>{op});
  if (threadIdx.x != 0) return;
  if (divisor == 1.0) {
    out[blockIdx.x] = Store<Out>(total);
  } else {
    out[blockIdx.x] = Store<Out>(static_cast<double>(total) / divisor);
  }
}

template <typename T>
__global__ void EmbeddingKernel(const int64_t* indices, const T* table, T* out,
                                int64_t count, int64_t dim) {
  const int64_t total = count * dim;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += step) {
    out[i] = table[indices[i / dim] * dim + i % dim];
  }
}

// ---- Per-index kernels: a functor called for every i < count. ----

// Calls body(i) for every i < count, spread over the grid.
template <typename Body>
__global__ void ForEachIndexKernel(int64_t count, Body body) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += step) {
    body(i);
  }
}

template <typename Body>
cudaError_t LaunchForEachIndex(int64_t count, const Body& body,
                               cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  ForEachIndexKernel<<<GridFor(count), kThreads, 0, stream>>>(count, body);
  return cudaGetLastError();
}

template <typename T>
struct IndexSelectAt {
  const T* x;
  const int64_t* rows;
  T* out;
  int64_t count, size, inner;
  __device__ void operator()(int64_t i) const {
    IndexSelectElement(x, rows, out, i, count, size, inner);
  }
};

// dst[i] = bits.
template <typename Word>
struct FillAt {
  Word* dst;
  Word bits;
  __device__ void operator()(int64_t i) const { dst[i] = bits; }
};

// out = op(x) (operands 0: out, 1: x).
template <typename Out, typename T>
struct UnaryAt {
  UnaryOp op;
  const T* x;
  Out* out;
  StridedShape<2> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      UnaryElement(op, x + i, out + i);
      return;
    }
    int64_t offsets[2];
    OperandOffsetsAt(shape, i, offsets);
    UnaryElement(op, x + offsets[1], out + offsets[0]);
  }
};

// out = op(a, b) (operands 0: out, 1: a, 2: b).
template <typename Out, typename T>
struct BinaryAt {
  BinaryOp op;
  const T* a;
  const T* b;
  Out* out;
  StridedShape<3> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      BinaryElement(op, a + i, b + i, out + i);
      return;
    }
    int64_t offsets[3];
    OperandOffsetsAt(shape, i, offsets);
    BinaryElement(op, a + offsets[1], b + offsets[2], out + offsets[0]);
  }
};

// out = x converted (operands 0: out, 1: x).
template <typename To, typename From>
struct CastAt {
  const From* x;
  To* out;
  StridedShape<2> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      CastElement(x + i, out + i);
      return;
    }
    int64_t offsets[2];
    OperandOffsetsAt(shape, i, offsets);
    CastElement(x + offsets[1], out + offsets[0]);
  }
};

// out = cond ? a : b (operands 0: out, 1: cond, 2: a, 3: b).
template <typename T>
struct WhereAt {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  StridedShape<4> shape;
  bool contiguous;
  __device__ void operator()(int64_t i) const {
    if (contiguous) {
      out[i] = cond[i] ? a[i] : b[i];
      return;
    }
    int64_t offsets[4];
    OperandOffsetsAt(shape, i, offsets);
    out[offsets[0]] = cond[offsets[1]] ? a[offsets[2]] : b[offsets[3]];
  }
};

template <typename T>
struct GatherAt {
  const T* x;
  const int64_t* picks;
  T* out;
  StridedShape<1> shape;
  int64_t pick_stride;
  __device__ void operator()(int64_t i) const {
    GatherElement(x, picks, out, shape, pick_stride, i);
  }
};

// *slot += value, atomically, for the accumulator types of ScatterAdd.
struct AtomicAddFn {
  __device__ void operator()(float* slot, float value) const {
    atomicAdd(slot, value);
  }
  __device__ void operator()(double* slot, double value) const {
    atomicAdd(slot, value);
  }
  __device__ void operator()(int32_t* slot, int32_t value) const {
    atomicAdd(reinterpret_cast<int*>(slot), static_cast<int>(value));
  }
  // Two's complement: the unsigned sum wraps as the signed one does.
  __device__ void operator()(int64_t* slot, int64_t value) const {
    atomicAdd(reinterpret_cast<unsigned long long*>(slot),  // NOLINT
              static_cast<unsigned long long>(value));      // NOLINT
  }
};

template <typename A, typename T>
struct ScatterAddAt {
  const T* src;
  const int64_t* targets;
  A* acc;
  StridedShape<2> shape;
  int64_t target_stride;
  __device__ void operator()(int64_t i) const {
    ScatterAddElement(src, targets, acc, shape, target_stride, i,
                      AtomicAddFn());
  }
};

template <typename A, typename T>
struct RowIndexAddAt {
  const T* grad;
  const int64_t* indices;
  A* acc;
  int64_t first_row, num_rows, width;
  __device__ void operator()(int64_t e) const {
    RowIndexAddElement(grad, indices, acc, first_row, num_rows, width, e,
                       AtomicAddFn());
  }
};

template <typename T>
struct DropoutAt {
  const T* x;
  T* out;
  StridedShape<1> positions;
  uint64_t base, seed;
  double p, scale;
  __device__ void operator()(int64_t i) const {
    DropoutElement(x, out, positions, base, seed, p, scale, i);
  }
};

template <typename T>
struct AdamWAt {
  T* p;
  T* m;
  T* v;
  const T* g;
  StridedShape<4> shape;
  AdamWCoefficients<Compute<T>> k;
  __device__ void operator()(int64_t i) const {
    int64_t at[4];
    OperandOffsetsAt(shape, i, at);
    AdamWElement(p + at[0], m + at[1], v + at[2], g + at[3], k);
  }
};

template <typename C>
__global__ void MaskedSoftmaxKernel(C* scores, int64_t lq, int64_t lk,
                                    bool causal, C scale) {
  C* row = scores + blockIdx.x * lk;
  const int64_t visible = VisibleKeys(blockIdx.x % lq, lq, lk, causal);
  const C max =
      BlockReduce(ScaledMaxPartial(row, visible, scale, threadIdx.x, kThreads),
                  MaxCombine());
  const double sum =
      BlockReduce(ExpInPlacePartial(row, visible, max, threadIdx.x, kThreads),
                  AddCombine());
  NormalizeMasked(row, visible, lk, sum, threadIdx.x, kThreads);
}

template <typename T>
__global__ void RotaryKernel(const T* x, T* out, const double* cos_table,
                             const double* sin_table, int64_t outer,
                             int64_t seq, int64_t heads, int64_t half) {
  const int64_t pairs = outer * seq * heads * half;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       p < pairs; p += step) {
    const int64_t i = p % half;
    const int64_t head_row = p / half;  // (o * seq + s) * heads + h
    const int64_t s = (head_row / heads) % seq;
    const int64_t base = head_row * 2 * half;
    RotatePair(x + base, out + base, i, half, cos_table[s * half + i],
               sin_table[s * half + i]);
  }
}

}  // namespace

cudaError_t LaunchFill(void* dst, size_t count, uint64_t bits,
                       int element_bytes, cudaStream_t stream) {
  const auto fill = [&](auto word) {
    using Word = decltype(word);
    return LaunchForEachIndex(
        static_cast<int64_t>(count),
        FillAt<Word>{static_cast<Word*>(dst), static_cast<Word>(bits)}, stream);
  };
  switch (element_bytes) {
    case 1:
      return fill(uint8_t{});
    case 2:
      return fill(uint16_t{});
    case 4:
      return fill(uint32_t{});
    case 8:
      return fill(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchUnary(UnaryOp op, ScalarType in_type, ScalarType out_type,
                        const void* x, void* out, const StridedShape<2>& shape,
                        int64_t numel, cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    return Dispatch(out_type, [&](auto out_tag) {
      using Out = decltype(out_tag);
      return LaunchForEachIndex(
          numel,
          UnaryAt<Out, T>{op, static_cast<const T*>(x), static_cast<Out*>(out),
                          shape, contiguous},
          stream);
    });
  });
}

cudaError_t LaunchBinary(BinaryOp op, ScalarType in_type, ScalarType out_type,
                         const void* a, const void* b, void* out,
                         const StridedShape<3>& shape, int64_t numel,
                         cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    if (out_type == ScalarType::kBool) {
      return LaunchForEachIndex(
          numel,
          BinaryAt<bool, T>{op, x, y, static_cast<bool*>(out), shape,
                            contiguous},
          stream);
    }
    return LaunchForEachIndex(
        numel,
        BinaryAt<T, T>{op, x, y, static_cast<T*>(out), shape, contiguous},
        stream);
  });
}

cudaError_t LaunchWhere(ScalarType type, const bool* cond, const void* a,
                        const void* b, void* out, const StridedShape<4>& shape,
                        int64_t numel, cudaStream_t stream) {
  const bool contiguous = IsContiguous(shape);
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        numel,
        WhereAt<T>{cond, static_cast<const T*>(a), static_cast<const T*>(b),
                   static_cast<T*>(out), shape, contiguous},
        stream);
  });
}

cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* out,
                       const StridedShape<2>& shape, int64_t numel,
                       cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  const bool contiguous = IsContiguous(shape);
  return Dispatch(from, [&](auto tag) {
    using From = decltype(tag);
    return Dispatch(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      return LaunchForEachIndex(
          numel,
          CastAt<To, From>{static_cast<const From*>(x), static_cast<To*>(out),
                           shape, contiguous},
          stream);
    });
  });
}

cudaError_t LaunchSoftmax(ScalarType type, const void* x, void* out,
                          int64_t outer, int64_t n, int64_t inner, bool log,
                          cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (n == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    SoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(out), n, inner, log);
  });
}

cudaError_t LaunchRmsNorm(ScalarType type, const void* x, const void* weight,
                          void* out, int64_t rows, int64_t width, double eps,
                          cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    RmsNormKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<T*>(out), width, eps);
  });
}

cudaError_t LaunchLayerNorm(ScalarType type, const void* x, const void* weight,
                            const void* bias, void* out, int64_t rows,
                            int64_t width, double eps, cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    LayerNormKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<const T*>(bias), static_cast<T*>(out), width, eps);
  });
}

cudaError_t LaunchCrossEntropyRows(ScalarType type, const void* logits,
                                   const int64_t* targets, double* losses,
                                   double* log_sum_exp, int64_t rows,
                                   int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream) {
  return LaunchFloatingRows(type, rows, [&](auto tag) {
    using T = decltype(tag);
    CrossEntropyKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T*>(logits), targets, losses, log_sum_exp, classes,
        ignore_index);
  });
}

cudaError_t LaunchReduceRows(ReduceOp op, ScalarType in_type,
                             ScalarType out_type, const void* x, void* out,
                             int64_t rows, int64_t n, double divisor,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  return Dispatch(in_type, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    // Floating sums and sums of squares accumulate in double, integer sums in
    // int64, max and min in the compute type.
    using SumAcc =
        std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
    if (op == ReduceOp::kSumSquares && !std::is_floating_point_v<C>) {
      return cudaErrorInvalidValue;
    }
    return Dispatch(out_type, [&](auto out_tag) {
      using Out = decltype(out_tag);
      if (IsSum(op)) {
        ReduceRowsKernel<SumAcc><<<rows, kThreads, 0, stream>>>(
            op, static_cast<const T*>(x), static_cast<Out*>(out), n, divisor);
      } else {
        ReduceRowsKernel<C><<<rows, kThreads, 0, stream>>>(
            op, static_cast<const T*>(x), static_cast<Out*>(out), n, divisor);
      }
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchEmbedding(ScalarType type, const int64_t* indices,
                            const void* table, void* out, int64_t count,
                            int64_t dim, cudaStream_t stream) {
  if (count == 0 || dim == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    EmbeddingKernel<<<GridFor(count * dim), kThreads, 0, stream>>>(
        indices, static_cast<const T*>(table), static_cast<T*>(out), count,
        dim);
    return cudaGetLastError();
  });
}

cudaError_t LaunchIndexSelect(ScalarType type, const void* x,
                              const int64_t* rows, void* out, int64_t outer,
                              int64_t count, int64_t size, int64_t inner,
                              cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        outer * count * inner,
        IndexSelectAt<T>{static_cast<const T*>(x), rows, static_cast<T*>(out),
                         count, size, inner},
        stream);
  });
}

cudaError_t LaunchGather(ScalarType type, const void* x, const int64_t* picks,
                         void* out, const StridedShape<1>& shape,
                         int64_t pick_stride, int64_t count,
                         cudaStream_t stream) {
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        count,
        GatherAt<T>{static_cast<const T*>(x), picks, static_cast<T*>(out),
                    shape, pick_stride},
        stream);
  });
}

cudaError_t LaunchScatterAdd(ScalarType src_type, const void* src,
                             const int64_t* targets, void* acc,
                             const StridedShape<2>& shape,
                             int64_t target_stride, int64_t count,
                             cudaStream_t stream) {
  return Dispatch(src_type, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;
    } else {
      using A = Compute<T>;
      return LaunchForEachIndex(
          count,
          ScatterAddAt<A, T>{static_cast<const T*>(src), targets,
                             static_cast<A*>(acc), shape, target_stride},
          stream);
    }
  });
}

cudaError_t LaunchRowIndexAdd(ScalarType grad_type, const void* grad,
                              const int64_t* indices, void* acc, int64_t count,
                              int64_t width, int64_t first_row,
                              int64_t num_rows, cudaStream_t stream) {
  return DispatchFloating(grad_type, [&](auto tag) {
    using T = decltype(tag);
    using A = Compute<T>;
    return LaunchForEachIndex(
        count * width,
        RowIndexAddAt<A, T>{static_cast<const T*>(grad), indices,
                            static_cast<A*>(acc), first_row, num_rows, width},
        stream);
  });
}

cudaError_t LaunchDropout(ScalarType type, const void* x, void* out,
                          const StridedShape<1>& positions, uint64_t base,
                          uint64_t seed, double p, double scale, int64_t numel,
                          cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        numel,
        DropoutAt<T>{static_cast<const T*>(x), static_cast<T*>(out), positions,
                     base, seed, p, scale},
        stream);
  });
}

cudaError_t LaunchAdamW(ScalarType type, void* p, void* m, void* v,
                        const void* g, const StridedShape<4>& shape,
                        int64_t numel, const AdamWCoefficients<double>& k,
                        cudaStream_t stream) {
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchForEachIndex(
        numel,
        AdamWAt<T>{static_cast<T*>(p), static_cast<T*>(m), static_cast<T*>(v),
                   static_cast<const T*>(g), shape,
                   CoefficientsIn<Compute<T>>(k)},
        stream);
  });
}

cudaError_t LaunchMaskedSoftmax(ScalarType type, void* scores, int64_t rows,
                                int64_t lq, int64_t lk, bool causal,
                                double scale, cudaStream_t stream) {
  if (rows == 0 || lk == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  if (type == ScalarType::kF64) {
    MaskedSoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<double*>(scores), lq, lk, causal, scale);
  } else if (type == ScalarType::kF32) {
    MaskedSoftmaxKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<float*>(scores), lq, lk, causal, static_cast<float>(scale));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchRotary(ScalarType type, const void* x, void* out,
                         const double* cos_table, const double* sin_table,
                         int64_t outer, int64_t seq, int64_t heads,
                         int64_t half, cudaStream_t stream) {
  const int64_t pairs = outer * seq * heads * half;
  if (pairs == 0) return cudaSuccess;
  return DispatchFloating(type, [&](auto tag) {
    using T = decltype(tag);
    RotaryKernel<<<GridFor(pairs), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(out), cos_table, sin_table,
        outer, seq, heads, half);
    return cudaGetLastError();
  });
}

}  // namespace dtensor::cuda
