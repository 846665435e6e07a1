// Copies: Contiguous, Clone, CopyFrom (broadcasting, dtype conversion,
// overlap), To(dtype) for every pair of dtypes, Fill, Cat and Stack, checked
// against index loops and conversion rules written out in this file.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/reference_tensor.h"

namespace dtensor {
namespace {

using testing::Generate;
using testing::RefAt;
using testing::RefTensor;
using testing::UnravelIndex;

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kBF16,
                                DType::kF16, DType::kI32, DType::kI64,
                                DType::kBool};

int64_t Uniform(std::mt19937& rng, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

Shape RandomShape(std::mt19937& rng, int max_dims) {
  Shape shape(Uniform(rng, 0, max_dims));
  for (int64_t& size : shape) {
    size = Uniform(rng, 0, 9) == 0 ? 0 : Uniform(rng, 1, 4);
  }
  return shape;
}

// A tensor holding `ref` (converted to `dtype`), laid out contiguously or as
// a non-contiguous view: a transposed, strided window of a larger tensor
// whose other elements hold `fill`.
Tensor MakeTensor(const RefTensor& ref, DType dtype, bool contiguous,
                  std::mt19937& rng, double fill = 99) {
  const Shape& shape = ref.shape;
  auto from_values = Tensor::FromVector(ref.values, shape);
  if (contiguous) return *from_values->To(dtype);
  // Allocate the reversed shape with every dim doubled, pick every other
  // element with a random phase, and permute the dims back.
  Shape big(shape.rbegin(), shape.rend());
  for (int64_t& size : big) size *= 2;
  Tensor window = *Tensor::Full(big, fill, dtype);
  for (size_t d = 0; d < big.size(); ++d) {
    window = *window.Slice(d, Uniform(rng, 0, 1), big[d], 2);
  }
  std::vector<int64_t> reverse;
  for (int64_t d = shape.size() - 1; d >= 0; --d) reverse.push_back(d);
  Tensor view = *window.Permute(reverse);
  EXPECT_TRUE(view.CopyFrom(*from_values).ok());
  return view;
}

// Exact element comparison of a tensor against expected doubles, NaN equal
// to NaN.
void ExpectValues(const Tensor& tensor, const Shape& shape,
                  const std::vector<double>& expected,
                  const std::string& context) {
  ASSERT_EQ(tensor.shape(), shape) << context;
  const std::vector<double> actual = tensor.ToVector<double>().value();
  ASSERT_EQ(actual.size(), expected.size()) << context;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << context << " element " << i;
    } else {
      EXPECT_EQ(actual[i], expected[i]) << context << " element " << i;
    }
  }
}

// ---- Contiguous and Clone. ----

TEST(TensorCopyTest, ContiguousKeepsContiguousTensorsAndCopiesOthers) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = RandomShape(rng, 4);
    const RefTensor ref = Generate(shape, [&](const std::vector<int64_t>&) {
      return static_cast<double>(Uniform(rng, -50, 50));
    });
    const DType dtype = kAllDTypes[trial % 6];  // Not bool: values vary.
    const bool contiguous = trial % 2 == 0;
    const Tensor tensor = MakeTensor(ref, dtype, contiguous, rng);
    const Tensor result = tensor.Contiguous();
    ASSERT_TRUE(result.defined());
    EXPECT_TRUE(result.is_contiguous());
    EXPECT_EQ(result.dtype(), dtype);
    ExpectValues(result, shape, ref.values, ShapeToString(shape));
    if (tensor.is_contiguous()) {
      EXPECT_EQ(result.storage(), tensor.storage());
    } else {
      EXPECT_NE(result.storage(), tensor.storage());
      EXPECT_EQ(result.strides(), ContiguousStrides(shape));
    }
  }
}

