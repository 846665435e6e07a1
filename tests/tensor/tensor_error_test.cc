// Bad inputs give the right status code and a message naming the bad values;
// nothing aborts.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using ::testing::HasSubstr;

// Expects `result` to fail with `code` and a message containing every one of
// `parts`.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, absl::StatusCode code,
                 const std::vector<std::string>& parts) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  for (const std::string& part : parts) {
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(part));
  }
}

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 const std::vector<std::string>& parts) {
  ExpectError(absl::StatusOr<int>(status), code, parts);
}

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kOutOfRange = absl::StatusCode::kOutOfRange;

Tensor Matrix() { return *Tensor::Arange(0, 6, 1, DType::kF32)->View({2, 3}); }

TEST(TensorErrorTest, Creation) {
  ExpectError(Tensor::Empty({2, -3}, DType::kF32), kInvalid, {"-3", "[2, -3]"});
  const int64_t big = int64_t{1} << 40;
  ExpectError(Tensor::Zeros({big, big}, DType::kF32), kInvalid,
              {"1099511627776", "too many"});
  ExpectError(Tensor::Empty({int64_t{1} << 62}, DType::kF64), kInvalid,
              {"4611686018427387904"});
  ExpectError(Tensor::Arange(0, 5, 0, DType::kF32), kInvalid, {"step 0"});
  ExpectError(Tensor::Arange(0, 5, -1, DType::kF32), kInvalid,
              {"step -1", "end 5"});
  ExpectError(Tensor::Arange(0, INFINITY, 1, DType::kF32), kInvalid, {"inf"});
  ExpectError(Tensor::FromVector<float>({1, 2, 3}, {2, 2}), kInvalid,
              {"3 values", "[2, 2]"});
}

TEST(TensorErrorTest, DimsOutOfRange) {
  const Tensor x = Matrix();
  ExpectError(NormalizeDim(5, 2), kInvalid, {"dim 5", "rank 2", "[-2, 1]"});
  ExpectError(x.Narrow(2, 0, 1), kInvalid, {"dim 2", "rank 2"});
  ExpectError(x.Slice(-3, 0, 1), kInvalid, {"dim -3"});
  ExpectError(x.Select(7, 0), kInvalid, {"dim 7"});
  ExpectError(x.Transpose(0, 2), kInvalid, {"dim 2"});
  ExpectError(x.Squeeze(3), kInvalid, {"dim 3"});
  ExpectError(x.Unsqueeze(4), kInvalid, {"dim 4", "rank 3"});
  ExpectError(x.Unsqueeze(-4), kInvalid, {"dim -4"});
  ExpectError(x.Chunk(2, 2), kInvalid, {"dim 2"});
  ExpectError(x.Flatten(0, 2), kInvalid, {"dim 2"});
  ExpectError(Tensor::Scalar(1).Select(0, 0), kInvalid, {"0-d"});
}

TEST(TensorErrorTest, BoundsOfNarrowSliceSelect) {
  const Tensor x = Matrix();
  ExpectError(x.Narrow(1, 4, 0), kOutOfRange, {"start 4", "size 3"});
  ExpectError(x.Narrow(1, -4, 1), kOutOfRange, {"start -4"});
  ExpectError(x.Narrow(1, 1, 3), kOutOfRange,
              {"length 3", "start 1", "size 3"});
  ExpectError(x.Narrow(0, 0, -1), kOutOfRange, {"length -1"});
  ExpectError(x.Slice(1, 0, 3, 0), kInvalid, {"step 0"});
  ExpectError(x.Slice(1, 0, 3, -1), kInvalid, {"step -1"});
  ExpectError(x.Select(0, 2), kOutOfRange, {"index 2", "size 2"});
  ExpectError(x.Select(1, -4), kOutOfRange, {"index -4", "size 3"});
  EXPECT_TRUE(x.Select(1, -3).ok());
}

TEST(TensorErrorTest, PermuteAndExpand) {
  const Tensor x = Matrix();
  ExpectError(x.Permute({0}), kInvalid, {"[0]", "[2, 3]"});
  ExpectError(x.Permute({1, -1}), kInvalid, {"[1, -1]", "repeat"});
  ExpectError(x.Permute({0, 2}), kInvalid, {"dim 2"});
  ExpectError(x.Expand({3}), kInvalid, {"[3]", "[2, 3]"});
  ExpectError(x.Expand({2, 4}), kInvalid, {"[2, 4]", "size 3", "dim 1"});
  ExpectError(x.Expand({-1, 2, 3}), kInvalid, {"leading", "-1"});
  ExpectError(x.Expand({2, -2}), kInvalid, {"-2"});
}

