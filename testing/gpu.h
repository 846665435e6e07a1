#ifndef DTENSOR_TESTING_GPU_H_
#define DTENSOR_TESTING_GPU_H_

// Helpers for tests that run on a CUDA device and must skip, saying why, on a
// machine without one (every build links the CUDA entry points; a build
// without --config=cuda or a machine without a device reports no device).
//
//   TEST(MyKernelTest, MatchesTheCpu) {
//     DTENSOR_SKIP_WITHOUT_GPU();
//     const Tensor x = testing::OnGpu(cpu_input);
//     ...
//   }

#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"

// Skips the current test when no usable CUDA device is present, with the
// backend's reason (no driver, a CPU-only build, ...).
#define DTENSOR_SKIP_WITHOUT_GPU()                      \
  if (::dtensor::cuda::DeviceCount() == 0) {            \
    GTEST_SKIP() << "skipped: no usable CUDA device ("  \
                 << ::dtensor::cuda::Describe() << ")"; \
  }

namespace dtensor::testing {

// The device GPU tests run on.
inline const Device kGpu = Device::CUDA(0);

// `t` copied to the GPU in the same layout (the whole base is copied, then the
// same view taken); an undefined tensor (an absent optional operand) stays
// undefined. A failed copy fails the test and returns an empty tensor.
Tensor OnGpu(const Tensor& t);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTING_GPU_H_
