#include "collectives/nccl/device_copy.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/argument_checks.h"

namespace dtensor {
namespace {

// One dim of a copy: its size and the element strides of both views.
struct CopyDim {
  int64_t size;
  int64_t dst_stride;
  int64_t src_stride;
};

// The dims of size > 1, with neighbours merged where both views allow.
std::vector<CopyDim> MergedDims(const Tensor& dst, const Tensor& src) {
  std::vector<CopyDim> dims;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    if (dst.size(d) == 1) continue;
    const CopyDim next{dst.size(d), dst.strides()[d], src.strides()[d]};
    if (!dims.empty()) {
      CopyDim& outer = dims.back();
      if (outer.dst_stride == next.size * next.dst_stride &&
          outer.src_stride == next.size * next.src_stride) {
        outer = {outer.size * next.size, next.dst_stride, next.src_stride};
        continue;
      }
    }
    dims.push_back(next);
  }
  return dims;
}

}  // namespace

absl::Status CopyViewOnDevice(const Tensor& dst, const Tensor& src,
                              cudaStream_t stream) {
  if (dst.dtype() != src.dtype() || dst.shape() != src.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device copy: ", TensorText(src), " into ", TensorText(dst)));
  }
  if (dst.numel() == 0) return absl::OkStatus();
  const int64_t element = static_cast<int64_t>(ElementSize(dst.dtype()));
  std::vector<CopyDim> dims = MergedDims(dst, src);
  // The innermost copy: a run of contiguous elements (or single elements)
  // repeated over the next dim.
  int64_t width = element;
  int64_t height = 1;
  int64_t dst_pitch = element;
  int64_t src_pitch = element;
  if (!dims.empty() && dims.back().dst_stride == 1 &&
      dims.back().src_stride == 1) {
    width = dims.back().size * element;
    dims.pop_back();
  }
  if (!dims.empty() && dims.back().dst_stride * element >= width &&
      dims.back().src_stride * element >= width) {
    height = dims.back().size;
    dst_pitch = dims.back().dst_stride * element;
    src_pitch = dims.back().src_stride * element;
    dims.pop_back();
  }
  // Every index of the remaining (outer) dims.
  int64_t copies = 1;
  for (const CopyDim& dim : dims) copies *= dim.size;
  char* const dst_base = static_cast<char*>(dst.raw_data());
  const char* const src_base = static_cast<const char*>(src.raw_data());
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t copy = 0; copy < copies; ++copy) {
    int64_t dst_offset = 0;
    int64_t src_offset = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      dst_offset += index[d] * dims[d].dst_stride;
      src_offset += index[d] * dims[d].src_stride;
    }
    const cudaError_t error =
        cudaMemcpy2DAsync(dst_base + dst_offset * element, dst_pitch,
                          src_base + src_offset * element, src_pitch, width,
                          height, cudaMemcpyDeviceToDevice, stream);
    if (error != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("device copy: ", cudaGetErrorString(error)));
    }
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++index[d] < dims[d].size) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace dtensor
