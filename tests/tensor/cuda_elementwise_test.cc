// The elementwise maps on a CUDA device (dtensor/tensor/cuda/map_launch.cuh:
// the vectorized contiguous kernel with its tail, the row vectors of
// broadcast operands, the 32- and 64-bit strided kernels) against the CPU
// kernels: every unary and binary op on every dtype it takes, casts between
// every pair of dtypes, where, integer division and the fused SwiGLU, over
// contiguous, misaligned (offset), transposed, strided and broadcast operands
// of tail sizes. Needs a GPU (tag `gpu`); skips with a message otherwise.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/swiglu.h"
#include "dtensor/testing/gpu.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::kGpu;
using testing::Layout;
using testing::OnGpu;
using testing::RandomTensor;

// How an operand is laid out: RandomTensor's layouts, or contiguous but one
// element past an aligned start (no vector loads).
enum class Form { kContiguous, kOffset, kTransposed, kStrided };

const std::vector<Form> kForms = {Form::kContiguous, Form::kOffset,
                                  Form::kTransposed, Form::kStrided};

std::string FormName(Form form) {
  switch (form) {
    case Form::kContiguous:
      return "contiguous";
    case Form::kOffset:
      return "offset";
    case Form::kTransposed:
      return "transposed";
    case Form::kStrided:
      return "strided";
  }
  return "?";
}

Tensor Operand(const Shape& shape, DType dtype, Form form, std::mt19937& rng,
               double low, double high) {
  if (form == Form::kOffset) {
    const int64_t n = NumElements(shape);
    const Tensor base =
        RandomTensor({n + 1}, dtype, Layout::kContiguous, rng, low, high);
    return *base.Narrow(0, 1, n)->View(shape);
  }
  const Layout layout = form == Form::kTransposed ? Layout::kTransposed
                        : form == Form::kStrided  ? Layout::kStrided
                                                  : Layout::kContiguous;
  return RandomTensor(shape, dtype, layout, rng, low, high);
}

// Tail sizes around the vector widths (4 f32, 8 bf16), and 2-D shapes (rows
// of whole vectors in the last two: a broadcast operand's row vectors).
const std::vector<Shape>& Shapes() {
  static const auto* shapes = new std::vector<Shape>{
      {1}, {3}, {4}, {9}, {4097}, {33, 7}, {6, 24}, {2, 5, 64}};
  return *shapes;
}

// Expects the device result to equal the CPU one within `scale` times the
// dtype's tolerance (exactly for integers and bool), or both to fail.
void ExpectMatches(const absl::StatusOr<Tensor>& gpu,
                   const absl::StatusOr<Tensor>& cpu, const std::string& what,
                   double scale = 4) {
  if (!cpu.ok()) {
    EXPECT_FALSE(gpu.ok()) << what << ": the CPU fails (" << cpu.status()
                           << ") but the device does not";
    return;
  }
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  ASSERT_TRUE(gpu->device().is_cuda()) << what;
  ASSERT_EQ(gpu->dtype(), cpu->dtype()) << what;
  const Tensor back = *gpu->To(Device::CPU());
  ASSERT_EQ(back.shape(), cpu->shape()) << what;
  const auto tolerance = testing::ToleranceFor(cpu->dtype());
  EXPECT_TRUE(AllClose(*back.To(DType::kF64), *cpu->To(DType::kF64),
                       scale * tolerance.rtol, scale * tolerance.atol))
      << what << "\n device: " << back << "\n cpu: " << *cpu;
}

std::string Describe(absl::string_view op, DType dtype, const Shape& shape,
                     Form form) {
  return absl::StrCat(op, " ", std::string(DTypeName(dtype)), " ",
                      ShapeToString(shape), " ", FormName(form));
}

using UnaryFn = absl::StatusOr<Tensor> (*)(const Tensor&);

