// The fused SwiGLU (dtensor/tensor/swiglu.h) on the CPU: against an
// independent reference in double (std::exp per element) and against the
// unfused composition of the elementwise ops, over dtypes, layouts and tail
// sizes; its errors; and the host forms of its device bodies
// (dtensor/tensor/cuda/elementwise_body.h) against the CPU kernel.
#include "dtensor/tensor/swiglu.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/elementwise.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor {
namespace {

using testing::ExpectClose;
using testing::Layout;
using testing::RandomTensor;
using testing::ToleranceFor;

// The elements of `t` as doubles, row-major.
std::vector<double> Values(const Tensor& t) {
  const Tensor wide = t.To(DType::kF64)->Contiguous();
  return std::vector<double>(wide.data<double>(),
                             wide.data<double>() + wide.numel());
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Reference {
  std::vector<double> out, da, db;
};

// silu(a) b and its gradients for grad g, element by element in double.
Reference ReferenceOf(const Tensor& g, const Tensor& a, const Tensor& b) {
  const std::vector<double> gv = Values(g), av = Values(a), bv = Values(b);
  Reference r;
  for (size_t i = 0; i < av.size(); ++i) {
    const double s = Sigmoid(av[i]);
    r.out.push_back(av[i] * s * bv[i]);
    r.da.push_back(gv[i] * bv[i] * (s + av[i] * s * (1 - s)));
    r.db.push_back(gv[i] * av[i] * s);
  }
  return r;
}

const std::vector<Shape>& Shapes() {
  static const auto* shapes =
      new std::vector<Shape>{{}, {1}, {3}, {4}, {4097}, {7, 5}, {2, 3, 33}};
  return *shapes;
}

TEST(SwiGluTest, MatchesADoubleReferenceOnEveryDTypeAndLayout) {
  std::mt19937 rng(1);
  for (DType dtype : testing::kFloatDTypes) {
    for (const Shape& shape : Shapes()) {
      for (Layout layout :
           {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
        const Tensor g = RandomTensor(shape, dtype, layout, rng, -2, 2);
        const Tensor a = RandomTensor(shape, dtype, layout, rng, -6, 6);
        const Tensor b =
            RandomTensor(shape, dtype, Layout::kContiguous, rng, -2, 2);
        const Reference r = ReferenceOf(g, a, b);
        const std::string what = std::string(DTypeName(dtype)) + " " +
                                 ShapeToString(shape) + " " +
                                 testing::LayoutName(layout);
        absl::StatusOr<Tensor> out = SwiGlu(a, b);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ(out->dtype(), dtype);
        ExpectClose(*out, shape, r.out, ToleranceFor(dtype), what);
        absl::StatusOr<SwiGluGrads> grads = SwiGluBackward(g, a, b);
        ASSERT_TRUE(grads.ok()) << grads.status();
        ExpectClose(grads->a, shape, r.da, ToleranceFor(dtype), what + " da");
        ExpectClose(grads->b, shape, r.db, ToleranceFor(dtype), what + " db");
      }
    }
  }
}

TEST(SwiGluTest, MatchesTheUnfusedOpsInDouble) {
  std::mt19937 rng(2);
  const Tensor g = RandomTensor({9, 13}, DType::kF64, Layout::kContiguous, rng);
  const Tensor a =
      RandomTensor({9, 13}, DType::kF64, Layout::kTransposed, rng, -8, 8);
  const Tensor b = RandomTensor({9, 13}, DType::kF64, Layout::kStrided, rng);
  const Tensor gate = *Silu(a);
  const Tensor unfused = *Mul(gate, b);
  const Tensor unfused_da = *SiluBackward(*Mul(g, b), a);
  const Tensor unfused_db = *Mul(g, gate);
  const testing::Tolerance tight{1e-14, 1e-12};
  ExpectClose(*SwiGlu(a, b), a.shape(), Values(unfused), tight, "out");
  const SwiGluGrads grads = *SwiGluBackward(g, a, b);
  ExpectClose(grads.a, a.shape(), Values(unfused_da), tight, "da");
  ExpectClose(grads.b, a.shape(), Values(unfused_db), tight, "db");
}

TEST(SwiGluTest, BadOperandsAreErrorsNamingThem) {
  const Tensor a = *Tensor::Ones({2, 3}, DType::kF32);
  const Tensor wrong_shape = *Tensor::Ones({3, 2}, DType::kF32);
  const Tensor wrong_dtype = *Tensor::Ones({2, 3}, DType::kF64);
  const Tensor integers = *Tensor::Ones({2, 3}, DType::kI64);
  absl::StatusOr<Tensor> out = SwiGlu(a, wrong_shape);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("[3, 2]"), std::string::npos)
      << out.status();
  out = SwiGlu(a, wrong_dtype);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("f64"), std::string::npos)
      << out.status();
  out = SwiGlu(integers, integers);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("SwiGlu"), std::string::npos)
      << out.status();
  absl::StatusOr<SwiGluGrads> grads = SwiGluBackward(wrong_shape, a, a);
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.status().message().find("SwiGluBackward"), std::string::npos)
      << grads.status();
  EXPECT_FALSE(SwiGlu(a, Tensor()).ok());
}

// The device bodies' host forms give the CPU kernel's bits: f32 and f64
// share the math; bf16 and f16 load to float and round once, as the CPU
// kernel does.
TEST(SwiGluTest, DeviceBodiesMatchTheCpuKernelBitForBit) {
  std::mt19937 rng(3);
  const auto run = [&](auto tag, DType dtype) {
    using T = decltype(tag);
    const Tensor g =
        RandomTensor({257}, dtype, Layout::kContiguous, rng, -2, 2);
    const Tensor a =
        RandomTensor({257}, dtype, Layout::kContiguous, rng, -9, 9);
    const Tensor b =
        RandomTensor({257}, dtype, Layout::kContiguous, rng, -2, 2);
    const Tensor out = *SwiGlu(a, b);
    const SwiGluGrads grads = *SwiGluBackward(g, a, b);
    const T* gv = static_cast<const T*>(g.raw_data());
    const T* av = static_cast<const T*>(a.raw_data());
    const T* bv = static_cast<const T*>(b.raw_data());
    for (int64_t i = 0; i < 257; ++i) {
      T got, da, db;
      cuda::SwiGluElement(av + i, bv + i, &got);
      cuda::SwiGluBackwardElement(gv + i, av + i, bv + i, &da, &db);
      EXPECT_EQ(std::memcmp(&got, static_cast<const T*>(out.raw_data()) + i,
                            sizeof(T)),
                0)
          << DTypeName(dtype) << " " << i;
      EXPECT_EQ(std::memcmp(&da, static_cast<const T*>(grads.a.raw_data()) + i,
                            sizeof(T)),
                0)
          << DTypeName(dtype) << " da " << i;
      EXPECT_EQ(std::memcmp(&db, static_cast<const T*>(grads.b.raw_data()) + i,
                            sizeof(T)),
                0)
          << DTypeName(dtype) << " db " << i;
    }
  };
  run(float{}, DType::kF32);
  run(double{}, DType::kF64);
  run(cuda::Bf16{}, DType::kBF16);
  run(cuda::F16{}, DType::kF16);
}

}  // namespace
}  // namespace dtensor
