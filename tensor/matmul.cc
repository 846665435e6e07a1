#include "dtensor/tensor/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/blas_gemm.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/matmul_cuda.h"

namespace dtensor {
namespace {

using internal::CheckFloatingCpu;
using internal::CheckSameDType;

// How BLAS reads one operand matrix in place: as stored (kNoTrans, row-major
// with leading dimension `ld`) or as the transpose of a row-major matrix
// (kTrans, `ld` its row stride).
struct BlasLayout {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// The layout of a rows x cols matrix (both >= 1) with the given element
// strides, or nullopt when BLAS cannot read it in place: it needs unit stride
// along one dim. The stride of a size-1 dim is never used, so it is ignored.
std::optional<BlasLayout> FindBlasLayout(int64_t rows, int64_t cols,
                                         int64_t row_stride,
                                         int64_t col_stride) {
  if (cols == 1 || col_stride == 1) {
    const int64_t ld = rows == 1 ? cols : row_stride;
    if (ld >= cols) return BlasLayout{CblasNoTrans, ld};
  }
  if (rows == 1 || row_stride == 1) {
    const int64_t ld = cols == 1 ? rows : col_stride;
    if (ld >= rows) return BlasLayout{CblasTrans, ld};
  }
  return std::nullopt;
}

std::optional<BlasLayout> MatrixLayout(const Tensor& m) {
  const int64_t n = m.dim();
  return FindBlasLayout(m.size(-2), m.size(-1), m.strides()[n - 2],
                        m.strides()[n - 1]);
}

// `m` ([..., rows, cols], rows and cols >= 1) itself when BLAS can read its
// matrices in place, else a contiguous copy.
Tensor BlasReadable(const Tensor& m) {
  return MatrixLayout(m) ? m : m.Contiguous();
}

// out [batch..., M, N] (contiguous) = a [batch..., M, K] @ b [batch..., K, N]
// + beta * out, for operands already expanded to the batch dims of `out`,
// BLAS-readable, and M, N, K >= 1.
template <typename T>
absl::Status BatchedGemm(const Tensor& a, const Tensor& b, T beta,
                         const Tensor& out) {
  const int64_t m = out.size(-2);
  const int64_t n = out.size(-1);
  const int64_t k = a.size(-1);
  const BlasLayout layout_a = *MatrixLayout(a);
  const BlasLayout layout_b = *MatrixLayout(b);
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (std::max({m, n, k, layout_a.ld, layout_b.ld}) > kIntMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: [", m, ", ", k, "] x [", k, ", ", n, "] (leading dims ",
        layout_a.ld, ", ", layout_b.ld, ") exceeds the 32-bit sizes of BLAS"));
  }
  const int64_t batch_dims = out.dim() - 2;
  const int64_t batches =
      NumElements(absl::MakeConstSpan(out.shape()).subspan(0, batch_dims));
  const T* a_data = a.data<T>();
  const T* b_data = b.data<T>();
  T* out_data = out.data<T>();
  for (int64_t batch = 0; batch < batches; ++batch) {
    int64_t a_offset = 0;
    int64_t b_offset = 0;
    for (int64_t d = batch_dims - 1, rest = batch; d >= 0; --d) {
      const int64_t i = rest % out.size(d);
      rest /= out.size(d);
      a_offset += i * a.strides()[d];
      b_offset += i * b.strides()[d];
    }
    internal::BlasGemm(layout_a.trans, layout_b.trans, static_cast<int>(m),
                       static_cast<int>(n), static_cast<int>(k),
                       a_data + a_offset, static_cast<int>(layout_a.ld),
                       b_data + b_offset, static_cast<int>(layout_b.ld), beta,
                       out_data + batch * m * n, static_cast<int>(n));
  }
  return absl::OkStatus();
}

// a [batch_a..., M, K] @ b [batch_b..., K, N] (+ bias [N]) as a contiguous
// [batch..., M, N] tensor, on sgemm/dgemm (T is float or double).
template <typename T>
absl::StatusOr<Tensor> BlasMatmul(Tensor a, Tensor b, const Tensor& bias,
                                  const Shape& batch) {
  const int64_t m = a.size(-2);
  const int64_t k = a.size(-1);
  const int64_t n = b.size(-1);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, CppToDType<T>()));
  if (out.numel() == 0) return out;
  // Bias rows are accumulated into by the GEMM (beta = 1).
  T beta = 0;
  if (bias.defined()) {
    DT_ASSIGN_OR_RETURN(const std::vector<T> bias_values, bias.ToVector<T>());
    T* row = out.data<T>();
    for (int64_t r = 0; r < out.numel() / n; ++r, row += n) {
      std::copy(bias_values.begin(), bias_values.end(), row);
    }
    beta = 1;
  } else if (k == 0) {
    DT_RETURN_IF_ERROR(out.Zero());
  }
  if (k == 0) return out;

  a = BlasReadable(a);
  b = BlasReadable(b);
  if (b.dim() == 2 && a.dim() > 2) {
    // A shared weight: fold a's batch dims into its rows for one big GEMM
    // when the strides allow it.
    absl::StatusOr<Tensor> a_rows = a.View({a.numel() / k, k});
    if (a_rows.ok() && MatrixLayout(*a_rows)) {
      DT_ASSIGN_OR_RETURN(Tensor out_rows, out.View({out.numel() / n, n}));
      DT_RETURN_IF_ERROR(BatchedGemm<T>(*a_rows, b, beta, out_rows));
      return out;
    }
  }
  Shape a_shape = batch;
  a_shape.push_back(m);
  a_shape.push_back(k);
  Shape b_shape = batch;
  b_shape.push_back(k);
  b_shape.push_back(n);
  DT_ASSIGN_OR_RETURN(Tensor a_batched, a.Expand(a_shape));
  DT_ASSIGN_OR_RETURN(Tensor b_batched, b.Expand(b_shape));
  DT_RETURN_IF_ERROR(BatchedGemm<T>(a_batched, b_batched, beta, out));
  return out;
}