TEST(CudaElementwiseTest, UnaryOpsOnEveryDTypeAndLayout) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  const std::vector<std::pair<std::string, UnaryFn>> ops = {
      {"Neg", Neg},         {"Abs", Abs},     {"Exp", Exp},   {"Log", Log},
      {"Sqrt", Sqrt},       {"Rsqrt", Rsqrt}, {"Relu", Relu}, {"Silu", Silu},
      {"Sigmoid", Sigmoid}, {"Tanh", Tanh}};
  for (DType dtype : testing::kAllDTypes) {
    for (const Shape& shape : Shapes()) {
      for (Form form : kForms) {
        const Tensor x = Operand(shape, dtype, form, rng, 0.25, 3);
        const Tensor gx = OnGpu(x);
        for (const auto& [name, fn] : ops) {
          ExpectMatches(fn(gx), fn(x), Describe(name, dtype, shape, form));
        }
        ExpectMatches(Gelu(gx, GeluApproximation::kTanh),
                      Gelu(x, GeluApproximation::kTanh),
                      Describe("Gelu", dtype, shape, form));
      }
    }
  }
}

TEST(CudaElementwiseTest, BinaryOpsOnEveryDTypeLayoutAndBroadcast) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (DType dtype : testing::kAllDTypes) {
    for (const Shape& shape : Shapes()) {
      // b: the same shape, the last dim only, a column, a scalar.
      std::vector<Shape> b_shapes = {shape, {shape.back()}, {}};
      if (shape.size() > 1) b_shapes.push_back({shape[0], 1});
      for (Form form : kForms) {
        const Tensor a = Operand(shape, dtype, form, rng, 1, 3);
        for (const Shape& b_shape : b_shapes) {
          // A broadcast b also aligned: the launch's row vectors.
          for (Form b_form : {Form::kOffset, Form::kContiguous}) {
            if (b_form == Form::kContiguous && b_shape == shape) continue;
            const Tensor b = Operand(b_shape, dtype, b_form, rng, 1, 3);
            for (const auto& [name, fn] : testing::BinaryElementwiseOps()) {
              ExpectMatches(fn(OnGpu(a), OnGpu(b)), fn(a, b),
                            Describe(name, dtype, shape, form) + " with " +
                                ShapeToString(b_shape) + " " +
                                FormName(b_form));
            }
          }
        }
      }
    }
  }
}

TEST(CudaElementwiseTest, CastsBetweenEveryPairOfDTypes) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (DType from : testing::kAllDTypes) {
    for (const Shape& shape : Shapes()) {
      for (Form form : kForms) {
        const Tensor x = Operand(shape, from, form, rng, -300, 300);
        const Tensor gx = OnGpu(x);
        for (DType to : testing::kAllDTypes) {
          ExpectMatches(
              gx.To(to), x.To(to),
              Describe(absl::StrCat("To ", std::string(DTypeName(to))), from,
                       shape, form),
              1);
        }
      }
    }
  }
}

TEST(CudaElementwiseTest, WhereOnEveryDTypeAndBroadcast) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  for (DType dtype : testing::kAllDTypes) {
    for (const Shape& shape : Shapes()) {
      for (Form form : kForms) {
        const Tensor cond = Operand(shape, DType::kBool, form, rng, 0, 1);
        const Tensor a = Operand(shape, dtype, Form::kOffset, rng, -3, 3);
        const Tensor b = Operand({shape.back()}, dtype, form, rng, -3, 3);
        ExpectMatches(Where(OnGpu(cond), OnGpu(a), OnGpu(b)), Where(cond, a, b),
                      Describe("Where", dtype, shape, form), 0);
      }
    }
  }
}

