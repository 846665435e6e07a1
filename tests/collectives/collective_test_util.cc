#include "tests/collectives/collective_test_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"

namespace dtensor::testing {
namespace {

int64_t Product(absl::Span<const int64_t> sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) product *= size;
  return product;
}

// A tensor's row-major view as [outer, dim size, inner] around `dim`.
struct Split3 {
  int64_t outer;
  int64_t middle;
  int64_t inner;
};

Split3 SplitAround(const Shape& shape, int64_t dim) {
  return {Product(absl::MakeConstSpan(shape).subspan(0, dim)), shape[dim],
          Product(absl::MakeConstSpan(shape).subspan(dim + 1))};
}

double UlpRelative(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 1.2e-7;
    case DType::kF64:
      return 2.3e-16;
    case DType::kBF16:
      return 7.9e-3;
    case DType::kF16:
      return 9.8e-4;
    default:
      return 0.0;
  }
}

}  // namespace

std::vector<DType> AllDTypes() {
  return {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
          DType::kI32, DType::kI64, DType::kBool};
}

HostTensor RandomHost(const Shape& shape, DType dtype, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed * 2654435761u + 12345));
  HostTensor host{shape, std::vector<double>(Product(shape))};
  for (double& value : host.values) {
    if (dtype == DType::kBool) {
      value = std::uniform_int_distribution<int>(0, 1)(rng);
    } else if (IsFloatingPoint(dtype)) {
      value = std::uniform_int_distribution<int>(-32, 32)(rng) / 8.0;
    } else {
      value = std::uniform_int_distribution<int>(-20, 20)(rng);
    }
  }
  return host;
}

Tensor ToTensor(const HostTensor& host, DType dtype, bool contiguous) {
  Tensor values = Tensor::FromVector(host.values, host.shape).value();
  Tensor converted = values.To(dtype).value();
  if (contiguous) return converted.Contiguous();
  Shape padded = host.shape;
  padded.push_back(2);
  Tensor buffer = Tensor::Zeros(padded, dtype).value();
  Tensor view = buffer.Select(-1, 1).value();
  EXPECT_TRUE(view.CopyFrom(converted).ok());
  return view;
}

HostTensor ToHost(const Tensor& tensor) {
  return HostTensor{tensor.shape(), tensor.ToVector<double>().value()};
}

HostTensor NarrowHost(const HostTensor& host, int64_t dim, int64_t start,
                      int64_t length) {
  const Split3 s = SplitAround(host.shape, dim);
  HostTensor result{host.shape, {}};
  result.shape[dim] = length;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t m = start; m < start + length; ++m) {
      for (int64_t i = 0; i < s.inner; ++i) {
        result.values.push_back(host.values[(o * s.middle + m) * s.inner + i]);
      }
    }
  }
  return result;
}

HostTensor ConcatHost(const std::vector<HostTensor>& pieces, int64_t dim) {
  HostTensor result{pieces.at(0).shape, {}};
  result.shape[dim] = 0;
  for (const HostTensor& piece : pieces) result.shape[dim] += piece.shape[dim];
  const Split3 s = SplitAround(result.shape, dim);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (const HostTensor& piece : pieces) {
      const int64_t rows = piece.shape[dim];
      for (int64_t k = 0; k < rows * s.inner; ++k) {
        result.values.push_back(piece.values[o * rows * s.inner + k]);
      }
    }
  }
  return result;
}

HostTensor ReduceHost(const std::vector<HostTensor>& inputs, ReduceOp op,
                      DType dtype) {
  HostTensor result = inputs.at(0);
  for (size_t k = 0; k < result.values.size(); ++k) {
    double acc = inputs[0].values[k];
    for (size_t r = 1; r < inputs.size(); ++r) {
      const double x = inputs[r].values[k];
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc = dtype == DType::kBool ? (acc != 0 || x != 0) : acc + x;
          break;
        case ReduceOp::kMax:
          acc = std::max(acc, x);
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, x);
          break;
      }
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<double>(inputs.size());
    result.values[k] = acc;
  }
  return RoundTo(result, dtype);
}

HostTensor RoundTo(const HostTensor& host, DType dtype) {
  return ToHost(ToTensor(host, dtype));
}

::testing::AssertionResult Matches(const Tensor& actual,
                                   const HostTensor& expected) {
  if (!actual.defined()) {
    return ::testing::AssertionFailure() << "the tensor is undefined";
  }
  if (actual.shape() != expected.shape) {
    return ::testing::AssertionFailure()
           << "shape " << ShapeToString(actual.shape()) << ", expected "
           << ShapeToString(expected.shape);
  }
  const std::vector<double> values = actual.ToVector<double>().value();
  const double rtol = UlpRelative(actual.dtype());
  for (size_t k = 0; k < values.size(); ++k) {
    const double want = expected.values[k];
    if (std::fabs(values[k] - want) > rtol * std::fabs(want)) {
      return ::testing::AssertionFailure()
             << "element " << k << " is " << values[k] << ", expected " << want
             << " (" << DTypeName(actual.dtype()) << ", shape "
             << ShapeToString(expected.shape) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<int64_t> RandomPieces(int64_t count, int64_t max_size,
                                  std::mt19937& rng) {
  std::vector<int64_t> sizes(count);
  for (int64_t& size : sizes) {
    size = std::uniform_int_distribution<int64_t>(0, max_size)(rng);
  }
  return sizes;
}

Shape RandomShape(std::mt19937& rng) {
  Shape shape(std::uniform_int_distribution<int>(1, 3)(rng));
  for (int64_t& size : shape) {
    size = std::uniform_int_distribution<int64_t>(1, 4)(rng);
  }
  return shape;
}

CommunicatorOptions TestOptions(absl::Duration deadline, bool debug) {
  CommunicatorOptions options;
  options.default_deadline = deadline;
  options.debug = debug;
  return options;
}

absl::Status RunOnWorld(int64_t world_size,
                        const std::function<absl::Status(Communicator&)>& fn,
                        const CommunicatorOptions& options) {
  return LocalCluster(world_size, options).Run([&](ProcessGroups& groups) {
    DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, groups.World());
    return fn(*world);
  });
}

}  // namespace dtensor::testing
