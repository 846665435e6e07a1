// The CUDA tensor kernels: argument checks, layout preparation and launches
// of dtensor/tensor/cuda/kernels.h on the device's stream (built with
// --config=cuda).
#include "dtensor/tensor/cuda_backend_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/attention_kernels.h"
#include "dtensor/tensor/cuda/kernels.h"
#include "dtensor/tensor/cuda/loss_kernels.h"
#include "dtensor/tensor/cuda/norm_kernels.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/matmul.h"

namespace dtensor::cuda {
namespace {

ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ScalarType::kF32;
    case DType::kF64:
      return ScalarType::kF64;
    case DType::kBF16:
      return ScalarType::kBF16;
    case DType::kF16:
      return ScalarType::kF16;
    case DType::kI32:
      return ScalarType::kI32;
    case DType::kI64:
      return ScalarType::kI64;
    case DType::kBool:
      return ScalarType::kBool;
  }
  return ScalarType::kF32;
}

absl::Status Launched(cudaError_t error, absl::string_view op) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(op, ": CUDA launch failed: ", cudaGetErrorString(error)));
}

absl::StatusOr<cudaStream_t> StreamOf(const Tensor& t) {
  DT_ASSIGN_OR_RETURN(void* stream, CurrentStream(t.device().index));
  return static_cast<cudaStream_t>(stream);
}

// `t` on `device`: a copy when it is on the CPU (a scalar operand).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device,
                                absl::string_view op, absl::string_view arg) {
  if (t.defined() && t.device().is_cpu()) return t.To(device);
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, op, arg));
  return t;
}

// The iteration shape of `shape` for operands with `strides` (element
// offsets from each operand's data pointer), with size-1 dims dropped and
// dims merged where every operand is contiguous across them.
template <int N>
absl::StatusOr<StridedShape<N>> Coalesce(
    const Shape& shape, const std::array<const Strides*, N>& strides,
    absl::string_view op) {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool mergeable = !sizes.empty();
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = merged[k].back() == (*strides[k])[d] * shape[d];
    }
    if (mergeable) {
      sizes.back() *= shape[d];
      for (int k = 0; k < N; ++k) merged[k].back() = (*strides[k])[d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < N; ++k) merged[k].push_back((*strides[k])[d]);
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": shape ", ShapeToString(shape), " has more than ",
                     kMaxDims, " dims that cannot be merged"));
  }
  StridedShape<N> result;
  result.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    result.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) result.strides[k][d] = merged[k][d];
  }
  return result;
}

bool IntegerOnlyRejected(UnaryOp op) {
  return op != UnaryOp::kNeg && op != UnaryOp::kAbs && op != UnaryOp::kRelu;
}

// A contiguous copy of `t` on its device.
absl::StatusOr<Tensor> ContiguousOnDevice(const Tensor& t) {
  if (t.is_contiguous()) return t;
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(t.shape(), t.dtype(), t.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(t, out));
  return out;
}

// An operand of cross_entropy's kernels, checked to be on `device` (errors
// name `arg`), as a contiguous tensor there.
absl::StatusOr<Tensor> LossOperand(const Tensor& t, Device device,
                                   absl::string_view arg) {
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, "cross_entropy", arg));
  return ContiguousOnDevice(t);
}

// ---- Normalization over the last dim. ----

// `param` (undefined, or [size] of x's dtype on x's device) made contiguous;
// undefined when `param` is.
absl::StatusOr<Tensor> NormParam(const Tensor& x, const Tensor& param,
                                 absl::string_view op, absl::string_view arg) {
  if (!param.defined()) return Tensor();
  DT_RETURN_IF_ERROR(internal::CheckNormParam(x, param, op, arg));
  return ContiguousOnDevice(param);
}

const void* DataOrNull(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

// The number of rows of the last dim of `x` (0 when that dim is empty).
int64_t NormRows(const Tensor& x) {
  return x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
}

// Matrix operand layout for cuBLAS: row-major (ld = stride of rows) or
// transposed (column-major, ld = stride of columns).
struct MatrixLayout {
  bool transposed;
  int64_t ld;
};

// The layout of the last two dims of `t` [.., rows, cols] when cuBLAS can
// read it in place.
std::optional<MatrixLayout> LayoutOf(const Tensor& t) {
  const int64_t rows = t.size(-2);
  const int64_t cols = t.size(-1);
  const int64_t row_stride = t.strides()[t.dim() - 2];
  const int64_t col_stride = t.strides()[t.dim() - 1];
  if ((col_stride == 1 || cols == 1) &&
      row_stride >= std::max<int64_t>(cols, 1)) {
    return MatrixLayout{false, row_stride};
  }
  if ((row_stride == 1 || rows == 1) &&
      col_stride >= std::max<int64_t>(rows, 1)) {
    return MatrixLayout{true, col_stride};
  }
  return std::nullopt;
}

// `t` [batch..., r, c] with its batch dims expanded to `batch` and merged
// into one; copied to contiguous when its strides allow neither.
absl::StatusOr<Tensor> BatchedOperand(const Tensor& t, const Shape& batch) {
  Shape target = batch;
  target.push_back(t.size(-2));
  target.push_back(t.size(-1));
  DT_ASSIGN_OR_RETURN(Tensor expanded, t.Expand(target));
  Shape flat = {NumElements(batch), t.size(-2), t.size(-1)};
  absl::StatusOr<Tensor> view = expanded.View(flat);
  if (view.ok() && LayoutOf(*view).has_value()) return view;
  DT_ASSIGN_OR_RETURN(Tensor contiguous, ContiguousOnDevice(expanded));
  return contiguous.View(flat);
}

absl::StatusOr<Tensor> Matmul3d(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0);
  const int64_t m = a.size(1);
  const int64_t k = a.size(2);
  const int64_t n = b.size(2);
  // cuBLAS writes every element (beta = 0) unless the sum over k is empty.
  if (k == 0) return Tensor::Zeros({batch, m, n}, a.dtype(), a.device());
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty({batch, m, n}, a.dtype(), a.device()));
  if (out.numel() == 0) return out;
  const MatrixLayout la = *LayoutOf(a);
  const MatrixLayout lb = *LayoutOf(b);
  GemmArgs args;
  args.dtype = a.dtype();
  args.trans_a = la.transposed;
  args.trans_b = lb.transposed;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = static_cast<const char*>(a.raw_data());
  args.lda = la.ld;
  args.stride_a = batch == 1 ? 0 : a.strides()[0];
  args.b = static_cast<const char*>(b.raw_data());
  args.ldb = lb.ld;
  args.stride_b = batch == 1 ? 0 : b.strides()[0];
  args.c = out.raw_data();
  args.ldc = std::max<int64_t>(n, 1);
  args.stride_c = m * n;
  args.batch = batch;
  DT_RETURN_IF_ERROR(Gemm(args, a.device().index));
  return out;
}