bool IsHalf(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16;
}

// a @ b (+ bias [N], which may be undefined) for validated operands: floating,
// on the CPU, of one dtype, each at least 1-D.
absl::StatusOr<Tensor> MatmulImpl(const Tensor& a, const Tensor& b,
                                  const Tensor& bias) {
  if (IsHalf(a.dtype())) {
    DT_ASSIGN_OR_RETURN(Tensor a32, a.To(DType::kF32));
    DT_ASSIGN_OR_RETURN(Tensor b32, b.To(DType::kF32));
    Tensor bias32;
    if (bias.defined()) {
      DT_ASSIGN_OR_RETURN(bias32, bias.To(DType::kF32));
    }
    DT_ASSIGN_OR_RETURN(Tensor out32, MatmulImpl(a32, b32, bias32));
    return out32.To(a.dtype());
  }
  // A 1-D left operand is a row vector, a 1-D right operand a column vector.
  Tensor a_matrix = a;
  Tensor b_matrix = b;
  if (a.dim() == 1) {
    DT_ASSIGN_OR_RETURN(a_matrix, a.Unsqueeze(0));
  }
  if (b.dim() == 1) {
    DT_ASSIGN_OR_RETURN(b_matrix, b.Unsqueeze(1));
  }
  if (a_matrix.size(-1) != b_matrix.size(-2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Matmul: shapes ", ShapeToString(a.shape()), " and ",
                     ShapeToString(b.shape()), " do not match (",
                     a_matrix.size(-1), " != ", b_matrix.size(-2), ")"));
  }
  const auto batch_of = [](const Tensor& t) {
    return absl::MakeConstSpan(t.shape()).subspan(0, t.dim() - 2);
  };
  absl::StatusOr<Shape> batch =
      BroadcastShapes(batch_of(a_matrix), batch_of(b_matrix));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Matmul: batch dims of shapes ", ShapeToString(a.shape()),
                     " and ", ShapeToString(b.shape()), " do not broadcast"));
  }
  absl::StatusOr<Tensor> out =
      a.dtype() == DType::kF32
          ? BlasMatmul<float>(a_matrix, b_matrix, bias, *batch)
          : BlasMatmul<double>(a_matrix, b_matrix, bias, *batch);
  if (!out.ok()) return out.status();
  // Drop the dims that the 1-D operands gained.
  Shape result_shape = *batch;
  if (a.dim() > 1) result_shape.push_back(a_matrix.size(-2));
  if (b.dim() > 1) result_shape.push_back(b_matrix.size(-1));
  return out->View(result_shape);
}

}  // namespace

absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b) {
  if (cuda::OnCuda(a) || cuda::OnCuda(b)) return cuda::MatmulOnDevice(a, b);
  DT_RETURN_IF_ERROR(CheckFloatingCpu(a, "Matmul", "a"));
  DT_RETURN_IF_ERROR(CheckFloatingCpu(b, "Matmul", "b"));
  DT_RETURN_IF_ERROR(CheckSameDType(a, b, "Matmul", "a", "b"));
  if (a.dim() == 0 || b.dim() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: operands need at least 1 dim, got shapes ",
        ShapeToString(a.shape()), " and ", ShapeToString(b.shape())));
  }
  return MatmulImpl(a, b, Tensor());
}

absl::StatusOr<Tensor> Linear(const Tensor& a, const Tensor& weight,
                              const Tensor& bias) {
  if (cuda::OnCuda(a) || cuda::OnCuda(weight)) {
    DT_ASSIGN_OR_RETURN(const Tensor weight_t, weight.Transpose(0, 1));
    DT_ASSIGN_OR_RETURN(Tensor product, cuda::MatmulOnDevice(a, weight_t));
    return bias.defined() ? Add(product, bias) : product;
  }
  DT_RETURN_IF_ERROR(CheckFloatingCpu(a, "Linear", "input"));
  DT_RETURN_IF_ERROR(CheckFloatingCpu(weight, "Linear", "weight"));
  DT_RETURN_IF_ERROR(CheckSameDType(a, weight, "Linear", "input", "weight"));
  if (a.dim() == 0 || weight.dim() != 2 || a.size(-1) != weight.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: input ", ShapeToString(a.shape()),
                     " does not match weight ", ShapeToString(weight.shape()),
                     " (input [..., in] needs weight [out, in])"));
  }
  if (bias.defined()) {
    DT_RETURN_IF_ERROR(CheckFloatingCpu(bias, "Linear", "bias"));
    DT_RETURN_IF_ERROR(CheckSameDType(a, bias, "Linear", "input", "bias"));
    if (bias.dim() != 1 || bias.size(0) != weight.size(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Linear: bias ", ShapeToString(bias.shape()),
                       " does not match weight ", ShapeToString(weight.shape()),
                       " (needs [", weight.size(0), "])"));
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor weight_t, weight.Transpose(0, 1));
  return MatmulImpl(a, weight_t, bias);
}

}  // namespace dtensor