TEST(TensorCopyTest, CloneOwnsItsStorage) {
  auto x = Tensor::Arange(0, 6, 1, DType::kI32)->View({2, 3});
  const Tensor clone = x->Clone();
  EXPECT_NE(clone.storage(), x->storage());
  ASSERT_TRUE(x->Fill(0).ok());
  EXPECT_EQ(clone.ToVector<int32_t>().value(),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  const Tensor transposed_clone = x->Transpose(0, 1)->Clone();
  EXPECT_TRUE(transposed_clone.is_contiguous());
  EXPECT_EQ(transposed_clone.shape(), (Shape{3, 2}));
  EXPECT_FALSE(Tensor().Clone().defined());
}

// ---- CopyFrom. ----

// The conversion rules: what a source element `value` becomes in `dtype`.
// Only used on values exact in every float dtype.
double ConvertedTo(DType dtype, double value) {
  switch (dtype) {
    case DType::kI32:
    case DType::kI64:
      return std::trunc(value);
    case DType::kBool:
      return value != 0 ? 1 : 0;
    default:
      return value;
  }
}

TEST(TensorCopyTest, CopyFromBroadcastsAndConverts) {
  std::mt19937 rng(2);
  const double float_values[] = {-3, -1.5, -0.5, 0, 0.5, 1, 2.5, 7};
  for (int trial = 0; trial < 400; ++trial) {
    const Shape dst_shape = RandomShape(rng, 4);
    // The source drops some leading dims and has size 1 in some others.
    Shape src_shape(dst_shape.begin() + Uniform(rng, 0, dst_shape.size()),
                    dst_shape.end());
    for (int64_t& size : src_shape) {
      if (Uniform(rng, 0, 2) == 0) size = 1;
    }
    const DType src_dtype = kAllDTypes[Uniform(rng, 0, 6)];
    const DType dst_dtype = kAllDTypes[Uniform(rng, 0, 6)];
    const RefTensor src_ref =
        Generate(src_shape, [&](const std::vector<int64_t>&) {
          return ConvertedTo(src_dtype, float_values[Uniform(rng, 0, 7)]);
        });
    const Tensor src = MakeTensor(src_ref, src_dtype, Uniform(rng, 0, 1), rng);
    const RefTensor dst_before =
        Generate(dst_shape, [](const std::vector<int64_t>&) { return 5.0; });
    Tensor dst = MakeTensor(dst_before, dst_dtype, Uniform(rng, 0, 1), rng, 42);
    const std::string context = absl::StrCat(
        ShapeToString(src_shape), " ", std::string(DTypeName(src_dtype)),
        " -> ", ShapeToString(dst_shape), " ",
        std::string(DTypeName(dst_dtype)),
        dst.is_contiguous() ? "" : " (strided)");
    ASSERT_TRUE(dst.CopyFrom(src).ok()) << context;
    const size_t leading = dst_shape.size() - src_shape.size();
    const RefTensor expected =
        Generate(dst_shape, [&](const std::vector<int64_t>& index) {
          std::vector<int64_t> src_index(index.begin() + leading, index.end());
          for (size_t d = 0; d < src_index.size(); ++d) {
            if (src_shape[d] == 1) src_index[d] = 0;
          }
          return ConvertedTo(dst_dtype, RefAt(src_ref, src_index));
        });
    ExpectValues(dst, dst_shape, expected.values, context);
    // Elements of the underlying storage outside the view are untouched.
    const int64_t capacity = dst.storage()->nbytes() / ElementSize(dst_dtype);
    auto whole =
        Tensor::FromStorage(dst.storage(), dst_dtype, {capacity}, {1}, 0);
    ASSERT_TRUE(whole.ok());
    std::vector<bool> in_view(capacity, false);
    for (int64_t flat = 0; flat < dst.numel(); ++flat) {
      const std::vector<int64_t> index = UnravelIndex(flat, dst_shape);
      int64_t position = dst.storage_offset();
      for (size_t d = 0; d < index.size(); ++d)
        position += index[d] * dst.strides()[d];
      in_view[position] = true;
    }
    const std::vector<double> stored = whole->ToVector<double>().value();
    for (int64_t i = 0; i < capacity; ++i) {
      if (!in_view[i]) {
        ASSERT_EQ(stored[i], ConvertedTo(dst_dtype, 42))
            << context << " position " << i;
      }
    }
  }
}

TEST(TensorCopyTest, CopyFromReadsOverlappingSourcesAsTheyWereBefore) {
  // A square matrix assigned its own transpose.
  auto x = Tensor::Arange(0, 9, 1, DType::kF32)->View({3, 3});
  ASSERT_TRUE(x->CopyFrom(*x->Transpose(0, 1)).ok());
  EXPECT_EQ(x->ToVector<float>().value(),
            (std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  // y[1:] = y[:-1] shifts right by one.
  auto y = Tensor::Arange(0, 6, 1, DType::kI64);
  ASSERT_TRUE(y->Narrow(0, 1, 5)->CopyFrom(*y->Narrow(0, 0, 5)).ok());
  EXPECT_EQ(y->ToVector<int64_t>().value(),
            (std::vector<int64_t>{0, 0, 1, 2, 3, 4}));
}

// ---- To(dtype): every pair. ----

// Source values per dtype, exact in it (long double holds every int64).
std::vector<long double> SourceValues(DType dtype) {
  const long double inf = std::numeric_limits<long double>::infinity();
  const long double nan = std::numeric_limits<long double>::quiet_NaN();
  switch (dtype) {
    case DType::kF32:
      return {0,     -0.0L,  1.5,  -2.75,    1e10, 3e9, -3e9,
              65504, 100000, 0.1f, 16777216, nan,  inf, -inf};
    case DType::kF64:
      return {0,
              1.5,
              -2.75,
              1e10,
              3e9,
              1e19,
              -1e19,
              1e300,
              0.1,
              65520,
              nan,
              -inf,
              9007199254740993.0L - 1};
    case DType::kBF16:
      return {0,   1.5, -2.75,           256, -3.3895313892515355e38L,
              nan, inf, 1099511627776.0L};
    case DType::kF16:
      return {0, 1.5, -2.75, 65504, 0.0999755859375L, nan, -inf, -0.5};
    case DType::kI32:
      return {0, 1, -7, 2147483647, -2147483648.0L, 16777217, 300, 2049};
    case DType::kI64:
      return {0,
              -1,
              1099511627777.0L,
              9223372036854775807.0L,
              -9223372036854775807.0L - 1,
              5000000000.0L,
              -5000000001.0L,
              9007199254740993.0L};
    case DType::kBool:
      return {0, 1};
  }
  return {};
}

// The rules of ConvertValue: integers wrap when narrowed from integers and
// truncate-and-saturate (NaN to 0) from floats; bool is != 0; bf16/f16 round
// from float; f32/f64 round to nearest.
long double Expected(DType from, DType to, long double v) {
  auto wrap32 = [](long double x) {
    const uint32_t low = static_cast<uint32_t>(static_cast<int64_t>(x));
    return static_cast<long double>(static_cast<int32_t>(low));
  };
  auto saturate = [](long double x, long double lo, long double hi) {
    if (std::isnan(x)) return 0.0L;
    x = std::trunc(x);
    return x < lo ? lo : x > hi ? hi : x;
  };
  const bool from_integer = !IsFloatingPoint(from);
  switch (to) {
    case DType::kBool:
      return v != 0 ? 1 : 0;
    case DType::kI32:
      return from_integer ? wrap32(v)
                          : saturate(v, -2147483648.0L, 2147483647.0L);
    case DType::kI64:
      return from_integer ? v
                          : saturate(v, -9223372036854775807.0L - 1,
                                     9223372036854775807.0L);
    case DType::kF64:
      return static_cast<double>(v);
    case DType::kF32:
      return static_cast<float>(v);
    case DType::kBF16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::kF16:
      return static_cast<float>(Half(static_cast<float>(v)));
  }
  return 0;
}

TEST(TensorCopyTest, ToConvertsEveryDTypePair) {
  for (DType from : kAllDTypes) {
    const std::vector<long double> values = SourceValues(from);
    const int64_t n = values.size();
    // Build the source exactly: integers through i64, floats through f64.
    Tensor source;
    if (from == DType::kI64 || from == DType::kI32 || from == DType::kBool) {
      std::vector<int64_t> ints(values.begin(), values.end());
      source = *Tensor::FromVector(ints, {n})->To(from);
    } else {
      std::vector<double> doubles(values.begin(), values.end());
      source = *Tensor::FromVector(doubles, {n})->To(from);
    }
    for (DType to : kAllDTypes) {
      auto converted = source.To(to);
      ASSERT_TRUE(converted.ok()) << converted.status();
      EXPECT_EQ(converted->dtype(), to);
      if (to == from) {
        EXPECT_EQ(converted->storage(), source.storage());
      }
      const std::string context = absl::StrCat(
          std::string(DTypeName(from)), " -> ", std::string(DTypeName(to)));
      if (IsFloatingPoint(to)) {
        const std::vector<double> actual =
            converted->ToVector<double>().value();
        for (int64_t i = 0; i < n; ++i) {
          const double expected = Expected(from, to, values[i]);
          if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(actual[i])) << context << " #" << i;
          } else {
            EXPECT_EQ(actual[i], expected) << context << " #" << i;
          }
        }
      } else {
        const std::vector<int64_t> actual =
            converted->ToVector<int64_t>().value();
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(static_cast<long double>(actual[i]),
                    Expected(from, to, values[i]))
              << context << " #" << i;
        }
      }
    }
  }
}