// Shape of a reduction's result and the permutation that puts the reduced
// dims last.
struct ReducePlan {
  std::vector<int64_t> permutation;
  Shape kept_shape;     // keepdim = false
  Shape keepdim_shape;  // keepdim = true
  int64_t rows = 1;
  int64_t n = 1;
};

absl::StatusOr<ReducePlan> PlanReduce(const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      absl::string_view op) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(std::max<int64_t>(rank, 1), dims.empty());
  for (const int64_t dim : dims) {
    DT_ASSIGN_OR_RETURN(const int64_t d,
                        NormalizeDim(dim, std::max<int64_t>(rank, 1)));
    if (reduced[d] && !dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": dim ", dim, " is repeated"));
    }
    reduced[d] = true;
  }
  ReducePlan plan;
  std::vector<int64_t> last;
  for (int64_t d = 0; d < rank; ++d) {
    plan.keepdim_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (reduced[d]) {
      last.push_back(d);
      plan.n *= x.size(d);
    } else {
      plan.permutation.push_back(d);
      plan.kept_shape.push_back(x.size(d));
      plan.rows *= x.size(d);
    }
  }
  plan.permutation.insert(plan.permutation.end(), last.begin(), last.end());
  return plan;
}

// Host index values as an i64 tensor on `device`.
absl::StatusOr<Tensor> IndicesOnDevice(const std::vector<int64_t>& values,
                                       Device device) {
  DT_ASSIGN_OR_RETURN(const Tensor host,
                      Tensor::FromVector<int64_t>(
                          values, {static_cast<int64_t>(values.size())}));
  return host.To(device);
}

// `strides` with the entry of `dim` zeroed: walking an index's shape then
// stays in the line of the tensor that the index value picks.
Strides WithoutDim(const Strides& strides, int64_t dim) {
  Strides result = strides;
  result[dim] = 0;
  return result;
}

// The dtype that the atomic-add kernels accumulate `dtype` in: float for the
// 16-bit floats (no atomicAdd of their own, and one rounding at the end),
// `dtype` otherwise.
DType AccumulatorDType(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 ? DType::kF32 : dtype;
}

// `acc` rounded to `dtype` (acc itself when it already has that dtype).
absl::StatusOr<Tensor> RoundedTo(const Tensor& acc, DType dtype) {
  if (acc.dtype() == dtype) return acc;
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(acc.shape(), dtype, acc.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(acc, out));
  return out;
}

}  // namespace

absl::Status CopyOnDevice(const Tensor& src, const Tensor& dst) {
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(dst));
  return CopyOnStream(src, dst, stream);
}

absl::Status CopyOnStream(const Tensor& src, const Tensor& dst,
                          void* stream_ptr) {
  DT_RETURN_IF_ERROR(internal::CheckOn(src, dst.device(), "Copy", "source"));
  if (src.shape() != dst.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Copy: source shape ", ShapeToString(src.shape()),
                     " differs from ", ShapeToString(dst.shape())));
  }
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  DT_ASSIGN_OR_RETURN(
      const StridedShape<2> shape,
      Coalesce<2>(dst.shape(), {&dst.strides(), &src.strides()}, "Copy"));
  return Launched(
      LaunchCast(ToScalarType(src.dtype()), ToScalarType(dst.dtype()),
                 src.raw_data(), dst.raw_data(), shape, dst.numel(), stream),
      "Copy");
}

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp op, absl::string_view name,
                                     const Tensor& x) {
  DT_RETURN_IF_ERROR(internal::CheckOn(x, x.device(), name, "a"));
  if (x.dtype() == DType::kBool ||
      (!IsFloatingPoint(x.dtype()) && IntegerOnlyRejected(op))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a has dtype ", std::string(DTypeName(x.dtype())),
                     ", which the op does not take"));
  }
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<2> shape,
      Coalesce<2>(x.shape(), {&out.strides(), &x.strides()}, name));
  DT_RETURN_IF_ERROR(Launched(
      LaunchUnary(op, ToScalarType(x.dtype()), ToScalarType(x.dtype()),
                  x.raw_data(), out.raw_data(), shape, x.numel(), stream),
      name));
  return out;
}

absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp op, absl::string_view name,
                                      const Tensor& a_in, const Tensor& b_in) {
  const Device device = OnCuda(a_in) ? a_in.device() : b_in.device();
  DT_ASSIGN_OR_RETURN(const Tensor a, OnDevice(a_in, device, name, "a"));
  DT_ASSIGN_OR_RETURN(const Tensor b, OnDevice(b_in, device, name, "b"));
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a has dtype ", std::string(DTypeName(a.dtype())),
                     " but b has dtype ", std::string(DTypeName(b.dtype()))));
  }
  const bool comparison = IsComparison(op);
  const bool floating = IsFloatingPoint(a.dtype());
  if ((!comparison && op != BinaryOp::kMaximum && op != BinaryOp::kMinimum &&
       a.dtype() == DType::kBool) ||
      (!floating && (op == BinaryOp::kPow || op == BinaryOp::kDiv ||
                     op == BinaryOp::kSiluBackward))) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": dtype ", std::string(DTypeName(a.dtype())),
        " is not supported on CUDA for this op (integer division and pow "
        "run on the CPU)"));
  }
  absl::StatusOr<Shape> shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", shape.status().message()));
  }
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(*shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(*shape));
  const DType out_dtype = comparison ? DType::kBool : a.dtype();
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(*shape, out_dtype, device));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(out));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<3> strided,
      Coalesce<3>(*shape,
                  {&out.strides(), &a_view.strides(), &b_view.strides()},
                  name));
  DT_RETURN_IF_ERROR(Launched(
      LaunchBinary(op, ToScalarType(a.dtype()), ToScalarType(out_dtype),
                   a_view.raw_data(), b_view.raw_data(), out.raw_data(),
                   strided, out.numel(), stream),
      name));
  return out;
}

absl::StatusOr<Tensor> MatmulOnDevice(const Tensor& a_in, const Tensor& b_in) {
  DT_RETURN_IF_ERROR(internal::CheckOn(a_in, a_in.device(), "Matmul", "a"));
  DT_RETURN_IF_ERROR(internal::CheckOn(b_in, a_in.device(), "Matmul", "b"));
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(a_in, "Matmul", "a"));
  if (a_in.dtype() != b_in.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: a has dtype ", std::string(DTypeName(a_in.dtype())),
        " but b has dtype ", std::string(DTypeName(b_in.dtype()))));
  }
  if (a_in.dim() == 0 || b_in.dim() == 0) {
    return absl::InvalidArgumentError("Matmul: operands need at least 1 dim");
  }
  // 1-D operands become a row (a) or a column (b), removed from the result.
  DT_ASSIGN_OR_RETURN(const Tensor a,
                      a_in.dim() == 1 ? a_in.Unsqueeze(0) : a_in);
  DT_ASSIGN_OR_RETURN(const Tensor b,
                      b_in.dim() == 1 ? b_in.Unsqueeze(1) : b_in);
  if (a.size(-1) != b.size(-2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: shapes ", ShapeToString(a_in.shape()), " and ",
        ShapeToString(b_in.shape()), " do not match for a matrix product"));
  }
  const auto batch_of = [](const Tensor& t) {
    return absl::MakeConstSpan(t.shape()).subspan(0, t.dim() - 2);
  };
  DT_ASSIGN_OR_RETURN(const Shape batch,
                      BroadcastShapes(batch_of(a), batch_of(b)));
  DT_ASSIGN_OR_RETURN(const Tensor a3, BatchedOperand(a, batch));
  DT_ASSIGN_OR_RETURN(const Tensor b3, BatchedOperand(b, batch));
  DT_ASSIGN_OR_RETURN(const Tensor out3, Matmul3d(a3, b3));
  Shape out_shape = batch;
  if (a_in.dim() > 1) out_shape.push_back(a.size(-2));
  if (b_in.dim() > 1) out_shape.push_back(b.size(-1));
  return out3.View(out_shape);
}

absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "LogSoftmax" : "Softmax";
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, op, "x"));
  DT_ASSIGN_OR_RETURN(const int64_t d,
                      NormalizeDim(dim, std::max<int64_t>(x.dim(), 1)));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    (i < d ? outer : i == d ? n : inner) *= x.size(i);
  }
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(
      Launched(LaunchSoftmax(ToScalarType(x.dtype()), input.raw_data(),
                             out.raw_data(), outer, n, inner, log, stream),
               op));
  return out;
}

absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor& x, const Tensor& weight,
                                       double eps) {
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, "RmsNorm"));
  DT_ASSIGN_OR_RETURN(const Tensor w,
                      NormParam(x, weight, "RmsNorm", "weight"));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(Launched(
      LaunchRmsNorm(ToScalarType(x.dtype()), input.raw_data(), DataOrNull(w),
                    out.raw_data(), NormRows(x), x.size(-1), eps, stream),
      "RmsNorm"));
  return out;
}

absl::StatusOr<Tensor> LayerNormOnDevice(const Tensor& x, const Tensor& weight,
                                         const Tensor& bias, double eps) {
  DT_RETURN_IF_ERROR(internal::CheckNormInput(x, "LayerNorm"));
  DT_ASSIGN_OR_RETURN(const Tensor w,
                      NormParam(x, weight, "LayerNorm", "weight"));
  DT_ASSIGN_OR_RETURN(const Tensor b, NormParam(x, bias, "LayerNorm", "bias"));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(
      Launched(LaunchLayerNorm(ToScalarType(x.dtype()), input.raw_data(),
                               DataOrNull(w), DataOrNull(b), out.raw_data(),
                               NormRows(x), x.size(-1), eps, stream),
               "LayerNorm"));
  return out;
}

absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp op, bool mean,
                                      absl::string_view name, const Tensor& x,
                                      absl::Span<const int64_t> dims,
                                      bool keepdim) {
  DT_RETURN_IF_ERROR(internal::CheckOn(x, x.device(), name, "a"));
  if (mean || op == ReduceOp::kSumSquares) {
    DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, name, "a"));
  }
  DT_ASSIGN_OR_RETURN(const ReducePlan plan, PlanReduce(x, dims, name));
  if (!IsSum(op) && plan.n == 0 && plan.rows > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": cannot reduce an empty extent of shape ",
                     ShapeToString(x.shape())));
  }
  DT_ASSIGN_OR_RETURN(const Tensor permuted, x.Permute(plan.permutation));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(permuted));
  DType out_dtype = x.dtype();
  if (op == ReduceOp::kSumSquares) {
    out_dtype = DType::kF64;
  } else if (op == ReduceOp::kSum && !IsFloatingPoint(x.dtype())) {
    out_dtype = DType::kI64;
  }
  DT_ASSIGN_OR_RETURN(
      Tensor out, Tensor::Empty(keepdim ? plan.keepdim_shape : plan.kept_shape,
                                out_dtype, x.device()));
  if (plan.n == 0) {  // Sum of nothing is 0, mean of nothing NaN.
    DT_RETURN_IF_ERROR(out.Fill(mean ? std::nan("") : 0.0));
    return out;
  }
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(Launched(
      LaunchReduceRows(op, ToScalarType(x.dtype()), ToScalarType(out_dtype),
                       input.raw_data(), out.raw_data(), plan.rows, plan.n,
                       mean ? static_cast<double>(plan.n) : 1.0, stream),
      name));
  return out;
}

absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor& indices,
                                         const Tensor& table) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(table, "Embedding", "table"));
  if (table.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Embedding: table must be [num, dim], got shape ",
                     ShapeToString(table.shape())));
  }
  // The indices are checked on the host (one small copy), then used on the
  // device as i64.
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> rows,
                      internal::ReadIndices(indices, "Embedding", "indices"));
  for (const int64_t row : rows) {
    DT_RETURN_IF_ERROR(
        internal::CheckIndexInRange(row, table.size(0), "Embedding"));
  }
  DT_ASSIGN_OR_RETURN(const Tensor device_indices,
                      IndicesOnDevice(rows, table.device()));
  DT_ASSIGN_OR_RETURN(const Tensor source, ContiguousOnDevice(table));
  Shape out_shape = indices.shape();
  out_shape.push_back(table.size(1));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, table.dtype(), table.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(table));
  DT_RETURN_IF_ERROR(Launched(
      LaunchEmbedding(ToScalarType(table.dtype()),
                      device_indices.data<int64_t>(), source.raw_data(),
                      out.raw_data(), static_cast<int64_t>(rows.size()),
                      table.size(1), stream),
      "Embedding"));
  return out;
}

absl::StatusOr<Tensor> IndexSelectOnDevice(const Tensor& x, int64_t dim,
                                           const std::vector<int64_t>& rows) {
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  Shape out_shape = x.shape();
  out_shape[dim] = static_cast<int64_t>(rows.size());
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const auto shape = absl::MakeConstSpan(x.shape());
  const int64_t outer = NumElements(shape.subspan(0, dim));
  const int64_t inner = NumElements(shape.subspan(dim + 1));
  DT_ASSIGN_OR_RETURN(const Tensor device_rows,
                      IndicesOnDevice(rows, x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(Launched(
      LaunchIndexSelect(ToScalarType(x.dtype()), input.raw_data(),
                        device_rows.data<int64_t>(), out.raw_data(), outer,
                        out_shape[dim], x.size(dim), inner, stream),
      "IndexSelect"));
  return out;
}

absl::StatusOr<Tensor> GatherOnDevice(const Tensor& x, int64_t dim,
                                      const Shape& index_shape,
                                      const std::vector<int64_t>& picks) {
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(index_shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const Strides x_strides = WithoutDim(x.strides(), dim);
  DT_ASSIGN_OR_RETURN(const StridedShape<1> shape,
                      Coalesce<1>(index_shape, {&x_strides}, "Gather"));
  DT_ASSIGN_OR_RETURN(const Tensor device_picks,
                      IndicesOnDevice(picks, x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(
      Launched(LaunchGather(ToScalarType(x.dtype()), x.raw_data(),
                            device_picks.data<int64_t>(), out.raw_data(), shape,
                            x.strides()[dim], out.numel(), stream),
               "Gather"));
  return out;
}

absl::StatusOr<Tensor> ScatterAddOnDevice(const Tensor& x, int64_t dim,
                                          const Shape& index_shape,
                                          const std::vector<int64_t>& targets,
                                          const Tensor& src) {
  DT_RETURN_IF_ERROR(internal::CheckOn(src, x.device(), "ScatterAdd", "src"));
  // The accumulator: a contiguous copy of x.
  DT_ASSIGN_OR_RETURN(
      Tensor acc,
      Tensor::Empty(x.shape(), AccumulatorDType(x.dtype()), x.device()));
  DT_RETURN_IF_ERROR(CopyOnDevice(x, acc));
  if (!targets.empty()) {
    const Strides acc_strides = WithoutDim(acc.strides(), dim);
    DT_ASSIGN_OR_RETURN(
        const StridedShape<2> shape,
        Coalesce<2>(index_shape, {&acc_strides, &src.strides()}, "ScatterAdd"));
    DT_ASSIGN_OR_RETURN(const Tensor device_targets,
                        IndicesOnDevice(targets, x.device()));
    DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
    DT_RETURN_IF_ERROR(
        Launched(LaunchScatterAdd(ToScalarType(src.dtype()), src.raw_data(),
                                  device_targets.data<int64_t>(),
                                  acc.raw_data(), shape, acc.strides()[dim],
                                  static_cast<int64_t>(targets.size()), stream),
                 "ScatterAdd"));
  }
  return RoundedTo(acc, x.dtype());
}

absl::StatusOr<Tensor> EmbeddingBackwardOnDevice(
    const Tensor& grad, const std::vector<int64_t>& indices, int64_t first_row,
    int64_t num_rows) {
  const int64_t width = grad.size(-1);
  DT_ASSIGN_OR_RETURN(
      Tensor acc, Tensor::Zeros({num_rows, width},
                                AccumulatorDType(grad.dtype()), grad.device()));
  const int64_t count = static_cast<int64_t>(indices.size());
  if (count > 0 && width > 0 && num_rows > 0) {
    DT_ASSIGN_OR_RETURN(const Tensor source, ContiguousOnDevice(grad));
    DT_ASSIGN_OR_RETURN(const Tensor device_indices,
                        IndicesOnDevice(indices, grad.device()));
    DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(grad));
    DT_RETURN_IF_ERROR(Launched(
        LaunchRowIndexAdd(ToScalarType(grad.dtype()), source.raw_data(),
                          device_indices.data<int64_t>(), acc.raw_data(), count,
                          width, first_row, num_rows, stream),
        "EmbeddingBackward"));
  }
  return RoundedTo(acc, grad.dtype());
}

absl::StatusOr<Tensor> DropoutOnDevice(const Tensor& x, double p, uint64_t seed,
                                       uint64_t base,
                                       const Strides& position_strides) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, "Dropout", "x"));
  if (!(p >= 0 && p < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: p ", p, " is outside [0, 1)"));
  }
  if (position_strides.size() != x.shape().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: ", position_strides.size(),
                     " position strides for x ", ShapeToString(x.shape())));
  }
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(const StridedShape<1> positions,
                      Coalesce<1>(x.shape(), {&position_strides}, "Dropout"));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(
      Launched(LaunchDropout(ToScalarType(x.dtype()), input.raw_data(),
                             out.raw_data(), positions, base, seed, p,
                             1.0 / (1.0 - p), x.numel(), stream),
               "Dropout"));
  return out;
}

