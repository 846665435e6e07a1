#include "dtensor/nn/initializer.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/generator.h"

namespace dtensor {
namespace nn {
namespace {

// Every random element takes two 32-bit draws (NextNormal and
// NextUniformDouble both do), so element i starts at draw 2i.
constexpr uint64_t kDrawsPerElement = 2;

uint64_t SplitMix64Finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

absl::Status CheckBlock(const Shape& global_shape, const ShardBlock& block) {
  bool inside = block.shape.size() == global_shape.size() &&
                block.offset.size() == global_shape.size();
  for (size_t d = 0; inside && d < global_shape.size(); ++d) {
    inside = block.offset[d] >= 0 && block.shape[d] >= 0 &&
             block.offset[d] + block.shape[d] <= global_shape[d];
  }
  if (inside) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "InitializeBlock: block of shape [", absl::StrJoin(block.shape, ", "),
      "] at [", absl::StrJoin(block.offset, ", "), "] is not inside ",
      ShapeToString(global_shape)));
}

// Random initializers need a floating dtype; constants fill any dtype.
absl::Status CheckDType(const Initializer& init, DType dtype) {
  if (init.kind == Initializer::Kind::kConstant || IsFloatingPoint(dtype)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("initializer ", init.ToString(), " needs a floating dtype, ",
                   "got ", std::string(DTypeName(dtype))));
}

double Draw(const Initializer& init, Generator& generator) {
  if (init.kind == Initializer::Kind::kNormal) {
    return init.a + init.b * generator.NextNormal();
  }
  return init.a + (init.b - init.a) * generator.NextUniformDouble();
}

}  // namespace

absl::Status Initializer::Validate() const {
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer ", ToString(), " has a non-finite value"));
  }
  if (kind == Kind::kNormal && b < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer ", ToString(), " has a negative stddev"));
  }
  if (kind == Kind::kUniform && a > b) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer ", ToString(), " has low > high"));
  }
  return absl::OkStatus();
}

std::string Initializer::ToString() const {
  switch (kind) {
    case Kind::kConstant:
      return absl::StrCat("constant(", a, ")");
    case Kind::kNormal:
      return absl::StrCat("normal(", a, ", ", b, ")");
    case Kind::kUniform:
      return absl::StrCat("uniform(", a, ", ", b, ")");
  }
  return "unknown";
}

uint64_t TensorKey(uint64_t seed, absl::string_view fqn) {
  uint64_t hash = 14695981039346656037ull;
  const auto mix = [&hash](uint8_t byte) {
    hash ^= byte;
    hash *= 1099511628211ull;
  };
  for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(seed >> (8 * i)));
  for (char c : fqn) mix(static_cast<uint8_t>(c));
  return SplitMix64Finalize(hash);
}

absl::StatusOr<Tensor> InitializeBlock(const Initializer& init, uint64_t key,
                                       const Shape& global_shape,
                                       const ShardBlock& block, DType dtype) {
  DT_RETURN_IF_ERROR(init.Validate());
  DT_RETURN_IF_ERROR(CheckBlock(global_shape, block));
  DT_RETURN_IF_ERROR(CheckDType(init, dtype));
  if (init.kind == Initializer::Kind::kConstant) {
    return Tensor::Full(block.shape, init.a, dtype);
  }
  // Row by row of the last dim: a row is a run of consecutive global indices,
  // so the generator is positioned once per row.
  const int64_t rank = static_cast<int64_t>(block.shape.size());
  const Strides global_strides = ContiguousStrides(global_shape);
  const int64_t width = rank == 0 ? 1 : block.shape.back();
  const int64_t numel = block.numel();
  const int64_t rows = width == 0 ? 0 : numel / width;
  std::vector<double> values(numel);
  std::vector<int64_t> index(rank, 0);  // The local index of the row's start.
  Generator generator(key);
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t first = 0;
    for (int64_t d = 0; d < rank; ++d) {
      first += static_cast<uint64_t>((block.offset[d] + index[d]) *
                                     global_strides[d]);
    }
    generator.set_offset(first * kDrawsPerElement);
    for (int64_t j = 0; j < width; ++j) {
      values[r * width + j] = Draw(init, generator);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < block.shape[d]) break;
      index[d] = 0;
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor tensor,
                      Tensor::FromVector<double>(values, block.shape));
  return tensor.To(dtype);
}

absl::StatusOr<DTensor> InitializeDTensor(std::shared_ptr<Runtime> runtime,
                                          const DTensorSpec& spec,
                                          const Initializer& init,
                                          uint64_t key) {
  if (runtime == nullptr) {
    return absl::InvalidArgumentError("InitializeDTensor: null runtime");
  }
  for (const Placement& placement : spec.placements()) {
    if (placement.is_partial()) {
      return absl::InvalidArgumentError(
          absl::StrCat("InitializeDTensor: ", spec.ToString(),
                       " has a Partial placement; parameters are initialized "
                       "as Shard or Replicate"));
    }
  }
  if (runtime->metadata_only()) {
    DT_RETURN_IF_ERROR(init.Validate());
    DT_RETURN_IF_ERROR(CheckDType(init, spec.dtype()));
    return DTensor::FromSpec(std::move(runtime), spec);
  }
  DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(runtime->rank()));
  DT_ASSIGN_OR_RETURN(Tensor local, InitializeBlock(init, key, spec.shape(),
                                                    block, spec.dtype()));
  return DTensor::WrapUnchecked(std::move(runtime),
                                std::make_shared<const DTensorSpec>(spec),
                                std::move(local));
}

}  // namespace nn
}  // namespace dtensor