TEST(TensorCopyTest, ToDTypeOfStridedViews) {
  auto x =
      Tensor::Arange(0, 12, 1, DType::kF64)->View({3, 4})->Slice(1, 1, 4, 2);
  auto converted = x->To(DType::kI32);
  ASSERT_TRUE(converted.ok());
  EXPECT_TRUE(converted->is_contiguous());
  EXPECT_EQ(converted->ToVector<int32_t>().value(),
            (std::vector<int32_t>{1, 3, 5, 7, 9, 11}));
}

// ---- Fill. ----

TEST(TensorCopyTest, FillWritesOnlyTheView) {
  for (DType dtype : kAllDTypes) {
    auto x = Tensor::Zeros({4, 5}, dtype);
    ASSERT_TRUE(x->Slice(1, 1, 5, 2)->Fill(1).ok());
    std::vector<double> expected;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 5; ++j) expected.push_back(j % 2 == 1 ? 1 : 0);
    }
    ExpectValues(*x, {4, 5}, expected, std::string(DTypeName(dtype)));
  }
  auto y = Tensor::Empty({3}, DType::kI32);
  ASSERT_TRUE(y->Fill(-2.7).ok());
  EXPECT_EQ(y->ToVector<int32_t>().value(), (std::vector<int32_t>{-2, -2, -2}));
  ASSERT_TRUE(y->Zero().ok());
  EXPECT_EQ(y->ToVector<int32_t>().value(), (std::vector<int32_t>{0, 0, 0}));
}

