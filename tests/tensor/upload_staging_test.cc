// UploadStaging (dtensor/tensor/cuda/upload_staging.h) over fake page-locked
// memory and fences whose passing the test decides.
#include "dtensor/tensor/cuda/upload_staging.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dtensor::cuda {
namespace {

// Fences are indices into `pending` (true: a recorded copy not yet done).
class Fakes {
 public:
  UploadStaging::Hooks Hooks() {
    UploadStaging::Hooks hooks;
    hooks.allocate = [this](size_t nbytes) -> absl::StatusOr<void*> {
      if (fail_allocation) return absl::ResourceExhaustedError("no pinned");
      memory.push_back(std::make_unique<char[]>(nbytes));
      sizes.push_back(nbytes);
      return static_cast<void*>(memory.back().get());
    };
    hooks.make_fence = [this]() -> absl::StatusOr<void*> {
      pending.push_back(false);
      return reinterpret_cast<void*>(pending.size());
    };
    hooks.passed = [this](void* fence) { return !pending[Index(fence)]; };
    return hooks;
  }
  // A Commit recording `fence` as pending.
  absl::Status Record(void* fence) {
    pending[Index(fence)] = true;
    return absl::OkStatus();
  }
  void Pass(void* fence) { pending[Index(fence)] = false; }

  bool fail_allocation = false;
  std::vector<std::unique_ptr<char[]>> memory;
  std::vector<size_t> sizes;
  std::vector<bool> pending;

 private:
  static size_t Index(void* fence) {
    return reinterpret_cast<size_t>(fence) - 1;
  }
};

TEST(UploadStagingTest, ReusesABufferOnceItsCopyIsDone) {
  Fakes fakes;
  UploadStaging staging(fakes.Hooks());
  auto record = [&](void* fence) { return fakes.Record(fence); };
  absl::StatusOr<UploadStaging::Buffer*> first = staging.Acquire(1000);
  ASSERT_TRUE(first.ok() && *first != nullptr);
  EXPECT_GE((*first)->capacity, 1000u);
  ASSERT_TRUE(staging.Commit(*first, record).ok());
  // In flight: a second request gets another buffer.
  absl::StatusOr<UploadStaging::Buffer*> second = staging.Acquire(1000);
  ASSERT_TRUE(second.ok() && *second != nullptr);
  EXPECT_NE((*second)->data, (*first)->data);
  ASSERT_TRUE(staging.Commit(*second, record).ok());
  fakes.Pass((*first)->fence);
  absl::StatusOr<UploadStaging::Buffer*> third = staging.Acquire(500);
  ASSERT_TRUE(third.ok() && *third != nullptr);
  EXPECT_EQ((*third)->data, (*first)->data);
  EXPECT_EQ(staging.buffers(), 2);
}

TEST(UploadStagingTest, AHeldBufferIsNotHandedOutTwice) {
  Fakes fakes;
  UploadStaging staging(fakes.Hooks());
  absl::StatusOr<UploadStaging::Buffer*> held = staging.Acquire(10);
  absl::StatusOr<UploadStaging::Buffer*> other = staging.Acquire(10);
  ASSERT_TRUE(held.ok() && other.ok() && *held != nullptr && *other != nullptr);
  EXPECT_NE(*held, *other);
}

TEST(UploadStagingTest, PicksTheSmallestFreeBufferThatFits) {
  Fakes fakes;
  UploadStaging staging(fakes.Hooks());
  auto nothing = [](void*) { return absl::OkStatus(); };
  UploadStaging::Buffer* large = *staging.Acquire(size_t{1} << 20);
  UploadStaging::Buffer* small = *staging.Acquire(100);
  ASSERT_TRUE(staging.Commit(large, nothing).ok());
  ASSERT_TRUE(staging.Commit(small, nothing).ok());
  EXPECT_EQ(*staging.Acquire(200), small);
  EXPECT_EQ(*staging.Acquire(200), large);
}

TEST(UploadStagingTest, GivesNoneWhenTooLargeOrAllBusy) {
  Fakes fakes;
  UploadStaging staging(fakes.Hooks());
  absl::StatusOr<UploadStaging::Buffer*> too_large =
      staging.Acquire(UploadStaging::kMaxBytes + 1);
  ASSERT_TRUE(too_large.ok());
  EXPECT_EQ(*too_large, nullptr);
  EXPECT_EQ(staging.buffers(), 0);
  for (int i = 0; i < UploadStaging::kMaxBuffers; ++i) {
    absl::StatusOr<UploadStaging::Buffer*> buffer = staging.Acquire(64);
    ASSERT_TRUE(buffer.ok() && *buffer != nullptr) << i;
    ASSERT_TRUE(
        staging
            .Commit(*buffer, [&](void* fence) { return fakes.Record(fence); })
            .ok());
  }
  absl::StatusOr<UploadStaging::Buffer*> busy = staging.Acquire(64);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(*busy, nullptr);
}

TEST(UploadStagingTest, AFailedRecordFreesTheBufferAndSaysWhy) {
  Fakes fakes;
  UploadStaging staging(fakes.Hooks());
  UploadStaging::Buffer* buffer = *staging.Acquire(64);
  const absl::Status failed = staging.Commit(
      buffer, [](void*) { return absl::InternalError("copy failed"); });
  EXPECT_EQ(failed.message(), "copy failed");
  EXPECT_EQ(*staging.Acquire(64), buffer);
}

TEST(UploadStagingTest, AllocationErrorsReachTheCaller) {
  Fakes fakes;
  fakes.fail_allocation = true;
  UploadStaging staging(fakes.Hooks());
  EXPECT_EQ(staging.Acquire(64).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(staging.buffers(), 0);
}

}  // namespace
}  // namespace dtensor::cuda
