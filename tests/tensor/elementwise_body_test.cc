// The host forms of the CUDA elementwise bodies (16-bit conversions, binary
// and unary ops, casts; dtensor/tensor/cuda/host_device.h and
// elementwise_body.h) against the CPU kernels of dtensor/tensor/, bit for bit.
#include "dtensor/tensor/cuda/elementwise_body.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/half.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_body_test_util.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::cuda::body_testing::Bytes;
using ::dtensor::cuda::body_testing::ForFloatingStorage;
using ::dtensor::cuda::body_testing::ForStorage;
using ::dtensor::cuda::body_testing::StridedShapeOf;
using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomTensor;

TEST(HostDeviceTest, SixteenBitConversionsMatchHalfH) {
  std::mt19937 rng(1);
  std::vector<float> values = {0.0f,     -0.0f,     1.0f,  -2.5f,      65504.0f,
                               65520.0f, 1e-8f,     6e-8f, 3e-5f,      1e38f,
                               INFINITY, -INFINITY, NAN,   1.00390625f};
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t word = bits(rng);
    float value;
    std::memcpy(&value, &word, sizeof(value));
    values.push_back(value);
  }
  for (const float value : values) {
    ASSERT_EQ(ToBf16(value).bits, BFloat16(value).bits) << value;
    ASSERT_EQ(ToF16(value).bits, Half(value).bits) << value;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    Half half;
    half.bits = static_cast<uint16_t>(h);
    BFloat16 bf;
    bf.bits = static_cast<uint16_t>(h);
    const float expected_half = half;
    const float expected_bf = bf;
    const float got_half = ToFloat(F16{static_cast<uint16_t>(h)});
    const float got_bf = ToFloat(Bf16{static_cast<uint16_t>(h)});
    ASSERT_EQ(std::memcmp(&got_half, &expected_half, 4), 0) << h;
    ASSERT_EQ(std::memcmp(&got_bf, &expected_bf, 4), 0) << h;
  }
}

// Runs a binary body over `out`'s shape the way the CUDA kernel indexes it.
Tensor HostBinary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = *BroadcastShapes(a.shape(), b.shape());
  const Tensor av = *a.Expand(shape);
  const Tensor bv = *b.Expand(shape);
  const DType out_dtype = IsComparison(op) ? DType::kBool : a.dtype();
  Tensor out = *Tensor::Empty(shape, out_dtype);
  const StridedShape<3> strided =
      StridedShapeOf<3>(shape, {out.strides(), av.strides(), bv.strides()});
  ForStorage(a.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(av.raw_data());
    const T* y = static_cast<const T*>(bv.raw_data());
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t offsets[3];
      OperandOffsetsAt(strided, i, offsets);
      if (out_dtype == DType::kBool) {
        BinaryElement(op, x + offsets[1], y + offsets[2],
                      out.data<bool>() + offsets[0]);
      } else {
        BinaryElement(op, x + offsets[1], y + offsets[2],
                      static_cast<T*>(out.raw_data()) + offsets[0]);
      }
    }
  });
  return out;
}

TEST(ElementwiseBodyTest, BinaryOpsMatchTheCpuKernelsBitForBit) {
  std::mt19937 rng(2);
  struct Case {
    BinaryOp op;
    absl::StatusOr<Tensor> (*cpu)(const Tensor&, const Tensor&);
    bool floating_only;
  };
  const std::vector<Case> cases = {
      {BinaryOp::kAdd, ::dtensor::Add, false},
      {BinaryOp::kSub, ::dtensor::Sub, false},
      {BinaryOp::kMul, ::dtensor::Mul, false},
      {BinaryOp::kDiv, ::dtensor::Div, true},
      {BinaryOp::kPow, ::dtensor::Pow, true},
      {BinaryOp::kSiluBackward, ::dtensor::SiluBackward, true},
      {BinaryOp::kMaximum, ::dtensor::Maximum, false},
      {BinaryOp::kMinimum, ::dtensor::Minimum, false},
      {BinaryOp::kEq, ::dtensor::Eq, false},
      {BinaryOp::kLt, ::dtensor::Lt, false},
      {BinaryOp::kGe, ::dtensor::Ge, false}};
  const std::vector<std::pair<Shape, Shape>> shapes = {{{7, 5}, {7, 5}},
                                                       {{4, 6}, {6}},
                                                       {{3, 1, 5}, {1, 4, 5}},
                                                       {{8, 3}, {8, 1}},
                                                       {{}, {5}}};
  for (const Case& c : cases) {
    for (DType dtype : testing::kNumericDTypes) {
      if (c.floating_only && !IsFloatingPoint(dtype)) continue;
      for (const auto& [sa, sb] : shapes) {
        const Tensor a = RandomTensor(sa, dtype, Layout::kStrided, rng, 0.5, 2);
        const Tensor b =
            RandomTensor(sb, dtype, Layout::kContiguous, rng, 0.5, 2);
        const Tensor expected = *c.cpu(a, b);
        const Tensor got = HostBinary(c.op, a, b);
        ASSERT_EQ(got.shape(), expected.shape());
        EXPECT_EQ(Bytes(got), Bytes(expected))
            << static_cast<int>(c.op) << " " << DTypeName(dtype) << " "
            << ShapeToString(sa) << " " << ShapeToString(sb);
      }
    }
  }
}

