// Scalar operands of the elementwise ops on a CUDA device: a one-element host
// operand is passed to the kernel by value (elementwise_cuda.cc), never
// copied to the device. Every binary op on every dtype, the scalar on either
// side and of shape [], [1] and [1, 1] (which broadcasts the rank up), and
// Where with a scalar a or b, against the two-tensor device path with the
// scalar copied to the device: bit for bit, the same errors; and none of it
// makes the host wait (Profiler host syncs). Needs a GPU (tag `gpu`); skips
// with a message otherwise.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_body_test_util.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using cuda::body_testing::Bytes;
using testing::kGpu;
using testing::Layout;
using testing::OnGpu;
using testing::RandomTensor;

using testing::BinaryElementwiseOps;

// Expects `got` (host scalar path) to equal `expected` (device operands) bit
// for bit, on the device with the same shape and dtype, or both to fail
// alike.
void ExpectSame(const absl::StatusOr<Tensor>& got,
                const absl::StatusOr<Tensor>& expected,
                const std::string& what) {
  if (!expected.ok()) {
    ASSERT_FALSE(got.ok()) << what << ": expected " << expected.status();
    EXPECT_EQ(got.status(), expected.status()) << what;
    return;
  }
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  ASSERT_TRUE(got->device().is_cuda()) << what;
  ASSERT_EQ(got->dtype(), expected->dtype()) << what;
  ASSERT_EQ(got->shape(), expected->shape()) << what;
  EXPECT_EQ(Bytes(*got->To(Device::CPU())), Bytes(*expected->To(Device::CPU())))
      << what;
}

// One-element host scalars of `dtype`: 0-d, [1] and [1, 1].
std::vector<Tensor> HostScalars(DType dtype, std::mt19937& rng) {
  const Tensor value = RandomTensor({}, dtype, Layout::kContiguous, rng, 1, 3);
  return {value, *value.Reshape({1}), *value.Reshape({1, 1})};
}

TEST(CudaScalarOperandTest, BinaryOpsMatchTheTwoTensorPathBitForBit) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (DType dtype : testing::kAllDTypes) {
    for (const Shape& shape : std::vector<Shape>{{9}, {4097}, {33, 7}}) {
      for (Layout layout : {Layout::kContiguous, Layout::kTransposed}) {
        // Values in [1, 3): no integer division by zero.
        const Tensor x = OnGpu(RandomTensor(shape, dtype, layout, rng, 1, 3));
        for (const Tensor& s : HostScalars(dtype, rng)) {
          const Tensor s_gpu = OnGpu(s);
          for (const auto& [name, fn] : BinaryElementwiseOps()) {
            const std::string what = absl::StrCat(
                name, " ", std::string(DTypeName(dtype)), " ",
                ShapeToString(shape), " with ", ShapeToString(s.shape()));
            ExpectSame(fn(x, s), fn(x, s_gpu), what + " (scalar second)");
            ExpectSame(fn(s, x), fn(s_gpu, x), what + " (scalar first)");
          }
        }
      }
    }
  }
}

TEST(CudaScalarOperandTest, WhereWithAScalarMatchesTheTensorPath) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor cond =
        OnGpu(RandomTensor({33, 7}, DType::kBool, Layout::kStrided, rng, 0, 1));
    const Tensor x =
        OnGpu(RandomTensor({7}, dtype, Layout::kContiguous, rng, -3, 3));
    for (const Tensor& s : HostScalars(dtype, rng)) {
      const Tensor s_gpu = OnGpu(s);
      const std::string what =
          absl::StrCat("Where ", std::string(DTypeName(dtype)), " ",
                       ShapeToString(s.shape()));
      ExpectSame(Where(cond, s, x), Where(cond, s_gpu, x), what + " as a");
      ExpectSame(Where(cond, x, s), Where(cond, x, s_gpu), what + " as b");
    }
  }
}

// The scalar's dtype is checked as before (no promotion), and an integer
// scalar divisor of 0 is still the CPU's error.
TEST(CudaScalarOperandTest, ErrorsAreTheTensorPaths) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const Tensor x = *Tensor::Ones({5}, DType::kF32, kGpu);
  const Tensor i64 = Tensor::Scalar(2, DType::kI64);
  ExpectSame(Add(x, i64), Add(x, OnGpu(i64)), "f32 + i64");
  ExpectSame(Add(i64, x), Add(OnGpu(i64), x), "i64 + f32");
  const Tensor ints = *Tensor::Ones({5}, DType::kI32, kGpu);
  const absl::StatusOr<Tensor> by_zero = Div(ints, 0.0);
  ASSERT_FALSE(by_zero.ok());
  EXPECT_NE(by_zero.status().message().find("division by zero"),
            std::string::npos)
      << by_zero.status();
  ExpectSame(Pow(ints, Tensor::Scalar(2, DType::kI32)),
             Pow(ints, OnGpu(Tensor::Scalar(2, DType::kI32))), "i32 pow");
}

// What the training step's scalar operands do (a mean's scale, a mask's
// fill, an ignore-index comparison) makes the host wait for nothing.
TEST(CudaScalarOperandTest, ScalarOperandsMakeNoHostSync) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const Tensor x = *Tensor::Ones({1000}, DType::kBF16, kGpu);
  const Tensor targets = *Tensor::Zeros({64}, DType::kI64, kGpu);
  Profiler profiler(0);
  absl::StatusOr<Tensor> scaled, masked;
  {
    Profiler::Scope scope(profiler);
    Profiler::StepScope step(profiler);
    scaled = Mul(x, 0.5);
    const absl::StatusOr<Tensor> counted = Ne(targets, -100);
    ASSERT_TRUE(counted.ok()) << counted.status();
    masked = Where(*counted, targets, Tensor::Scalar(0, DType::kI64));
  }
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ASSERT_TRUE(masked.ok()) << masked.status();
  ASSERT_EQ(profiler.steps().size(), 1u);
  EXPECT_EQ(profiler.steps()[0].host_syncs, 0);
  EXPECT_EQ(scaled->ToVector<float>().value(), std::vector<float>(1000, 0.5f));
}

}  // namespace
}  // namespace dtensor