absl::Status AdamWStepOnDevice(const Tensor& param, const Tensor& exp_avg,
                               const Tensor& exp_avg_sq, const Tensor& grad,
                               const AdamWCoefficients<double>& k) {
  DT_ASSIGN_OR_RETURN(const StridedShape<4> shape,
                      Coalesce<4>(param.shape(),
                                  {&param.strides(), &exp_avg.strides(),
                                   &exp_avg_sq.strides(), &grad.strides()},
                                  "AdamWStep"));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(param));
  return Launched(LaunchAdamW(ToScalarType(param.dtype()), param.raw_data(),
                              exp_avg.raw_data(), exp_avg_sq.raw_data(),
                              grad.raw_data(), shape, param.numel(), k, stream),
                  "AdamWStep");
}

absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor& logits,
                                            const Tensor& target,
                                            Reduction reduction,
                                            int64_t ignore_index) {
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "CrossEntropy", "logits"));
  DT_RETURN_IF_ERROR(internal::CheckCrossEntropyShapes(logits, target));
  DT_ASSIGN_OR_RETURN(const Tensor host_target, target.To(Device::CPU()));
  DT_ASSIGN_OR_RETURN(const Tensor i64, host_target.To(DType::kI64));
  const std::vector<int64_t> targets = i64.ToVector<int64_t>();
  const int64_t classes = logits.size(-1);
  DT_RETURN_IF_ERROR(
      internal::CheckCrossEntropyTargets(targets, classes, ignore_index));
  DT_ASSIGN_OR_RETURN(const Tensor device_targets, i64.To(logits.device()));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(logits));
  const int64_t rows = static_cast<int64_t>(targets.size());
  DT_ASSIGN_OR_RETURN(Tensor losses,
                      Tensor::Empty({rows}, DType::kF64, logits.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(logits));
  DT_RETURN_IF_ERROR(Launched(
      LaunchCrossEntropyRows(ToScalarType(logits.dtype()), input.raw_data(),
                             device_targets.data<int64_t>(),
                             losses.data<double>(), /*log_sum_exp=*/nullptr,
                             rows, classes, ignore_index, stream),
      "CrossEntropy"));
  if (reduction == Reduction::kNone) {
    DT_ASSIGN_OR_RETURN(Tensor shaped, losses.View(target.shape()));
    return shaped.To(logits.dtype());
  }
  // The per-sample losses sum on the host in row order, as on the CPU.
  const std::vector<double> values = losses.ToVector<double>();
  double total = 0;
  int64_t counted = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (targets[i] == ignore_index) continue;
    total += values[i];
    ++counted;
  }
  const double result = reduction == Reduction::kSum
                            ? total
                            : (counted == 0 ? std::nan("") : total / counted);
  return Tensor::Scalar(result, logits.dtype()).To(logits.device());
}

