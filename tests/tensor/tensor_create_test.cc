// Creation, metadata, storage and the free shape helpers.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kBF16,
                                DType::kF16, DType::kI32, DType::kI64,
                                DType::kBool};

TEST(ShapeHelpersTest, NumElementsStridesAndText) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({2, 0, 4}), 0);
  EXPECT_EQ(ContiguousStrides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(ContiguousStrides({2, 0, 3}), (Strides{3, 3, 1}));
  EXPECT_EQ(ContiguousStrides({}), Strides{});
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({2, 3}), "[2, 3]");
}

TEST(ShapeHelpersTest, NormalizeDim) {
  EXPECT_EQ(*NormalizeDim(0, 3), 0);
  EXPECT_EQ(*NormalizeDim(2, 3), 2);
  EXPECT_EQ(*NormalizeDim(-1, 3), 2);
  EXPECT_EQ(*NormalizeDim(-3, 3), 0);
  EXPECT_FALSE(NormalizeDim(3, 3).ok());
  EXPECT_FALSE(NormalizeDim(-4, 3).ok());
  EXPECT_FALSE(NormalizeDim(0, 0).ok());
}

TEST(DeviceTest, NamesAndEquality) {
  EXPECT_EQ(Device::CPU().ToString(), "cpu");
  EXPECT_EQ(Device::CUDA(3).ToString(), "cuda:3");
  std::ostringstream os;
  os << Device::CUDA(1);
  EXPECT_EQ(os.str(), "cuda:1");
  EXPECT_EQ(Device::CUDA(1), Device::CUDA(1));
  EXPECT_NE(Device::CUDA(1), Device::CUDA(0));
  EXPECT_NE(Device::CPU(), Device::CUDA(0));
}

TEST(TensorCreateTest, EmptyHasContiguousMetadataAndAlignedData) {
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape :
         {Shape{}, Shape{1}, Shape{3, 5}, Shape{2, 0, 7}, Shape{4, 1, 3, 2}}) {
      auto x = Tensor::Empty(shape, dtype);
      ASSERT_TRUE(x.ok()) << x.status();
      int64_t numel = 1;
      for (int64_t size : shape) numel *= size;
      EXPECT_TRUE(x->defined());
      EXPECT_EQ(x->dtype(), dtype);
      EXPECT_EQ(x->device(), Device::CPU());
      EXPECT_EQ(x->shape(), shape);
      EXPECT_EQ(x->dim(), static_cast<int64_t>(shape.size()));
      EXPECT_EQ(x->numel(), numel);
      EXPECT_EQ(x->nbytes(), numel * ElementSize(dtype));
      EXPECT_EQ(x->storage()->nbytes(), x->nbytes());
      EXPECT_EQ(x->storage_offset(), 0);
      EXPECT_TRUE(x->is_contiguous());
      EXPECT_EQ(x->strides(), ContiguousStrides(shape));
      EXPECT_NE(x->raw_data(), nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(x->raw_data()) % 64, 0u);
    }
  }
}