// ---- Cat and Stack. ----

TEST(TensorCopyTest, CatMatchesConcatenation) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    Shape shape = RandomShape(rng, 4);
    if (shape.empty()) shape.push_back(2);
    const int64_t ndim = shape.size();
    const int64_t dim = Uniform(rng, -ndim, ndim - 1);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int pieces = Uniform(rng, 1, 4);
    const DType dtype = kAllDTypes[Uniform(rng, 0, 5)];
    std::vector<RefTensor> refs;
    std::vector<Tensor> tensors;
    for (int p = 0; p < pieces; ++p) {
      Shape piece_shape = shape;
      piece_shape[d] = Uniform(rng, 0, 3);  // Empty pieces included.
      refs.push_back(Generate(piece_shape, [&](const std::vector<int64_t>&) {
        return static_cast<double>(Uniform(rng, -100, 100));
      }));
      tensors.push_back(
          MakeTensor(refs.back(), dtype, Uniform(rng, 0, 1), rng));
    }
    Shape out_shape = shape;
    out_shape[d] = 0;
    for (const RefTensor& ref : refs) out_shape[d] += ref.shape[d];
    const RefTensor expected =
        Generate(out_shape, [&](std::vector<int64_t> index) {
          size_t p = 0;
          while (index[d] >= refs[p].shape[d]) index[d] -= refs[p++].shape[d];
          return RefAt(refs[p], index);
        });
    auto result = Cat(tensors, dim);
    const std::string context = absl::StrCat("trial ", trial, " dim ", dim);
    ASSERT_TRUE(result.ok()) << context << ": " << result.status();
    EXPECT_EQ(result->dtype(), dtype);
    EXPECT_TRUE(result->is_contiguous());
    ExpectValues(*result, out_shape, expected.values, context);
  }
}

TEST(TensorCopyTest, StackMatchesANewDim) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = RandomShape(rng, 3);
    const int64_t ndim = shape.size() + 1;
    const int64_t dim = Uniform(rng, -ndim, ndim - 1);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int pieces = Uniform(rng, 1, 4);
    std::vector<RefTensor> refs;
    std::vector<Tensor> tensors;
    for (int p = 0; p < pieces; ++p) {
      refs.push_back(Generate(shape, [&](const std::vector<int64_t>&) {
        return static_cast<double>(Uniform(rng, -100, 100));
      }));
      tensors.push_back(
          MakeTensor(refs.back(), DType::kF32, Uniform(rng, 0, 1), rng));
    }
    Shape out_shape = shape;
    out_shape.insert(out_shape.begin() + d, pieces);
    const RefTensor expected =
        Generate(out_shape, [&](std::vector<int64_t> index) {
          const int64_t p = index[d];
          index.erase(index.begin() + d);
          return RefAt(refs[p], index);
        });
    auto result = Stack(tensors, dim);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectValues(*result, out_shape, expected.values,
                 absl::StrCat("trial ", trial));
  }
}

