#include "dtensor/tensor/indexing.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/indexing_cuda.h"
#include "dtensor/tensor/kernel_checks.h"
#include "dtensor/tensor/strided_loop.h"

namespace dtensor {
namespace {

using internal::CheckCpu;
using internal::CheckIndexInRange;
using internal::CheckSameDType;
using internal::ReadIndices;

// `x` and `index` are on the CPU, or `x` is on a CUDA device (whose kernel
// then runs; `index` may be on the CPU or on the device).
absl::Status CheckDevices(const Tensor& x, const Tensor& index,
                          const char* op) {
  if (cuda::OnCuda(x)) return absl::OkStatus();
  DT_RETURN_IF_ERROR(CheckCpu(x, op, "x"));
  return CheckCpu(index, op, "index");
}

// The values of `index` (row-major), each checked to lie in [0, bound).
absl::StatusOr<std::vector<int64_t>> ReadIndicesBelow(const Tensor& index,
                                                      int64_t bound,
                                                      const char* op) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                      ReadIndices(index, op, "index"));
  for (const int64_t value : values) {
    DT_RETURN_IF_ERROR(CheckIndexInRange(value, bound, op));
  }
  return values;
}

// `index` has the rank of `x` and no larger sizes on the dims other than
// `dim`; `src` (when defined) has the rank of `x` and no smaller sizes than
// `index` on any dim.
absl::Status CheckIndexShape(const Tensor& x, int64_t dim, const Tensor& index,
                             const Tensor& src, const char* op) {
  bool fits =
      index.dim() == x.dim() && (!src.defined() || src.dim() == x.dim());
  for (int64_t d = 0; fits && d < x.dim(); ++d) {
    fits = (d == dim || index.size(d) <= x.size(d)) &&
           (!src.defined() || index.size(d) <= src.size(d));
  }
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": index ", ShapeToString(index.shape()), " does not fit x ",
      ShapeToString(x.shape()),
      src.defined() ? absl::StrCat(" and src ", ShapeToString(src.shape()))
                    : "",
      " along dim ", dim,
      " (same rank, and no larger sizes than x off that dim",
      src.defined() ? " and than src on every dim)" : ")"));
}

// `strides` with the entry of `dim` zeroed: walking the index's shape then
// stays in the row of x that the index value picks.
Strides WithoutDim(const Strides& strides, int64_t dim) {
  Strides result = strides;
  result[dim] = 0;
  return result;
}

}  // namespace

absl::StatusOr<Tensor> IndexSelect(const Tensor& x, int64_t dim,
                                   const Tensor& index) {
  DT_RETURN_IF_ERROR(CheckDevices(x, index, "IndexSelect"));
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, x.dim()));
  if (index.dim() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("IndexSelect: index must be 1-D, got shape ",
                     ShapeToString(index.shape())));
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> rows,
                      ReadIndicesBelow(index, x.size(d), "IndexSelect"));
  if (cuda::OnCuda(x)) return cuda::IndexSelectOnDevice(x, d, rows);
  Shape out_shape = x.shape();
  out_shape[d] = static_cast<int64_t>(rows.size());
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, x.dtype()));
  // Contiguous x is [outer, size(d), inner]: copy blocks of `inner` elements.
  const Tensor input = x.Contiguous();
  int64_t outer = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  const size_t block_bytes =
      NumElements(absl::MakeConstSpan(x.shape()).subspan(d + 1)) *
      ElementSize(x.dtype());
  const char* in = static_cast<const char*>(input.raw_data());
  char* result = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const int64_t row : rows) {
      std::memcpy(result, in + (o * x.size(d) + row) * block_bytes,
                  block_bytes);
      result += block_bytes;
    }
  }
  return out;
}

absl::StatusOr<Tensor> Gather(const Tensor& x, int64_t dim,
                              const Tensor& index) {
  DT_RETURN_IF_ERROR(CheckDevices(x, index, "Gather"));
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, x.dim()));
  DT_RETURN_IF_ERROR(CheckIndexShape(x, d, index, Tensor(), "Gather"));
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> picks,
                      ReadIndicesBelow(index, x.size(d), "Gather"));
  if (cuda::OnCuda(x)) return cuda::GatherOnDevice(x, d, index.shape(), picks);
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(index.shape(), x.dtype()));
  const Strides x_strides = WithoutDim(x.strides(), d);
  const int64_t pick_stride = x.strides()[d];
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* result = out.data<T>();
    int64_t element = 0;  // Row-major position in the index's shape.
    ForEachStridedElement<1>(
        index.shape(), {absl::MakeConstSpan(x_strides)}, {0},
        [&](const OperandOffsets<1>& offsets) {
          result[element] = in[offsets[0] + picks[element] * pick_stride];
          ++element;
        });
  });
  return out;
}

absl::StatusOr<Tensor> ScatterAdd(const Tensor& x, int64_t dim,
                                  const Tensor& index, const Tensor& src) {
  DT_RETURN_IF_ERROR(CheckDevices(x, index, "ScatterAdd"));
  if (!cuda::OnCuda(x)) DT_RETURN_IF_ERROR(CheckCpu(src, "ScatterAdd", "src"));
  DT_RETURN_IF_ERROR(CheckSameDType(x, src, "ScatterAdd", "x", "src"));
  if (x.dtype() == DType::kBool) {
    return absl::InvalidArgumentError(
        "ScatterAdd: x has dtype bool; a numeric dtype is required");
  }
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, x.dim()));
  DT_RETURN_IF_ERROR(CheckIndexShape(x, d, index, src, "ScatterAdd"));
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> targets,
                      ReadIndicesBelow(index, x.size(d), "ScatterAdd"));
  if (cuda::OnCuda(x)) {
    return cuda::ScatterAddOnDevice(x, d, index.shape(), targets, src);
  }
  Tensor out = x.Clone();
  const Strides out_strides = WithoutDim(out.strides(), d);
  const int64_t target_stride = out.strides()[d];
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T* addend = src.data<T>();
    T* result = out.data<T>();
    int64_t element = 0;  // Row-major position in the index's shape.
    ForEachStridedElement<2>(
        index.shape(),
        {absl::MakeConstSpan(out_strides), absl::MakeConstSpan(src.strides())},
        {0, 0}, [&](const OperandOffsets<2>& offsets) {
          T& slot = result[offsets[0] + targets[element] * target_stride];
          slot = static_cast<T>(static_cast<C>(slot) +
                                static_cast<C>(addend[offsets[1]]));
          ++element;
        });
  });
  return out;
}

}  // namespace dtensor
