#ifndef DTENSOR_TESTS_TENSOR_REFERENCE_ADAMW_H_
#define DTENSOR_TESTS_TENSOR_REFERENCE_ADAMW_H_

// torch.optim.AdamW's formula in double, operation by operation, for the
// tests of the fused steps (AdamWStep, AdamWStepMany).

#include <cstdint>
#include <vector>

#include "dtensor/tensor/adamw_kernel.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::testing {

// A parameter and its moments, row-major.
struct AdamWState {
  std::vector<double> p, m, v;
};

// `t`'s parameter and moments read back as doubles.
AdamWState AdamWStateOf(const Tensor& p, const Tensor& m, const Tensor& v);

// One step of the formula in double, element by element. `scale` gets the
// magnitudes of the terms each result is a sum of (|b1 m| + |(1 - b1) g| for
// m, ...): a rounding error is relative to them, not to a result they cancel
// to.
void ReferenceAdamWStep(AdamWState& s, AdamWState& scale,
                        const std::vector<double>& g, const AdamWOptions& a,
                        int64_t step);

// Expects |got - want| <= rtol * scale + atol elementwise (a fatal failure
// at the first element off, naming `what`).
void ExpectNearScaled(const Tensor& got, const std::vector<double>& want,
                      const std::vector<double>& scale, double rtol,
                      double atol, const char* what);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_TENSOR_REFERENCE_ADAMW_H_
