#ifndef DTENSOR_TENSOR_BLAS_GEMM_H_
#define DTENSOR_TENSOR_BLAS_GEMM_H_

#include <cblas.h>

// The CPU GEMM (OpenBLAS through CBLAS) for the kernels of dtensor/tensor/
// that multiply matrices in place: Matmul and the tiled attention.
namespace dtensor::internal {

// c = a b + beta c on row-major matrices, a (m x k) and b (k x n) read as
// stored or transposed, with leading dimensions lda, ldb, ldc.
// Requires: m, n, k >= 1 (BLAS may leave c alone for k = 0) and leading
// dimensions of at least the row length as stored.
inline void BlasGemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m,
                     int n, int k, const float* a, int lda, const float* b,
                     int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb,
              beta, c, ldc);
}

inline void BlasGemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m,
                     int n, int k, const double* a, int lda, const double* b,
                     int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a, trans_b, m, n, k, 1.0, a, lda, b, ldb,
              beta, c, ldc);
}

}  // namespace dtensor::internal

#endif  // DTENSOR_TENSOR_BLAS_GEMM_H_
