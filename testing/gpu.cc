#include "dtensor/testing/gpu.h"

#include "absl/status/statusor.h"

namespace dtensor::testing {

Tensor OnGpu(const Tensor& t) {
  if (!t.defined()) return t;
  absl::StatusOr<Tensor> moved = t.To(kGpu);
  EXPECT_TRUE(moved.ok()) << moved.status();
  return moved.ok() ? *std::move(moved) : Tensor();
}

}  // namespace dtensor::testing