absl::StatusOr<Tensor> WhereOnDevice(const Tensor& cond_in, const Tensor& a_in,
                                     const Tensor& b_in, const Shape& shape) {
  const Device device = OnCuda(cond_in) ? cond_in.device()
                        : OnCuda(a_in)  ? a_in.device()
                                        : b_in.device();
  DT_ASSIGN_OR_RETURN(const Tensor cond,
                      OnDevice(cond_in, device, "Where", "cond"));
  DT_ASSIGN_OR_RETURN(const Tensor a, OnDevice(a_in, device, "Where", "a"));
  DT_ASSIGN_OR_RETURN(const Tensor b, OnDevice(b_in, device, "Where", "b"));
  DT_ASSIGN_OR_RETURN(const Tensor cond_view, cond.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(shape));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, a.dtype(), device));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(out));
  DT_ASSIGN_OR_RETURN(const StridedShape<4> strided,
                      Coalesce<4>(shape,
                                  {&out.strides(), &cond_view.strides(),
                                   &a_view.strides(), &b_view.strides()},
                                  "Where"));
  DT_RETURN_IF_ERROR(
      Launched(LaunchWhere(ToScalarType(a.dtype()),
                           static_cast<const bool*>(cond_view.raw_data()),
                           a_view.raw_data(), b_view.raw_data(), out.raw_data(),
                           strided, out.numel(), stream),
               "Where"));
  return out;
}

absl::Status MaskedSoftmaxOnDevice(const Tensor& scores, int64_t lq, int64_t lk,
                                   bool causal, double scale) {
  DT_RETURN_IF_ERROR(internal::CheckOn(scores, scores.device(),
                                       "ScaledDotProductAttention", "scores"));
  if (!scores.is_contiguous() ||
      (scores.dtype() != DType::kF32 && scores.dtype() != DType::kF64)) {
    return absl::InternalError(
        "ScaledDotProductAttention: scores must be contiguous f32 or f64");
  }
  if (lk == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(scores));
  return Launched(
      LaunchMaskedSoftmax(ToScalarType(scores.dtype()), scores.raw_data(),
                          scores.numel() / lk, lq, lk, causal, scale, stream),
      "ScaledDotProductAttention");
}

absl::StatusOr<Tensor> RotaryOnDevice(const Tensor& x,
                                      const std::vector<double>& cos_table,
                                      const std::vector<double>& sin_table) {
  DT_RETURN_IF_ERROR(internal::CheckFloatingDType(x, "RotaryEmbedding", "x"));
  const int64_t seq = x.size(-3);
  const int64_t heads = x.size(-2);
  const int64_t half = x.size(-1) / 2;
  const int64_t row = seq * heads * 2 * half;
  const int64_t outer = row == 0 ? 0 : x.numel() / row;
  DT_ASSIGN_OR_RETURN(Tensor cos_host,
                      Tensor::FromVector<double>(cos_table, {seq, half}));
  DT_ASSIGN_OR_RETURN(Tensor sin_host,
                      Tensor::FromVector<double>(sin_table, {seq, half}));
  DT_ASSIGN_OR_RETURN(const Tensor cos_device, cos_host.To(x.device()));
  DT_ASSIGN_OR_RETURN(const Tensor sin_device, sin_host.To(x.device()));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(Launched(
      LaunchRotary(ToScalarType(x.dtype()), input.raw_data(), out.raw_data(),
                   static_cast<const double*>(cos_device.raw_data()),
                   static_cast<const double*>(sin_device.raw_data()), outer,
                   seq, heads, half, stream),
      "RotaryEmbedding"));
  return out;
}

absl::StatusOr<Tensor> CrossEntropyRowsOnDevice(const Tensor& logits,
                                                const Tensor& targets,
                                                int64_t ignore_index) {
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "cross_entropy", "logits"));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, logits.device(), "targets"));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(logits));
  DT_ASSIGN_OR_RETURN(Tensor results,
                      Tensor::Empty({2, rows}, DType::kF64, logits.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(logits));
  double* const loss_rows = results.data<double>();
  DT_RETURN_IF_ERROR(Launched(
      LaunchCrossEntropyRows(ToScalarType(logits.dtype()), input.raw_data(),
                             picks.data<int64_t>(), loss_rows, loss_rows + rows,
                             rows, logits.size(1), ignore_index, stream),
      "cross_entropy"));
  return results;
}

absl::StatusOr<NormGrads> NormBackwardOnDevice(const Tensor& x,
                                               const Tensor& weight,
                                               const Tensor& grad, double eps,
                                               bool layer_norm,
                                               bool want_dbias) {
  const char* op = layer_norm ? "LayerNormBackward" : "RmsNormBackward";
  const int64_t width = x.size(-1);
  const int64_t rows = NormRows(x);
  // Sums over no rows are zeros; otherwise the kernels write every element.
  const auto param_grad = [&] {
    return rows == 0 ? Tensor::Zeros({width}, x.dtype(), x.device())
                     : Tensor::Empty({width}, x.dtype(), x.device());
  };
  NormGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dx,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  if (weight.defined()) {
    DT_ASSIGN_OR_RETURN(grads.dweight, param_grad());
  }
  if (want_dbias) {
    DT_ASSIGN_OR_RETURN(grads.dbias, param_grad());
  }
  if (rows == 0) return grads;
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(const Tensor g, ContiguousOnDevice(grad));
  DT_ASSIGN_OR_RETURN(const Tensor w, NormParam(x, weight, op, "weight"));
  // Scratch: each row's (mean, r), and the chunks' partial sums.
  DT_ASSIGN_OR_RETURN(const Tensor stats,
                      Tensor::Empty({rows, 2}, DType::kF64, x.device()));
  Tensor partials;
  if (weight.defined() || want_dbias) {
    DT_ASSIGN_OR_RETURN(
        partials, Tensor::Empty({2, NormParamChunks(rows), width}, DType::kF64,
                                x.device()));
  }
  NormBackwardArgs args;
  args.x = input.raw_data();
  args.grad = g.raw_data();
  args.weight = DataOrNull(w);
  args.dx = grads.dx.raw_data();
  args.dweight = grads.dweight.defined() ? grads.dweight.raw_data() : nullptr;
  args.dbias = grads.dbias.defined() ? grads.dbias.raw_data() : nullptr;
  args.stats = static_cast<NormStats*>(stats.raw_data());
  args.partials =
      partials.defined() ? static_cast<double*>(partials.raw_data()) : nullptr;
  args.rows = rows;
  args.width = width;
  args.eps = eps;
  args.layer_norm = layer_norm;
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(x));
  DT_RETURN_IF_ERROR(
      Launched(LaunchNormBackward(ToScalarType(x.dtype()), args, stream), op));
  return grads;
}

