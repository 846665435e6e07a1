#ifndef DTENSOR_DTENSOR_TESTING_GRAD_CHECKS_H_
#define DTENSOR_DTENSOR_TESTING_GRAD_CHECKS_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/tensor.h"

// Drivers of the gradient tests of the op families.
namespace dtensor {
namespace testing_util {

// One differentiated call: a function of DTensors (written with ops) and its
// full inputs (floating ones f64; undefined for an absent optional input).
struct GradCase {
  // The registry op the call exercises, for the coverage check.
  std::string op;
  std::string description;
  std::vector<Tensor> inputs;
  std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)> fn;
};

// Checks one case:
//  1. on a one-rank mesh, the tape's gradients of every floating input
//     against central finite differences (nn::CheckGradients), with a random
//     output gradient c;
//  2. on `sharding_rounds` random meshes (1-D to 3-D, in-process ranks), every
//     input in a random sharding (nested orders; Partial terms for floating
//     inputs), c too: each gradient must come in its input's sharding without
//     Partials, and gathered equal the one-rank gradient within `tol`.
// Errors name the case, the mesh and the shardings.
absl::Status CheckGradCase(const GradCase& c, uint32_t seed,
                           int sharding_rounds, double tol);

// CheckGradCase on every case (seeds derived from `seed`); the first failure.
absl::Status CheckGradCases(const std::vector<GradCase>& cases, uint32_t seed,
                            int sharding_rounds, double tol);

// The names of `ops` that no case exercises.
std::vector<std::string> Uncovered(const std::vector<const OpDef*>& ops,
                                   const std::vector<GradCase>& cases);

// Uniform in [low, high), f64.
Tensor Random64(const Shape& shape, double low, double high, std::mt19937& rng);
// Random booleans.
Tensor RandomMask(const Shape& shape, std::mt19937& rng);
// Integers in [0, high) of an integer dtype.
Tensor RandomIndices(const Shape& shape, int64_t high, DType dtype,
                     std::mt19937& rng);

}  // namespace testing_util
}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_TESTING_GRAD_CHECKS_H_
