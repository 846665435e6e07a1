#ifndef DTENSOR_TESTS_TENSOR_REFERENCE_ATTENTION_H_
#define DTENSOR_TESTS_TENSOR_REFERENCE_ATTENTION_H_

#include <vector>

#include "dtensor/tensor/tensor.h"

// ScaledDotProductAttention (dtensor/tensor/nn_functional.h) and its
// gradients (and the rows' log-sum-exps) in double by the textbook formulas,
// for the kernel tests: every score of a query row materialized, softmax over
// the keys the query sees (none: a zero row), and ds = p (dp - sum(dp p)) (not
// the kernels' sum(dout * out)).
namespace dtensor::testing {

struct AttentionReference {
  Shape out_shape;          // [batch..., Lq, Ev], the broadcast batch.
  std::vector<double> out;  // Row-major over out_shape.
  // The log-sum-exp of each output row's scaled scores over the keys it
  // sees, row-major over [batch..., Lq]; -inf for a row that sees none.
  std::vector<double> lse;
  // Row-major over q's, k's and v's shapes, summed over the batch dims each
  // was broadcast on; empty without grad_out.
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
};

// The attention of q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] (any
// floating dtype, read as double; shapes valid), and with a defined grad_out
// [batch..., Lq, Ev] the gradients. `scale` <= 0 means 1/sqrt(E) (1 for
// E = 0).
AttentionReference ReferenceAttention(const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& grad_out,
                                      bool causal, double scale);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_REFERENCE_ATTENTION_H_