TEST(TensorCreateTest, ZerosOnesAndFullInEveryDType) {
  for (DType dtype : kAllDTypes) {
    EXPECT_EQ(Tensor::Zeros({2, 3}, dtype)->ToVector<double>().value(),
              std::vector<double>(6, 0.0));
    EXPECT_EQ(Tensor::Ones({4}, dtype)->ToVector<double>().value(),
              std::vector<double>(4, 1.0));
  }
  EXPECT_EQ(Tensor::Full({2}, 2.5, DType::kBF16)->ToVector<double>().value(),
            (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(Tensor::Full({2}, 3.7, DType::kI32)->ToVector<int32_t>().value(),
            (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(Tensor::Full({1}, -1, DType::kBool)->ToVector<bool>().value(),
            (std::vector<bool>{true}));
  EXPECT_EQ(Tensor::Full({}, 0.1, DType::kF16)->At({}), 0.0999755859375);
}

TEST(TensorCreateTest, ArangeLikeTorch) {
  EXPECT_EQ(Tensor::Arange(0, 5, 1, DType::kI64)->ToVector<int64_t>().value(),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::Arange(5, 0, -2, DType::kI32)->ToVector<int32_t>().value(),
            (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(Tensor::Arange(0, 5, 2, DType::kF32)->ToVector<float>().value(),
            (std::vector<float>{0, 2, 4}));
  // ceil((2 - 1) / 0.3) = 4 elements, start + i * step.
  EXPECT_EQ(Tensor::Arange(1, 2, 0.3, DType::kF64)->ToVector<double>().value(),
            (std::vector<double>{1, 1 + 0.3, 1 + 2 * 0.3, 1 + 3 * 0.3}));
  EXPECT_EQ(Tensor::Arange(0, 0, 1, DType::kF32)->shape(), Shape{0});
  EXPECT_EQ(Tensor::Arange(-1.5, 1, 1, DType::kF32)->ToVector<float>().value(),
            (std::vector<float>{-1.5, -0.5, 0.5}));
}

TEST(TensorCreateTest, FromVectorToVectorAndScalar) {
  auto x = Tensor::FromVector<int64_t>({1, -2, 3, 4, 5, 6}, {3, 2});
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->dtype(), DType::kI64);
  EXPECT_EQ(x->At({1, 0}), 3);
  EXPECT_EQ(x->ToVector<float>().value(),
            (std::vector<float>{1, -2, 3, 4, 5, 6}));
  EXPECT_EQ(x->ToVector<bool>().value(),
            (std::vector<bool>{true, true, true, true, true, true}));
  EXPECT_EQ(x->data<int64_t>()[5], 6);
  auto b = Tensor::FromVector<bool>({true, false, true}, {3});
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(b->ToVector<int32_t>().value(), (std::vector<int32_t>{1, 0, 1}));
  auto h = Tensor::FromVector<Half>({Half(1.5f)}, {1});
  EXPECT_EQ(h->dtype(), DType::kF16);
  EXPECT_EQ(*h->Item(), 1.5);
  const Tensor s = Tensor::Scalar(-4, DType::kI32);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.dtype(), DType::kI32);
  EXPECT_EQ(*s.Item(), -4);
  EXPECT_EQ(*Tensor::Ones({1, 1, 1}, DType::kF64)->Item(), 1.0);
}

TEST(TensorCreateTest, SizeAndAtValidateTheirArguments) {
  auto x = Tensor::Zeros({2, 3}, DType::kF32);
  EXPECT_EQ(x->size(0), 2);
  EXPECT_EQ(x->size(-1), 3);
  EXPECT_EQ(x->size(2), -1);
  EXPECT_EQ(x->size(-3), -1);
  EXPECT_TRUE(std::isnan(x->At({2, 0})));
  EXPECT_TRUE(std::isnan(x->At({0, -1})));
  EXPECT_TRUE(std::isnan(x->At({0})));
  EXPECT_TRUE(std::isnan(Tensor().At({})));
  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(Tensor().raw_data(), nullptr);
  // An undefined tensor has no values to read: an error, not an empty vector.
  EXPECT_EQ(Tensor().ToVector<float>().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorCreateTest, WrappedStorageIsReleasedWithItsLastView) {
  int releases = 0;
  std::vector<float> buffer = {0, 1, 2, 3, 4, 5, 6, 7};
  {
    auto storage = Storage::Wrap(buffer.data(), buffer.size() * sizeof(float),
                                 Device::CPU(), [&](void*) { ++releases; });
    auto view = Tensor::FromStorage(storage, DType::kF32, {2, 2}, {1, 4}, 1);
    ASSERT_TRUE(view.ok()) << view.status();
    storage.reset();
    EXPECT_EQ(view->ToVector<float>().value(),
              (std::vector<float>{1, 5, 2, 6}));
    EXPECT_EQ(view->storage_offset(), 1);
    EXPECT_FALSE(view->is_contiguous());
    EXPECT_EQ(releases, 0);
  }
  EXPECT_EQ(releases, 1);
  // A view that ends at the storage's last element is in bounds.
  auto storage = Storage::Wrap(buffer.data(), 32, Device::CPU(), nullptr);
  EXPECT_TRUE(
      Tensor::FromStorage(storage, DType::kF32, {2, 2}, {2, 1}, 3).ok());
  EXPECT_TRUE(Tensor::FromStorage(storage, DType::kF64, {4}, {1}, 0).ok());
  EXPECT_TRUE(
      Tensor::FromStorage(storage, DType::kF32, {0, 5}, {9, 9}, 8).ok());
}

TEST(TensorCreateTest, StorageAllocate) {
  auto empty = Storage::Allocate(0, Device::CPU());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->nbytes(), 0u);
  EXPECT_NE((*empty)->data(), nullptr);
  auto bytes = Storage::Allocate(100, Device::CPU());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)->nbytes(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*bytes)->data()) % 64, 0u);
  EXPECT_TRUE((*bytes)->device().is_cpu());
}

TEST(TensorCreateTest, CudaAllocationWithoutADeviceSaysWhy) {
  if (cuda::DeviceCount() > 0) {
    auto x = Tensor::Full({3}, 2, DType::kF32, Device::CUDA(0));
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_EQ(x->device(), Device::CUDA(0));
    EXPECT_EQ(x->ToVector<float>().value(), (std::vector<float>{2, 2, 2}));
    return;
  }
  auto storage = Storage::Allocate(16, Device::CUDA(0));
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(storage.status().message().find("cuda:0"), std::string::npos);
  EXPECT_NE(storage.status().message().find("CUDA"), std::string::npos)
      << storage.status();
  EXPECT_FALSE(Tensor::Zeros({2}, DType::kF32, Device::CUDA(0)).ok());
}

}  // namespace
}  // namespace dtensor
