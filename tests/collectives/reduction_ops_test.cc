// all_reduce and reduce_scatter on in-process groups of 1 to 8 ranks, for
// every dtype and reduce op, random shapes and dims, uneven pieces (zeros
// included) and strided tensors, against reductions computed in the test from
// every rank's input.
#include <mutex>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::AllDTypes;
using testing::HostTensor;
using testing::Matches;
using testing::NarrowHost;
using testing::RandomHost;
using testing::RandomPieces;
using testing::RandomShape;
using testing::ReduceHost;
using testing::RunOnWorld;
using testing::ToTensor;

std::vector<ReduceOp> OpsFor(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  if (IsFloatingPoint(dtype)) ops.push_back(ReduceOp::kAvg);
  return ops;
}

// One all_reduce: rank r's input is RandomHost(shape, dtype, seed + r).
struct AllReduceCase {
  Shape shape;
  DType dtype;
  ReduceOp op;
  bool contiguous;
  uint64_t seed;
};

TEST(AllReduceTest, MatchesReferenceForEveryGroupSizeDTypeAndOp) {
  for (int64_t n = 1; n <= 8; ++n) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<AllReduceCase> cases;
    for (DType dtype : AllDTypes()) {
      for (ReduceOp op : OpsFor(dtype)) {
        for (bool contiguous : {true, false}) {
          cases.push_back({RandomShape(rng), dtype, op, contiguous, rng()});
        }
      }
    }
    // Large enough to split into several aligned slices, empty, and 0-d.
    cases.push_back({{37, 29}, DType::kF32, ReduceOp::kSum, true, 5});
    cases.push_back({{3, 0}, DType::kF32, ReduceOp::kSum, true, 6});
    cases.push_back({{}, DType::kF64, ReduceOp::kMax, true, 7});
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          for (const AllReduceCase& c : cases) {
            Tensor tensor =
                ToTensor(RandomHost(c.shape, c.dtype, c.seed + world.rank()),
                         c.dtype, c.contiguous);
            DT_RETURN_IF_ERROR(world.AllReduce(tensor, c.op));
            std::vector<HostTensor> inputs;
            for (int64_t r = 0; r < n; ++r) {
              inputs.push_back(RandomHost(c.shape, c.dtype, c.seed + r));
            }
            EXPECT_TRUE(Matches(tensor, ReduceHost(inputs, c.op, c.dtype)))
                << "n=" << n << " " << DTypeName(c.dtype) << " "
                << ReduceOpName(c.op) << " " << ShapeToString(c.shape)
                << (c.contiguous ? "" : " strided");
          }
          return absl::OkStatus();
        }).ok());
  }
}

TEST(AllReduceTest, EveryRankGetsTheSameBits) {
  // Values that do not add up exactly: the order of the additions shows.
  for (int64_t n : {3, 5, 8}) {
    std::mutex mu;
    std::vector<std::vector<float>> results(n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  Generator generator(42 + world.rank());
                  DT_ASSIGN_OR_RETURN(
                      Tensor tensor,
                      Tensor::Uniform({1000}, -1.0, 1.0, generator));
                  DT_RETURN_IF_ERROR(world.AllReduce(tensor, ReduceOp::kAvg));
                  std::lock_guard<std::mutex> lock(mu);
                  results[world.rank()] = tensor.ToVector<float>().value();
                  return absl::OkStatus();
                }).ok());
    for (int64_t r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << r;
  }
}

// One reduce_scatter along `dim`: rank r's input is RandomHost(shape, dtype,
// seed + r) with shape[dim] = sum(sizes); empty `sizes` means equal pieces.
struct ReduceScatterCase {
  Shape shape;
  int64_t dim;
  std::vector<int64_t> sizes;
  DType dtype;
  ReduceOp op;
  bool contiguous_input;
  bool contiguous_output;
  uint64_t seed;
};

TEST(ReduceScatterTest, MatchesReferenceWithUnevenPiecesAndAnyDim) {
  for (int64_t n = 1; n <= 8; ++n) {
    std::mt19937 rng(static_cast<uint32_t>(100 + n));
    std::vector<ReduceScatterCase> cases;
    for (DType dtype : AllDTypes()) {
      for (ReduceOp op : OpsFor(dtype)) {
        ReduceScatterCase c;
        c.shape = RandomShape(rng);
        c.dim = std::uniform_int_distribution<int64_t>(
            0, static_cast<int64_t>(c.shape.size()) - 1)(rng);
        c.sizes = RandomPieces(n, 3, rng);
        c.shape[c.dim] = 0;
        for (int64_t size : c.sizes) c.shape[c.dim] += size;
        c.dtype = dtype;
        c.op = op;
        c.contiguous_input = rng() % 2 == 0;
        c.contiguous_output = rng() % 2 == 0;
        c.seed = rng();
        cases.push_back(c);
      }
    }
    // Equal pieces from empty sizes, along a negative dim.
    cases.push_back(
        {{2, 3 * n}, -1, {}, DType::kF32, ReduceOp::kSum, true, true, 11});
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          const int64_t me = world.rank();
          for (const ReduceScatterCase& c : cases) {
            const int64_t dim =
                c.dim < 0 ? c.dim + static_cast<int64_t>(c.shape.size())
                          : c.dim;
            std::vector<int64_t> sizes = c.sizes;
            if (sizes.empty()) sizes.assign(n, c.shape[dim] / n);
            int64_t offset = 0;
            for (int64_t r = 0; r < me; ++r) offset += sizes[r];
            Tensor input = ToTensor(RandomHost(c.shape, c.dtype, c.seed + me),
                                    c.dtype, c.contiguous_input);
            Shape out_shape = c.shape;
            out_shape[dim] = sizes[me];
            Tensor output = ToTensor(RandomHost(out_shape, c.dtype, 0), c.dtype,
                                     c.contiguous_output);
            DT_RETURN_IF_ERROR(
                world.ReduceScatter(input, output, c.dim, c.op, c.sizes));
            std::vector<HostTensor> inputs;
            for (int64_t r = 0; r < n; ++r) {
              inputs.push_back(RandomHost(c.shape, c.dtype, c.seed + r));
            }
            EXPECT_TRUE(
                Matches(output, NarrowHost(ReduceHost(inputs, c.op, c.dtype),
                                           dim, offset, sizes[me])))
                << "n=" << n << " " << DTypeName(c.dtype) << " "
                << ReduceOpName(c.op) << " shape " << ShapeToString(c.shape)
                << " dim " << c.dim;
          }
          return absl::OkStatus();
        }).ok());
  }
}

}  // namespace
}  // namespace dtensor