// ---- AllClose. ----

Tensor Vector(std::vector<double> values) {
  const int64_t n = values.size();
  return *Tensor::FromVector(values, {n});
}

TEST(AllCloseTest, ToleranceIsRelativeToTheSecondArgument) {
  EXPECT_TRUE(AllClose(Vector({1, 2}), Vector({1, 2})));
  EXPECT_TRUE(AllClose(Vector({1.0 + 1e-6}), Vector({1.0}), 1e-5, 0));
  EXPECT_FALSE(AllClose(Vector({1.0 + 1e-4}), Vector({1.0}), 1e-5, 0));
  EXPECT_TRUE(AllClose(Vector({1e-9}), Vector({0}), 0, 1e-8));
  EXPECT_FALSE(AllClose(Vector({1e-7}), Vector({0}), 0, 1e-8));
  // |a - b| = 1 <= 0.5 * |b| only when b is the larger one.
  EXPECT_TRUE(AllClose(Vector({1}), Vector({2}), 0.5, 0));
  EXPECT_FALSE(AllClose(Vector({2}), Vector({1}), 0.5, 0));
}

TEST(AllCloseTest, NaNsInfinitiesShapesAndLayouts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(AllClose(Vector({nan, 1}), Vector({nan, 1})));
  EXPECT_FALSE(AllClose(Vector({nan}), Vector({1})));
  EXPECT_FALSE(AllClose(Vector({1}), Vector({nan})));
  EXPECT_TRUE(AllClose(Vector({inf, -inf}), Vector({inf, -inf})));
  EXPECT_FALSE(AllClose(Vector({inf}), Vector({-inf})));
  EXPECT_FALSE(AllClose(Vector({1e300}), Vector({inf}), 1, 1));
  EXPECT_FALSE(AllClose(Vector({1, 2}), Vector({1, 2, 3})));
  EXPECT_FALSE(AllClose(Vector({1, 2}), *Vector({1, 2}).View({1, 2})));
  EXPECT_FALSE(AllClose(Tensor(), Vector({1})));
  // Values are compared, whatever the dtypes and layouts.
  auto t = Tensor::Arange(0, 6, 1, DType::kI32)->View({2, 3})->Transpose(0, 1);
  auto expected = Tensor::FromVector<float>({0, 3, 1, 4, 2, 5}, {3, 2});
  EXPECT_TRUE(AllClose(*t, *expected));
  EXPECT_FALSE(
      AllClose(*t, *expected->Transpose(0, 1)->Contiguous().View({3, 2})));
}

// ---- Devices. ----

TEST(TensorCopyTest, ToSameDeviceIsTheTensorItself) {
  auto x = Tensor::Ones({2}, DType::kF32);
  auto same = x->To(Device::CPU());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->storage(), x->storage());
}

TEST(TensorCopyTest, CudaRoundTripWhenAvailable) {
  if (cuda::DeviceCount() == 0) {
    auto moved = Tensor::Ones({2}, DType::kF32)->To(Device::CUDA(0));
    EXPECT_EQ(moved.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(moved.status().message().find("cuda:0"), std::string::npos)
        << moved.status();
    GTEST_SKIP() << "no CUDA device: " << cuda::Describe();
  }
  std::mt19937 rng(5);
  const RefTensor ref =
      Generate({3, 4}, [&](const std::vector<int64_t>& index) {
        return static_cast<double>(index[0] * 10 + index[1]);
      });
  const Tensor host = MakeTensor(ref, DType::kF32, false, rng);
  auto device = host.To(Device::CUDA(0));
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(device->device().is_cuda());
  ExpectValues(*device, {3, 4}, ref.values, "round trip");
  // Views of device tensors come back through the host.
  auto column = device->Select(1, 2);
  ASSERT_TRUE(column.ok());
  EXPECT_EQ(column->ToVector<double>().value(),
            (std::vector<double>{2, 12, 22}));
  EXPECT_EQ(device->At({2, 3}), 23);
  auto zeros = Tensor::Zeros({5}, DType::kI64, Device::CUDA(0));
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_EQ(zeros->ToVector<int64_t>().value(), std::vector<int64_t>(5, 0));
  auto converted = device->To(DType::kF64);
  ASSERT_TRUE(converted.ok()) << converted.status();
  EXPECT_TRUE(converted->device().is_cuda());
  ExpectValues(*converted, {3, 4}, ref.values, "f64 on device");
}

}  // namespace
}  // namespace dtensor