// Runs BinaryScalarElement over contiguous `x` with `scalar` (a one-element
// tensor of x's dtype) as the CUDA scalar launch does: the scalar by value.
Tensor HostBinaryScalar(BinaryOp op, const Tensor& x, const Tensor& scalar,
                        bool scalar_first) {
  const DType out_dtype = IsComparison(op) ? DType::kBool : x.dtype();
  Tensor out = *Tensor::Empty(x.shape(), out_dtype);
  ForStorage(x.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    T s;
    std::memcpy(&s, scalar.raw_data(), sizeof(T));
    const T* data = static_cast<const T*>(x.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (out_dtype == DType::kBool) {
        BinaryScalarElement(op, data + i, s, scalar_first,
                            out.data<bool>() + i);
      } else {
        BinaryScalarElement(op, data + i, s, scalar_first,
                            static_cast<T*>(out.raw_data()) + i);
      }
    }
  });
  return out;
}

// A binary op with a scalar operand by value (the CUDA path of a host scalar
// operand) gives the CPU kernel's result on the same two tensors, bit for
// bit, with the scalar on either side, on every dtype the op takes (no zero
// divisor: integer division by zero is an error).
TEST(ElementwiseBodyTest, ScalarOperandsMatchTheTwoTensorKernels) {
  std::mt19937 rng(6);
  struct Case {
    BinaryOp op;
    absl::StatusOr<Tensor> (*cpu)(const Tensor&, const Tensor&);
  };
  const std::vector<Case> cases = {
      {BinaryOp::kAdd, ::dtensor::Add},
      {BinaryOp::kSub, ::dtensor::Sub},
      {BinaryOp::kMul, ::dtensor::Mul},
      {BinaryOp::kDiv, ::dtensor::Div},
      {BinaryOp::kPow, ::dtensor::Pow},
      {BinaryOp::kSiluBackward, ::dtensor::SiluBackward},
      {BinaryOp::kMaximum, ::dtensor::Maximum},
      {BinaryOp::kMinimum, ::dtensor::Minimum},
      {BinaryOp::kEq, ::dtensor::Eq},
      {BinaryOp::kNe, ::dtensor::Ne},
      {BinaryOp::kLt, ::dtensor::Lt},
      {BinaryOp::kLe, ::dtensor::Le},
      {BinaryOp::kGt, ::dtensor::Gt},
      {BinaryOp::kGe, ::dtensor::Ge}};
  for (const Case& c : cases) {
    for (DType dtype : testing::kAllDTypes) {
      if (!BinaryTakes(c.op, IsFloatingPoint(dtype), dtype == DType::kBool)) {
        continue;
      }
      const Tensor x =
          RandomTensor({37}, dtype, Layout::kContiguous, rng, 1, 3);
      // A drawn value, and one that equals an element (the comparisons).
      for (const Tensor& scalar :
           {RandomTensor({}, dtype, Layout::kContiguous, rng, 1, 3),
            *x.Select(0, 3)->Contiguous().Reshape({})}) {
        for (bool scalar_first : {false, true}) {
          const Tensor expected =
              scalar_first ? *c.cpu(scalar, x) : *c.cpu(x, scalar);
          const Tensor got = HostBinaryScalar(c.op, x, scalar, scalar_first);
          EXPECT_EQ(Bytes(got), Bytes(expected))
              << static_cast<int>(c.op) << " " << DTypeName(dtype)
              << (scalar_first ? " scalar first" : " scalar second");
        }
      }
    }
  }
}

