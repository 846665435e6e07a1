// ReduceInto and ReduceIntoEach against sums, maxima and minima computed in
// the test, for every dtype and op, counts around the kernel's block size,
// and outputs that are inputs.
#include "dtensor/collectives/reduce_kernel.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::AllDTypes;
using testing::HostTensor;
using testing::Matches;
using testing::RandomHost;
using testing::ReduceHost;
using testing::ToTensor;

std::vector<ReduceOp> OpsFor(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  if (IsFloatingPoint(dtype)) ops.push_back(ReduceOp::kAvg);
  return ops;
}

TEST(ReduceKernelTest, MatchesReferenceForEveryDTypeOpAndCount) {
  for (DType dtype : AllDTypes()) {
    for (ReduceOp op : OpsFor(dtype)) {
      for (int64_t count : {0, 1, 7, 2047, 2048, 2049, 5000}) {
        for (int64_t n : {1, 2, 3, 8}) {
          std::vector<HostTensor> hosts;
          std::vector<Tensor> tensors;
          std::vector<const void*> inputs;
          for (int64_t r = 0; r < n; ++r) {
            hosts.push_back(RandomHost({count}, dtype, 100 * count + r));
            tensors.push_back(ToTensor(hosts.back(), dtype));
            inputs.push_back(tensors.back().raw_data());
          }
          Tensor out = Tensor::Zeros({count}, dtype).value();
          ReduceInto(dtype, op, inputs, out.raw_data(), count);
          EXPECT_TRUE(Matches(out, ReduceHost(hosts, op, dtype)))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " count "
              << count << " n " << n;
        }
      }
    }
  }
}

TEST(ReduceKernelTest, OutputMayBeOneOfTheInputs) {
  for (DType dtype : AllDTypes()) {
    const int64_t count = 4100;
    std::vector<HostTensor> hosts;
    std::vector<Tensor> tensors;
    std::vector<const void*> inputs;
    for (int64_t r = 0; r < 4; ++r) {
      hosts.push_back(RandomHost({count}, dtype, 7 + r));
      tensors.push_back(ToTensor(hosts.back(), dtype));
      inputs.push_back(tensors.back().raw_data());
    }
    ReduceInto(dtype, ReduceOp::kSum, inputs, tensors[2].raw_data(), count);
    EXPECT_TRUE(Matches(tensors[2], ReduceHost(hosts, ReduceOp::kSum, dtype)))
        << DTypeName(dtype);
  }
}

TEST(ReduceKernelTest, EachOutputGetsTheResultEvenWhenItIsAnInput) {
  for (DType dtype : AllDTypes()) {
    for (int64_t count : {0, 5, 2048, 4100}) {
      std::vector<HostTensor> hosts;
      std::vector<Tensor> tensors;
      std::vector<const void*> inputs;
      for (int64_t r = 0; r < 3; ++r) {
        hosts.push_back(RandomHost({count}, dtype, 30 + r));
        tensors.push_back(ToTensor(hosts.back(), dtype));
        inputs.push_back(tensors.back().raw_data());
      }
      // Every input in place, as all_reduce does, plus a separate output.
      Tensor extra = Tensor::Zeros({count}, dtype).value();
      std::vector<void*> outputs = {tensors[0].raw_data(),
                                    tensors[1].raw_data(),
                                    tensors[2].raw_data(), extra.raw_data()};
      ReduceIntoEach(dtype, ReduceOp::kMax, inputs, outputs, count);
      const HostTensor expected = ReduceHost(hosts, ReduceOp::kMax, dtype);
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
