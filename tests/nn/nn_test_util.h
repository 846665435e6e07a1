#ifndef DTENSOR_TESTS_NN_NN_TEST_UTIL_H_
#define DTENSOR_TESTS_NN_NN_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama_config.h"
#include "dtensor/nn/module.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/tensor.h"
#include "tests/nn/reference_llama.h"

namespace dtensor {
namespace nn_testing {

// The tiny Llama of the tests: dim 32, 2 layers, 4 heads, 2 kv heads,
// vocabulary 64, hidden dim 96, max_seq_len 16; init_std 0.1 so that the
// attention is far from uniform.
nn::LlamaConfig TinyConfig();

// Runs `fn` on every rank of an in-process mesh of `mesh_shape`, each with
// its runtime; the first failure, prefixed with its rank.
using RankFn = std::function<absl::Status(std::shared_ptr<Runtime> runtime,
                                          const DeviceMesh& mesh)>;
absl::Status RunOnMesh(const std::vector<int64_t>& mesh_shape,
                       const RankFn& fn);

// Every slot's gathered value (FullTensor: collective), by name.
absl::StatusOr<Weights> GatherWeights(nn::Module& root);

// `full` Replicate on every dim of `mesh` (the data of this rank's `full`).
absl::StatusOr<DTensor> Replicated(std::shared_ptr<Runtime> runtime,
                                   const DeviceMesh& mesh, const Tensor& full);

// Uniform in [low, high), f32.
Tensor RandomF32(const Shape& shape, double low, double high,
                 std::mt19937& rng);
// Integers in [0, high), i64.
Tensor RandomTokens(const Shape& shape, int64_t high, std::mt19937& rng);

// max |a - b| / (atol + rtol * |b|) <= 1; false when sizes differ.
bool Close(const std::vector<double>& a, const std::vector<double>& b,
           double rtol, double atol);

// The elements of `t` as doubles, row-major.
std::vector<double> Values(const Tensor& t);

// An error naming `what` unless `got` and `want` agree elementwise within
// `tol` * (1 + |want|).
absl::Status ExpectNear(const std::vector<double>& got,
                        const std::vector<double>& want, const char* what,
                        double tol = 1e-12);

// ExpectNear on the gathered value of `grad` (FullTensor: collective).
absl::Status ExpectFull(const DTensor& grad, const std::vector<double>& want,
                        const char* what, double tol = 1e-12);

// The in-process backend keeps the buffers of a group's last collective
// until the group's next one; one small all-gather on every mesh dim makes
// what the program itself still holds observable (storage lifetime tests).
absl::Status FlushCollectives(const std::shared_ptr<Runtime>& runtime,
                              const DeviceMesh& mesh);

}  // namespace nn_testing
}  // namespace dtensor

#endif  // DTENSOR_TESTS_NN_NN_TEST_UTIL_H_
