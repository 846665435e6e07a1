#ifndef DTENSOR_OPS_MATMUL_OPS_H_
#define DTENSOR_OPS_MATMUL_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Matrix products on DTensors, with the tensor layer's semantics
// (dtensor/tensor/matmul.h) and strategies chosen per mesh dim over the loop
// dims batch..., M, K, N of a [..., M, K] @ b [..., K, N]:
//   a S(M) . b R   -> S(M)          a R . b S(N)   -> S(N)
//   a S(K) . b S(K) -> P(sum)       (no communication)
//   a R . b R      -> R             a P . b R, a R . b P -> P (sum or avg)
//   batch dims sharded alike in both (Replicate where broadcast) stay sharded.
// linear's and addmm's bias follows the output's N (and M) shards, and is
// Partial(sum) with a contraction (a Replicate bias becomes Partial locally:
// one rank keeps it).
//
// Registry names: matmul, mm (2-D @ 2-D), bmm (3-D @ 3-D, equal batch),
// linear (x, weight[, bias]), addmm (bias, a, b; kScalar arguments beta and
// alpha, default 1), linear_weight_grad (g, x).
// Errors: what the tensor layer's Matmul and Linear report (shapes, dtypes),
// operands on different meshes, mm and bmm operands of another rank.

// torch.matmul: 1-D to n-D operands, batch dims broadcast.
absl::StatusOr<DTensor> Matmul(const DTensor& a, const DTensor& b);
absl::StatusOr<DTensor> Mm(const DTensor& a, const DTensor& b);
absl::StatusOr<DTensor> Bmm(const DTensor& a, const DTensor& b);
// x [..., in] @ weight[out, in]^T + bias [out] (bias optional: an undefined
// DTensor).
absl::StatusOr<DTensor> Linear(const DTensor& x, const DTensor& weight,
                               const DTensor& bias = DTensor());
// Linear's weight gradient: g [..., out]^T x [..., in] summed over every row
// of the leading dims (equal in both), [out, in]. The leading dims are
// contracted loops: sharded alike in g and x on any mesh dims (a batch on dp,
// a sequence on cp) they give a Partial(sum) result without communication,
// which flattening them into [rows, ...] for an mm could not keep.
absl::StatusOr<DTensor> LinearWeightGrad(const DTensor& g, const DTensor& x);
// beta * bias + alpha * (a @ b); bias broadcasts to [M, N]; with beta = 0
// the bias is ignored (NaNs in it do not propagate), as in torch.addmm.
absl::StatusOr<DTensor> Addmm(const DTensor& bias, const DTensor& a,
                              const DTensor& b, double beta = 1,
                              double alpha = 1);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> MatmulOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_MATMUL_OPS_H_
