#ifndef CONSUMER_OPS_EXPECTED_H_
#define CONSUMER_OPS_EXPECTED_H_

// The consumer's own header at ops/: it does not collide with dtensor's, which
// are all under dtensor/ (dtensor/ops/...).

#include "absl/status/statusor.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/tensor.h"

namespace consumer {

// x @ w computed on one rank: the reference for the sharded product.
inline absl::StatusOr<dtensor::Tensor> ExpectedProduct(
    const dtensor::Tensor& x, const dtensor::Tensor& w) {
  return dtensor::Matmul(x, w);
}

}  // namespace consumer

#endif  // CONSUMER_OPS_EXPECTED_H_
