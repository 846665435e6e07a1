#ifndef DTENSOR_TENSOR_CUDA_LAUNCH_H_
#define DTENSOR_TENSOR_CUDA_LAUNCH_H_

// What the CUDA entry points (<family>_cuda.cc, cuda_entry.h) share to
// prepare operands and launch the kernels of dtensor/tensor/cuda/ on the
// device's stream. With --config=cuda only: include it under
// `#ifdef DTENSOR_CUDA`.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/elementwise_body.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/launch_shape.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::cuda {

// The kernels' ScalarType of `dtype` (the enumerators of the two tables,
// DTENSOR_FOR_EACH_DTYPE and DT_CUDA_FOR_EACH_SCALAR_TYPE, are the same).
ScalarType ToScalarType(DType dtype);

// OK for a launch that `op` reports as accepted, else Internal naming `op`
// and the CUDA error.
absl::Status Launched(cudaError_t error, absl::string_view op);

// The stream of t's device.
absl::StatusOr<cudaStream_t> StreamOf(const Tensor& t);

// Calls launch(stream) with the stream of t's device, for an entry point that
// has prepared its operands and outputs on that device.
// Errors: the stream's; Internal naming `op` when the launch fails.
template <typename Launch>
absl::Status LaunchOn(const Tensor& t, absl::string_view op, Launch&& launch) {
  DT_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(t));
  return Launched(launch(stream), op);
}

// A contiguous copy of `t` on its device (t itself when contiguous).
absl::StatusOr<Tensor> ContiguousOnDevice(const Tensor& t);

// LaunchOn for an entry point whose result is `out`, on out's device:
// returns `out` once the launch is accepted.
// Errors: LaunchOn's.
template <typename Launch>
absl::StatusOr<Tensor> LaunchInto(const Tensor& out, absl::string_view op,
                                  Launch&& launch) {
  DT_RETURN_IF_ERROR(LaunchOn(out, op, std::forward<Launch>(launch)));
  return out;
}

// The result of a kernel that reads `x` contiguous and writes a new tensor of
// x's shape, dtype and device: launch(input, out, stream) gets the data of
// both and the stream of x's device.
// Errors: those of copying x or allocating the result; LaunchOn's.
template <typename Launch>
absl::StatusOr<Tensor> LaunchLike(const Tensor& x, absl::string_view op,
                                  Launch&& launch) {
  DT_ASSIGN_OR_RETURN(const Tensor input, ContiguousOnDevice(x));
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  return LaunchInto(out, op, [&](cudaStream_t stream) {
    return launch(input.raw_data(), out.raw_data(), stream);
  });
}

// Host index values as an i64 tensor on `device`.
absl::StatusOr<Tensor> IndicesOnDevice(const std::vector<int64_t>& values,
                                       Device device);

// The dtype that the kernels accumulating by atomic adds (and the attention)
// accumulate `dtype` in: float for the 16-bit floats (no atomicAdd of their
// own, and one rounding at the end), `dtype` otherwise.
DType AccumulatorDType(DType dtype);

// `acc` rounded to `dtype` (acc itself when it already has that dtype).
absl::StatusOr<Tensor> RoundedTo(const Tensor& acc, DType dtype);

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_LAUNCH_H_