absl::StatusOr<Tensor> LossShardMaxOnDevice(const Tensor& logits) {
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "cross_entropy", "logits"));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(logits));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(
      Tensor row_max,
      Tensor::Empty({rows}, ComputeDTypeOf(logits.dtype()), logits.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(logits));
  DT_RETURN_IF_ERROR(Launched(
      LaunchLossShardMax(ToScalarType(logits.dtype()), input.raw_data(),
                         row_max.raw_data(), rows, logits.size(1), stream),
      "cross_entropy"));
  return row_max;
}

absl::StatusOr<Tensor> LossShardSumsOnDevice(const Tensor& logits,
                                             const Tensor& targets,
                                             const Tensor& row_max,
                                             int64_t class_offset) {
  DT_RETURN_IF_ERROR(
      internal::CheckFloatingDType(logits, "cross_entropy", "logits"));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, logits.device(), "targets"));
  DT_ASSIGN_OR_RETURN(const Tensor max,
                      LossOperand(row_max, logits.device(), "row_max"));
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(logits));
  const int64_t rows = logits.size(0);
  DT_ASSIGN_OR_RETURN(Tensor sums,
                      Tensor::Empty({2, rows}, ComputeDTypeOf(logits.dtype()),
                                    logits.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(logits));
  DT_RETURN_IF_ERROR(
      Launched(LaunchLossShardSums(ToScalarType(logits.dtype()),
                                   input.raw_data(), picks.data<int64_t>(),
                                   max.raw_data(), sums.raw_data(), rows,
                                   logits.size(1), class_offset, stream),
               "cross_entropy"));
  return sums;
}

absl::StatusOr<Tensor> LossShardFinishOnDevice(const Tensor& row_max,
                                               const Tensor& sums,
                                               const Tensor& targets,
                                               int64_t ignore_index) {
  DT_ASSIGN_OR_RETURN(const Tensor both,
                      LossOperand(sums, row_max.device(), "sums"));
  DT_ASSIGN_OR_RETURN(const Tensor picks,
                      LossOperand(targets, row_max.device(), "targets"));
  DT_ASSIGN_OR_RETURN(const Tensor max, ContiguousOnDevice(row_max));
  const int64_t rows = row_max.size(0);
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty({2, rows}, DType::kF64, row_max.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(row_max));
  DT_RETURN_IF_ERROR(Launched(
      LaunchLossShardFinish(ToScalarType(row_max.dtype()), max.raw_data(),
                            both.raw_data(), picks.data<int64_t>(),
                            out.data<double>(), rows, ignore_index, stream),
      "cross_entropy"));
  return out;
}

namespace {

constexpr char kAttention[] = "ScaledDotProductAttention";
constexpr char kAttentionBackward[] = "ScaledDotProductAttentionBackward";

// Whether the tiled attention kernel's blocks fit the shared memory of q's
// device.
absl::StatusOr<bool> AttentionFitsDevice(const Tensor& q, const Tensor& v,
                                         bool backward) {
  int limit = 0;
  const cudaError_t error = cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, q.device().index);
  if (error != cudaSuccess) {
    return absl::InternalError(absl::StrCat(
        kAttention, ": reading the device's shared memory size failed: ",
        cudaGetErrorString(error)));
  }
  return AttentionSharedBytes(ToScalarType(q.dtype()), q.size(-1), v.size(-1),
                              backward) <= limit;
}

// The launch geometry of contiguous q, k, v on the batch shape `batch`.
absl::StatusOr<AttentionLaunch> AttentionLaunchOf(const Tensor& q,
                                                  const Tensor& k,
                                                  const Tensor& v,
                                                  const Shape& batch,
                                                  bool causal, double scale) {
  std::array<Strides, 3> strides;
  const Tensor* operands[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    Shape full = batch;
    full.push_back(operands[i]->size(-2));
    full.push_back(operands[i]->size(-1));
    DT_ASSIGN_OR_RETURN(const Tensor expanded, operands[i]->Expand(full));
    strides[i].assign(expanded.strides().begin(),
                      expanded.strides().begin() + batch.size());
  }
  AttentionLaunch launch;
  DT_ASSIGN_OR_RETURN(
      launch.batch,
      Coalesce<3>(batch, {&strides[0], &strides[1], &strides[2]}, kAttention));
  launch.entries = NumElements(batch);
  launch.lq = q.size(-2);
  launch.lk = k.size(-2);
  launch.e = q.size(-1);
  launch.ev = v.size(-1);
  launch.causal = causal;
  launch.scale = scale;
  return launch;
}

