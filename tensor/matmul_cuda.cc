// Matmul on CUDA tensors (matmul_cuda.h): operands laid out for cuBLAS
// (cuda_backend.h's Gemm), batch dims broadcast and merged.
#include "dtensor/tensor/matmul_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

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

}  // namespace
#endif

absl::StatusOr<Tensor> MatmulOnDevice(const Tensor& a_in, const Tensor& b_in) {
#ifdef DTENSOR_CUDA
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
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