TEST(TensorErrorTest, ViewReshapeFlatten) {
  const Tensor x = Matrix();
  ExpectError(x.View({4, 2}), kInvalid, {"[4, 2]", "6 elements"});
  ExpectError(x.View({-1, -1}), kInvalid, {"[-1, -1]", "more than one -1"});
  ExpectError(x.View({-1, 4}), kInvalid, {"[-1, 4]", "6"});
  ExpectError(x.View({-2, 3}), kInvalid, {"-2"});
  ExpectError(x.Transpose(0, 1)->View({6}), kInvalid,
              {"[3, 2]", "[1, 3]", "[6]", "Reshape"});
  ExpectError(x.Reshape({5}), kInvalid, {"[5]", "6 elements"});
  ExpectError(Tensor::Zeros({0, 2}, DType::kF32)->View({-1, 0}), kInvalid,
              {"[-1, 0]"});
  ExpectError(x.Flatten(1, 0), kInvalid, {"start_dim 1", "end_dim 0"});
}

TEST(TensorErrorTest, ChunkAndSplit) {
  const Tensor x = Matrix();
  ExpectError(x.Chunk(0, 1), kInvalid, {"chunks 0"});
  ExpectError(x.ChunkExact(-2, 1), kInvalid, {"chunks -2"});
  ExpectError(x.Split(0, 1), kInvalid, {"split_size 0", "size 3"});
  ExpectError(x.Split(-1, 1), kInvalid, {"split_size -1"});
  ExpectError(x.Split(std::vector<int64_t>{1, 1}, 1), kInvalid,
              {"[1, 1]", "size 3"});
  ExpectError(x.Split(std::vector<int64_t>{4, -1}, 1), kInvalid, {"[4, -1]"});
}

TEST(TensorErrorTest, CopiesAndItem) {
  Tensor x = Matrix();
  ExpectError(x.CopyFrom(*Tensor::Zeros({3, 2}, DType::kF32)), kInvalid,
              {"[3, 2]", "[2, 3]"});
  ExpectError(x.CopyFrom(*Tensor::Zeros({1, 2, 3}, DType::kF32)), kInvalid,
              {"[1, 2, 3]"});
  ExpectError(x.CopyFrom(Tensor()), kInvalid, {"undefined"});
  ExpectError(x.Item(), kInvalid, {"[2, 3]", "6 elements"});
  Tensor undefined;
  ExpectError(undefined.Fill(1), kInvalid, {"undefined"});
  ExpectError(undefined.CopyFrom(x), kInvalid, {"undefined"});
  ExpectError(undefined.To(DType::kF64), kInvalid, {"undefined"});
  ExpectError(undefined.Item(), kInvalid, {"undefined"});
}

TEST(TensorErrorTest, FromStorageBounds) {
  auto storage = Storage::Allocate(24, Device::CPU());  // 6 floats.
  ASSERT_TRUE(storage.ok());
  ExpectError(Tensor::FromStorage(*storage, DType::kF32, {2, 3}, {3, 1}, 1),
              kOutOfRange, {"[2, 3]", "[3, 1]", "offset 1", "6 f32"});
  ExpectError(Tensor::FromStorage(*storage, DType::kF64, {4}, {1}, 0),
              kOutOfRange, {"3 f64"});
  ExpectError(Tensor::FromStorage(*storage, DType::kF32, {2}, {1, 1}, 0),
              kInvalid, {"[2]", "[1, 1]"});
  ExpectError(Tensor::FromStorage(*storage, DType::kF32, {2}, {-1}, 1),
              kInvalid, {"[-1]"});
  ExpectError(Tensor::FromStorage(*storage, DType::kF32, {2}, {1}, -1),
              kInvalid, {"-1"});
  ExpectError(Tensor::FromStorage(nullptr, DType::kF32, {2}, {1}, 0), kInvalid,
              {"null"});
  const int64_t huge = int64_t{1} << 62;
  ExpectError(Tensor::FromStorage(*storage, DType::kF32, {2}, {huge}, huge),
              kOutOfRange, {"4611686018427387904"});
}