// The forward with the scores [batch..., lq, lk] materialized in the compute
// dtype: cuBLAS products around the masked-softmax kernel.
absl::StatusOr<Tensor> MaterializedAttention(const Tensor& q, const Tensor& k,
                                             const Tensor& v, bool causal,
                                             double scale) {
  const DType compute = AccumulatorDType(q.dtype());
  DT_ASSIGN_OR_RETURN(const Tensor qc, q.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor kc, k.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor vc, v.To(compute));
  DT_ASSIGN_OR_RETURN(const Tensor k_t, kc.Transpose(-2, -1));
  DT_ASSIGN_OR_RETURN(Tensor scores, Matmul(qc, k_t));
  DT_RETURN_IF_ERROR(
      MaskedSoftmaxOnDevice(scores, q.size(-2), k.size(-2), causal, scale));
  DT_ASSIGN_OR_RETURN(const Tensor out, Matmul(scores, vc));
  return out.To(q.dtype());
}

// The backward on the host, for head dims the kernel cannot hold.
absl::StatusOr<AttentionGrads> AttentionBackwardOnHost(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, bool causal, double scale) {
  std::array<Tensor, 5> host;
  const Tensor* operands[] = {&q, &k, &v, &out, &grad_out};
  for (int i = 0; i < 5; ++i) {
    DT_ASSIGN_OR_RETURN(host[i], operands[i]->To(Device::CPU()));
  }
  DT_ASSIGN_OR_RETURN(
      AttentionGrads grads,
      ScaledDotProductAttentionBackward(host[0], host[1], host[2], host[3],
                                        host[4], causal, scale));
  for (Tensor* grad : {&grads.dq, &grads.dk, &grads.dv}) {
    DT_ASSIGN_OR_RETURN(*grad, grad->To(q.device()));
  }
  return grads;
}

}  // namespace

absl::StatusOr<Tensor> AttentionForwardOnDevice(const Tensor& q,
                                                const Tensor& k,
                                                const Tensor& v,
                                                const Shape& batch, bool causal,
                                                double scale) {
  DT_ASSIGN_OR_RETURN(const bool fits, AttentionFitsDevice(q, v, false));
  if (!fits) return MaterializedAttention(q, k, v, causal, scale);
  DT_ASSIGN_OR_RETURN(const Tensor qd, ContiguousOnDevice(q));
  DT_ASSIGN_OR_RETURN(const Tensor kd, ContiguousOnDevice(k));
  DT_ASSIGN_OR_RETURN(const Tensor vd, ContiguousOnDevice(v));
  DT_ASSIGN_OR_RETURN(const AttentionLaunch launch,
                      AttentionLaunchOf(qd, kd, vd, batch, causal, scale));
  Shape out_shape = batch;
  out_shape.push_back(launch.lq);
  out_shape.push_back(launch.ev);
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(out_shape, q.dtype(), q.device()));
  DT_ASSIGN_OR_RETURN(Tensor lse,
                      Tensor::Empty({launch.entries * launch.lq},
                                    AccumulatorDType(q.dtype()), q.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(q));
  DT_RETURN_IF_ERROR(Launched(
      LaunchAttentionForward(ToScalarType(q.dtype()), launch, qd.raw_data(),
                             kd.raw_data(), vd.raw_data(), out.raw_data(),
                             lse.raw_data(), stream),
      kAttention));
  return out;
}

absl::StatusOr<AttentionGrads> AttentionBackwardOnDevice(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& grad_out, const Shape& batch, bool causal, double scale) {
  DT_ASSIGN_OR_RETURN(const bool fits, AttentionFitsDevice(q, v, true));
  if (!fits) {
    return AttentionBackwardOnHost(q, k, v, out, grad_out, causal, scale);
  }
  std::array<Tensor, 5> in;
  const Tensor* operands[] = {&q, &k, &v, &out, &grad_out};
  for (int i = 0; i < 5; ++i) {
    DT_ASSIGN_OR_RETURN(in[i], ContiguousOnDevice(*operands[i]));
  }
  DT_ASSIGN_OR_RETURN(
      const AttentionLaunch launch,
      AttentionLaunchOf(in[0], in[1], in[2], batch, causal, scale));
  const DType compute = AccumulatorDType(q.dtype());
  DT_ASSIGN_OR_RETURN(Tensor dq, Tensor::Zeros(q.shape(), compute, q.device()));
  DT_ASSIGN_OR_RETURN(Tensor dk, Tensor::Zeros(k.shape(), compute, q.device()));
  DT_ASSIGN_OR_RETURN(Tensor dv, Tensor::Zeros(v.shape(), compute, q.device()));
  const Shape rows = {launch.entries * launch.lq};
  DT_ASSIGN_OR_RETURN(const Tensor lse,
                      Tensor::Empty(rows, compute, q.device()));
  DT_ASSIGN_OR_RETURN(const Tensor delta,
                      Tensor::Empty(rows, compute, q.device()));
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(q));
  DT_RETURN_IF_ERROR(Launched(
      LaunchAttentionBackward(ToScalarType(q.dtype()), launch, in[0].raw_data(),
                              in[1].raw_data(), in[2].raw_data(),
                              in[3].raw_data(), in[4].raw_data(),
                              lse.raw_data(), delta.raw_data(), dq.raw_data(),
                              dk.raw_data(), dv.raw_data(), stream),
      kAttentionBackward));
  AttentionGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dq, RoundedTo(dq, q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dk, RoundedTo(dk, q.dtype()));
  DT_ASSIGN_OR_RETURN(grads.dv, RoundedTo(dv, q.dtype()));
  return grads;
}

}  // namespace dtensor::cuda