// Integer division truncates toward zero, min / -1 wraps, and a zero divisor
// is the CPU's error; pow rejects integers as the CPU does.
TEST(CudaElementwiseTest, IntegerDivisionMatchesTheCpu) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (DType dtype : {DType::kI32, DType::kI64}) {
    for (const Shape& shape : Shapes()) {
      for (Form form : kForms) {
        const Tensor a = Operand(shape, dtype, form, rng, -1000, 1000);
        Tensor b = Operand(shape, dtype, Form::kContiguous, rng, -9, 9);
        b = *Where(*Eq(b, 0.0), Tensor::Scalar(7, dtype), b);
        ExpectMatches(Div(OnGpu(a), OnGpu(b)), Div(a, b),
                      Describe("Div", dtype, shape, form), 0);
        ExpectMatches(Div(OnGpu(a), -1.0), Div(a, -1.0),
                      Describe("Div -1", dtype, shape, form), 0);
        const absl::StatusOr<Tensor> by_zero = Div(OnGpu(a), 0.0);
        ASSERT_FALSE(by_zero.ok()) << Describe("Div 0", dtype, shape, form);
        EXPECT_EQ(by_zero.status().message(), Div(a, 0.0).status().message());
        ExpectMatches(Pow(OnGpu(a), OnGpu(b)), Pow(a, b),
                      Describe("Pow", dtype, shape, form), 0);
      }
    }
    const double lowest = dtype == DType::kI32
                              ? std::numeric_limits<int32_t>::lowest()
                              : -9.2233720368547758e18;
    const Tensor min = *Tensor::Full({5}, lowest, dtype);
    ExpectMatches(Div(OnGpu(min), -1.0), Div(min, -1.0), "min / -1", 0);
    // One zero among many divisors.
    Tensor divisors = *Tensor::Full({4097}, 3, dtype);
    divisors = *Where(*Eq(*Tensor::Arange(0, 4097, 1, dtype), 4000.0),
                      Tensor::Scalar(0, dtype), divisors);
    const Tensor ones = *Tensor::Ones({4097}, dtype);
    const absl::StatusOr<Tensor> one_zero = Div(OnGpu(ones), OnGpu(divisors));
    ASSERT_FALSE(one_zero.ok());
    EXPECT_EQ(one_zero.status().message(),
              Div(ones, divisors).status().message());
  }
}

TEST(CudaElementwiseTest, SwiGluMatchesTheCpuOnEveryLayout) {
  DTENSOR_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  for (DType dtype : testing::kFloatDTypes) {
    for (const Shape& shape : Shapes()) {
      for (Form form : kForms) {
        const Tensor g = Operand(shape, dtype, Form::kOffset, rng, -2, 2);
        const Tensor a = Operand(shape, dtype, form, rng, -6, 6);
        const Tensor b = Operand(shape, dtype, Form::kContiguous, rng, -2, 2);
        const std::string what = Describe("SwiGlu", dtype, shape, form);
        ExpectMatches(SwiGlu(OnGpu(a), OnGpu(b)), SwiGlu(a, b), what);
        absl::StatusOr<SwiGluGrads> gpu =
            SwiGluBackward(OnGpu(g), OnGpu(a), OnGpu(b));
        absl::StatusOr<SwiGluGrads> cpu = SwiGluBackward(g, a, b);
        ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
        ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
        ExpectMatches(gpu->a, cpu->a, what + " da");
        ExpectMatches(gpu->b, cpu->b, what + " db");
      }
    }
  }
}

// A view whose offsets pass int32 (rows 2^30 bools apart): the 64-bit
// kernels. Values known without a reference: a cast of trues, and a sum.
TEST(CudaElementwiseTest, OffsetsPastInt32UseTheWideKernels) {
  DTENSOR_SKIP_WITHOUT_GPU();
  const int64_t row = int64_t{1} << 30;
  absl::StatusOr<Tensor> base = Tensor::Full({3, row}, 1, DType::kBool, kGpu);
  ASSERT_TRUE(base.ok()) << base.status();
  const Tensor corner = *base->Slice(1, 0, 5);  // [3, 5], row stride 2^30.
  absl::StatusOr<Tensor> ones = corner.To(DType::kF32);
  ASSERT_TRUE(ones.ok()) << ones.status();
  ExpectMatches(*ones, *Tensor::Ones({3, 5}, DType::kF32), "cast", 0);
  ExpectMatches(Add(*ones, *ones), *Tensor::Full({3, 5}, 2, DType::kF32), "add",
                0);
}

}  // namespace
}  // namespace dtensor
