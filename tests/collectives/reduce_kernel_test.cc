// ReduceInto and ReduceIntoEach against sums, maxima and minima computed in
// the test, for every dtype and op, counts around the kernel's block size,
// and outputs that are inputs.
#include "dtensor/collectives/reduce_kernel.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/generator.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::AllDTypes;
using testing::HostTensor;
using testing::Matches;
using testing::RandomHost;
using testing::ReduceHost;
using testing::ToHost;
using testing::ToTensor;

std::vector<ReduceOp> OpsFor(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  if (IsFloatingPoint(dtype)) ops.push_back(ReduceOp::kAvg);
  return ops;
}

// n inputs of `count` elements of `dtype`, as reference values and as
// tensors: RandomHost's (exact in every dtype, seeds seed, seed + 1, ...),
// or with `normal` normals of three magnitudes rounded to `dtype` (their
// sums round, so the order of the additions shows in the last bits).
struct Inputs {
  std::vector<HostTensor> hosts;
  std::vector<Tensor> tensors;
  std::vector<const void*> pointers;
};
Inputs MakeInputs(DType dtype, int64_t count, int64_t n, uint64_t seed,
                  bool normal = false) {
  Inputs inputs;
  for (int64_t r = 0; r < n; ++r) {
    if (normal) {
      Generator generator(seed + r);
      inputs.tensors.push_back(Tensor::Normal({count}, 0.0,
                                              std::pow(1e3, r % 3), generator,
                                              DType::kF64)
                                   ->To(dtype)
                                   .value());
      inputs.hosts.push_back(ToHost(inputs.tensors.back()));
    } else {
      inputs.hosts.push_back(RandomHost({count}, dtype, seed + r));
      inputs.tensors.push_back(ToTensor(inputs.hosts.back(), dtype));
    }
    inputs.pointers.push_back(inputs.tensors.back().raw_data());
  }
  return inputs;
}

TEST(ReduceKernelTest, MatchesReferenceForEveryDTypeOpAndCount) {
  for (DType dtype : AllDTypes()) {
    for (ReduceOp op : OpsFor(dtype)) {
      for (int64_t count : {0, 1, 7, 2047, 2048, 2049, 5000}) {
        for (int64_t n : {1, 2, 3, 8}) {
          const Inputs in = MakeInputs(dtype, count, n, 100 * count);
          Tensor out = Tensor::Zeros({count}, dtype).value();
          ReduceInto(dtype, op, in.pointers, out.raw_data(), count);
          EXPECT_TRUE(Matches(out, ReduceHost(in.hosts, op, dtype)))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " count "
              << count << " n " << n;
        }
      }
    }
  }
}

// The chained form (one rank's input at a time, the partial results in the
// accumulator dtype, the last input finishing in place) gives ReduceInto's
// bits, on normals whose sums round, and the reference values.
TEST(ReduceKernelTest, ChainedReductionMatchesReduceIntoBitForBit) {
  for (DType dtype : AllDTypes()) {
    for (ReduceOp op : OpsFor(dtype)) {
      for (int64_t count : {0, 7, 2049}) {
        for (int64_t n : {2, 3, 5}) {
          for (const bool normal : {false, true}) {
            Inputs in = MakeInputs(dtype, count, n, 50 * count, normal);
            Tensor want = Tensor::Zeros({count}, dtype).value();
            ReduceInto(dtype, op, in.pointers, want.raw_data(), count);
            Tensor acc =
                Tensor::Zeros({count}, AccumulatorDType(dtype)).value();
            for (int64_t r = 0; r + 1 < n; ++r) {
              AccumulateInto(dtype, op, r == 0, in.pointers[r], acc.raw_data(),
                             count);
            }
            Tensor& got = in.tensors[n - 1];
            FinishAccumulated(dtype, op, acc.raw_data(), got.raw_data(), n,
                              got.raw_data(), count);
            const std::string context = absl::StrCat(
                std::string(DTypeName(dtype)), " ", ReduceOpName(op), " count ",
                count, " n ", n, normal ? " normals" : "");
            EXPECT_EQ(
                std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0)
                << context;
            if (!normal) {
              EXPECT_TRUE(Matches(got, ReduceHost(in.hosts, op, dtype)))
                  << context;
            }
          }
        }
      }
    }
  }
}

TEST(ReduceKernelTest, OutputMayBeOneOfTheInputs) {
  for (DType dtype : AllDTypes()) {
    const int64_t count = 4100;
    const Inputs in = MakeInputs(dtype, count, 4, 7);
    ReduceInto(dtype, ReduceOp::kSum, in.pointers, in.tensors[2].raw_data(),
               count);
    EXPECT_TRUE(
        Matches(in.tensors[2], ReduceHost(in.hosts, ReduceOp::kSum, dtype)))
        << DTypeName(dtype);
  }
}

TEST(ReduceKernelTest, EachOutputGetsTheResultEvenWhenItIsAnInput) {
  for (DType dtype : AllDTypes()) {
    for (int64_t count : {0, 5, 2048, 4100}) {
      const Inputs in = MakeInputs(dtype, count, 3, 30);
      const std::vector<Tensor>& tensors = in.tensors;
      // Every input in place, as all_reduce does, plus a separate output.
      Tensor extra = Tensor::Zeros({count}, dtype).value();
      std::vector<void*> outputs = {tensors[0].raw_data(),
                                    tensors[1].raw_data(),
                                    tensors[2].raw_data(), extra.raw_data()};
      ReduceIntoEach(dtype, ReduceOp::kMax, in.pointers, outputs, count);
      const HostTensor expected = ReduceHost(in.hosts, ReduceOp::kMax, dtype);
      for (const Tensor& tensor : {tensors[0], tensors[1], tensors[2], extra}) {
        EXPECT_TRUE(Matches(tensor, expected))
            << DTypeName(dtype) << " count " << count;
      }
    }
  }
}

TEST(ReduceKernelTest, MaxAndMinPropagateNaN) {
  const std::vector<double> a = {1.0, NAN, 3.0};
  const std::vector<double> b = {NAN, 2.0, 1.0};
  Tensor ta = Tensor::FromVector(a, {3}).value();
  Tensor tb = Tensor::FromVector(b, {3}).value();
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    Tensor out = Tensor::Zeros({3}, DType::kF64).value();
    const void* inputs[] = {ta.raw_data(), tb.raw_data()};
    ReduceInto(DType::kF64, op, inputs, out.raw_data(), 3);
    const std::vector<double> values = out.ToVector<double>().value();
    EXPECT_TRUE(std::isnan(values[0])) << ReduceOpName(op);
    EXPECT_TRUE(std::isnan(values[1])) << ReduceOpName(op);
    EXPECT_EQ(values[2], op == ReduceOp::kMax ? 3.0 : 1.0);
  }
}

TEST(ReduceKernelTest, IntegerSumsWrapAround) {
  const std::vector<int32_t> a = {2147483647, -2147483647 - 1};
  const std::vector<int32_t> b = {1, -1};
  Tensor ta = Tensor::FromVector(a, {2}).value();
  Tensor tb = Tensor::FromVector(b, {2}).value();
  Tensor out = Tensor::Zeros({2}, DType::kI32).value();
  const void* inputs[] = {ta.raw_data(), tb.raw_data()};
  ReduceInto(DType::kI32, ReduceOp::kSum, inputs, out.raw_data(), 2);
  EXPECT_EQ(out.ToVector<int32_t>().value(),
            (std::vector<int32_t>{-2147483647 - 1, 2147483647}));
}

}  // namespace
}  // namespace dtensor
