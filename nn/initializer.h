#ifndef DTENSOR_NN_INITIALIZER_H_
#define DTENSOR_NN_INITIALIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/runtime.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace nn {

// How the initial values of a parameter or buffer are drawn.
//
// Random initializers are sharding-independent: element i of the GLOBAL tensor
// (row-major index) takes draws 2i and 2i + 1 of the Philox stream of the
// tensor's key (dtensor/tensor/generator.h), computed in double and converted
// to the tensor's dtype. So each rank can materialise exactly its own block
// from the block's global offsets, and the values depend only on the key, never
// on the mesh, the placements or the number of ranks. kNormal draws as
// Tensor::Normal does (Generator::NextNormal, mean + stddev * draw), so a
// whole tensor equals Tensor::Normal(shape, mean, stddev, Generator(key)).
struct Initializer {
  enum class Kind { kConstant, kNormal, kUniform };

  static Initializer Zeros() { return Constant(0.0); }
  static Initializer Ones() { return Constant(1.0); }
  static Initializer Constant(double value) {
    return {Kind::kConstant, value, 0.0};
  }
  static Initializer Normal(double mean, double stddev) {
    return {Kind::kNormal, mean, stddev};
  }
  // Uniform in [low, high) from Generator::NextUniformDouble.
  static Initializer Uniform(double low, double high) {
    return {Kind::kUniform, low, high};
  }

  Kind kind = Kind::kConstant;
  // kConstant: (value, unused); kNormal: (mean, stddev); kUniform: (low,
  // high).
  double a = 0.0;
  double b = 0.0;

  // Errors: a non-finite value, a negative stddev, low > high (naming it).
  absl::Status Validate() const;
  // "normal(0, 0.02)", "constant(1)", "uniform(-1, 1)".
  std::string ToString() const;
};

// The key of the random stream of the tensor called `fqn` in a model
// initialized with `seed`: a stable 64-bit hash of both (FNV-1a over the
// seed's bytes and the name, then a SplitMix64 finalizer), the same on every
// machine and build.
uint64_t TensorKey(uint64_t seed, absl::string_view fqn);

// The values of `block` of a tensor of `global_shape` drawn by `init` from the
// stream `key`, as a contiguous tensor of `dtype` (floating). Errors: an
// invalid initializer, a non-floating dtype for a random initializer, a block
// outside the global shape.
absl::StatusOr<Tensor> InitializeBlock(const Initializer& init, uint64_t key,
                                       const Shape& global_shape,
                                       const ShardBlock& block, DType dtype);

// The DTensor of `spec` (Shard and Replicate placements only) initialized by
// `init` from the stream `key`: each rank materialises only its own block.
// Under a metadata-only runtime, a DTensor without data (DTensor::FromSpec).
// Errors: a Partial placement, this rank not in the spec's mesh, and those of
// InitializeBlock.
absl::StatusOr<DTensor> InitializeDTensor(std::shared_ptr<Runtime> runtime,
                                          const DTensorSpec& spec,
                                          const Initializer& init,
                                          uint64_t key);

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_INITIALIZER_H_