TEST(TensorErrorTest, CatAndStack) {
  const Tensor x = Matrix();
  ExpectError(Cat({}, 0), kInvalid, {"no tensors"});
  ExpectError(Cat({x, *Tensor::Zeros({2, 3}, DType::kF64)}, 0), kInvalid,
              {"tensor 1", "f64", "f32"});
  ExpectError(Cat({x, *Tensor::Zeros({3, 3}, DType::kF32)}, 1), kInvalid,
              {"tensor 1", "[3, 3]", "[2, 3]", "dim 1"});
  ExpectError(Cat({x, *Tensor::Zeros({6}, DType::kF32)}, 0), kInvalid, {"[6]"});
  ExpectError(Cat({x, Tensor()}, 0), kInvalid, {"tensor 1", "undefined"});
  ExpectError(Cat({x}, 2), kInvalid, {"dim 2"});
  ExpectError(Stack({}, 0), kInvalid, {"no tensors"});
  ExpectError(Stack({x, *x.Transpose(0, 1)}, 0), kInvalid,
              {"tensor 1", "[3, 2]", "[2, 3]"});
  ExpectError(Stack({x, x}, 3), kInvalid, {"dim 3"});
}

TEST(TensorErrorTest, DevicesWithoutCuda) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  ExpectError(Tensor::Empty({2}, DType::kF32, Device::CUDA(1)),
              absl::StatusCode::kFailedPrecondition, {"cuda:1", "CUDA"});
  ExpectError(Matrix().To(Device::CUDA(0)),
              absl::StatusCode::kFailedPrecondition, {"cuda:0"});
  ExpectError(Tensor::Empty({2}, DType::kF32, Device::CUDA(-1)), kInvalid,
              {"cuda:-1"});
}

// Host memory under a cuda:0 tag, in a process without a CUDA device: every
// copy of it to the host fails, as a device copy can. The reads and their
// callers must report that, never go on with no values.
TEST(TensorErrorTest, FailedDeviceReadsAreErrors) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  std::vector<int64_t> buffer = {0, 1};
  const Tensor unreadable =
      *Tensor::FromStorage(Storage::Wrap(buffer.data(), sizeof(int64_t) * 2,
                                         Device::CUDA(0), nullptr),
                           DType::kI64, {2}, {1}, 0);
  constexpr auto kNoDevice = absl::StatusCode::kFailedPrecondition;
  ExpectError(unreadable.ToVector<int64_t>(), kNoDevice, {});
  ExpectError(unreadable.ToVector<double>(), kNoDevice, {});
  ExpectError(Tensor().ToVector<float>(), kInvalid, {"undefined"});
  // Embedding reads its indices on the host: before, a failed read looked
  // up no row and returned uninitialised rows.
  const Tensor table = *Tensor::Ones({2, 3}, DType::kF32);
  ExpectError(Embedding(unreadable, table), kNoDevice, {});
  ExpectError(
      EmbeddingBackward(unreadable, *Tensor::Ones({2, 3}, DType::kF32), 2),
      kNoDevice, {});
  // Two unreadable tensors are not close (before: true, both reads empty).
  EXPECT_FALSE(AllClose(unreadable, unreadable));
}

// On the CPU the index checks are immediate (the deferred form is CUDA's:
// cuda_ops_test).
TEST(TensorErrorTest, CpuIndexChecksFailAtOnce) {
  const Tensor indices = *Tensor::FromVector<int32_t>({0, 3, 5}, {3});
  ExpectError(CheckIndicesInRange(indices, 5, "lookup"), kInvalid,
              {"lookup", "index 5", "[0, 5)"});
  EXPECT_TRUE(CheckIndicesInRange(indices, 6, "lookup").ok());
  ExpectError(CheckIndicesInRange(Matrix(), 6, "lookup"), kInvalid,
              {"lookup", "f32"});
  const absl::StatusOr<Tensor> wide =
      CheckedIndicesOn(*indices.Slice(0, 0, 3, 2), 6, Device::CPU(), "lookup");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->dtype(), DType::kI64);
  EXPECT_EQ(wide->ToVector<int64_t>().value(), (std::vector<int64_t>{0, 5}));
  EXPECT_TRUE(ReadDeferredIndexChecks().ok());
}

}  // namespace
}  // namespace dtensor