// Where with a or b a scalar by value gives Where's result on tensors.
TEST(ElementwiseBodyTest, WhereWithAScalarMatchesWhere) {
  std::mt19937 rng(7);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor cond =
        RandomTensor({29}, DType::kBool, Layout::kContiguous, rng, 0, 1);
    const Tensor x = RandomTensor({29}, dtype, Layout::kContiguous, rng, -3, 3);
    const Tensor scalar =
        RandomTensor({}, dtype, Layout::kContiguous, rng, -3, 3);
    for (bool scalar_is_a : {false, true}) {
      const Tensor expected =
          scalar_is_a ? *Where(cond, scalar, x) : *Where(cond, x, scalar);
      Tensor got = *Tensor::Empty(x.shape(), dtype);
      ForStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        T s;
        std::memcpy(&s, scalar.raw_data(), sizeof(T));
        for (int64_t i = 0; i < x.numel(); ++i) {
          WhereScalarElement(cond.data<bool>() + i,
                             static_cast<const T*>(x.raw_data()) + i, s,
                             scalar_is_a, static_cast<T*>(got.raw_data()) + i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(dtype) << (scalar_is_a ? " scalar a" : " scalar b");
    }
  }
}

TEST(ElementwiseBodyTest, UnaryOpsMatchTheCpuKernelsBitForBit) {
  std::mt19937 rng(3);
  struct Case {
    UnaryOp op;
    absl::StatusOr<Tensor> (*cpu)(const Tensor&);
  };
  const std::vector<Case> cases = {{UnaryOp::kNeg, ::dtensor::Neg},
                                   {UnaryOp::kAbs, ::dtensor::Abs},
                                   {UnaryOp::kExp, ::dtensor::Exp},
                                   {UnaryOp::kLog, ::dtensor::Log},
                                   {UnaryOp::kSqrt, ::dtensor::Sqrt},
                                   {UnaryOp::kRsqrt, ::dtensor::Rsqrt},
                                   {UnaryOp::kRelu, ::dtensor::Relu},
                                   {UnaryOp::kSilu, ::dtensor::Silu},
                                   {UnaryOp::kSigmoid, ::dtensor::Sigmoid},
                                   {UnaryOp::kTanh, ::dtensor::Tanh}};
  for (const Case& c : cases) {
    for (DType dtype : testing::kFloatDTypes) {
      const Tensor x =
          RandomTensor({33, 7}, dtype, Layout::kContiguous, rng, 0.1, 3);
      const Tensor expected = *c.cpu(x);
      Tensor got = *Tensor::Empty(x.shape(), dtype);
      ForFloatingStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.numel(); ++i) {
          UnaryElement(c.op, static_cast<const T*>(x.raw_data()) + i,
                       static_cast<T*>(got.raw_data()) + i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << static_cast<int>(c.op) << " " << DTypeName(dtype);
    }
  }
  const Tensor x = RandomTensor({50}, DType::kF32, Layout::kContiguous, rng);
  for (auto [op, approx] :
       {std::pair{UnaryOp::kGeluErf, GeluApproximation::kNone},
        std::pair{UnaryOp::kGeluTanh, GeluApproximation::kTanh}}) {
    const Tensor expected = *Gelu(x, approx);
    Tensor got = *Tensor::Empty(x.shape(), DType::kF32);
    for (int64_t i = 0; i < 50; ++i) {
      UnaryElement(op, x.data<float>() + i, got.data<float>() + i);
    }
    EXPECT_EQ(Bytes(got), Bytes(expected));
  }
}

TEST(ElementwiseBodyTest, CastsMatchTensorToBitForBit) {
  std::mt19937 rng(4);
  for (DType from : testing::kAllDTypes) {
    const Tensor x =
        RandomTensor({257}, from, Layout::kContiguous, rng, -300, 300);
    for (DType to : testing::kAllDTypes) {
      const Tensor expected = *x.To(to);
      Tensor got = *Tensor::Empty(x.shape(), to);
      ForStorage(from, [&](auto from_tag, auto) {
        using From = decltype(from_tag);
        ForStorage(to, [&](auto to_tag, auto) {
          using To = decltype(to_tag);
          for (int64_t i = 0; i < x.numel(); ++i) {
            CastElement(static_cast<const From*>(x.raw_data()) + i,
                        static_cast<To*>(got.raw_data()) + i);
          }
        });
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
}

}  // namespace
}  // namespace dtensor::cuda
