#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/index_checks.h"
#include "dtensor/tensor/strided_loop.h"
#include "dtensor/tensor/tensor.h"
#include "dtensor/tensor/tensor_copies_cuda.h"
#include "dtensor/tensor/tensor_internal.h"

// Tensor's copies: between layouts, dtypes and devices, and in-place fills.
namespace dtensor {
namespace internal {

absl::StatusOr<Tensor> ContiguousCopy(const Tensor& tensor) {
  DT_RETURN_IF_ERROR(CheckDefined(tensor, "Clone"));
  DT_ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(tensor.shape(), tensor.dtype(),
                                                 tensor.device()));
  DT_RETURN_IF_ERROR(copy.CopyFrom(tensor));
  return copy;
}

}  // namespace internal
namespace {

using internal::CheckDefined;
using internal::ContiguousCopy;
using internal::LastElementOffset;

// `dst[i] = src[i]` for every index, converting dtypes. Both on the CPU, of
// the same shape, not overlapping.
void CopyElements(const Tensor& dst, const Tensor& src) {
  DispatchDType(dst.dtype(), [&](auto dst_tag) {
    using D = decltype(dst_tag);
    DispatchDType(src.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      D* const dst_base = dst.data<D>();
      const S* const src_base = src.data<S>();
      ForEachStridedRun<2>(dst.shape(), {dst.strides(), src.strides()}, {0, 0},
                           [&](const OperandOffsets<2>& offsets,
                               const OperandOffsets<2>& steps, int64_t count) {
                             D* out = dst_base + offsets[0];
                             const S* in = src_base + offsets[1];
                             if (steps[0] == 1 && steps[1] == 1) {
                               if constexpr (std::is_same_v<D, S>) {
                                 std::memcpy(out, in, count * sizeof(D));
                               } else {
                                 for (int64_t j = 0; j < count; ++j) {
                                   out[j] = ConvertValue<D>(in[j]);
                                 }
                               }
                             } else {
                               for (int64_t j = 0; j < count; ++j) {
                                 out[j * steps[0]] =
                                     ConvertValue<D>(in[j * steps[1]]);
                               }
                             }
                           });
    });
  });
}

// `tensor` itself when contiguous, else a contiguous copy.
absl::StatusOr<Tensor> ContiguousOrCopy(const Tensor& tensor) {
  if (tensor.is_contiguous()) return tensor;
  return ContiguousCopy(tensor);
}

}  // namespace

// ---- Copies. ----

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return Clone();
}

Tensor Tensor::Clone() const {
  auto copy = ContiguousCopy(*this);
  return copy.ok() ? *std::move(copy) : Tensor();
}

absl::Status Tensor::CopyFrom(const Tensor& src) {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "CopyFrom"));
  DT_RETURN_IF_ERROR(CheckDefined(src, "CopyFrom (source)"));
  auto expanded = src.Expand(shape_);
  if (!expanded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyFrom: cannot broadcast source shape ", ShapeToString(src.shape()),
        " to ", ShapeToString(shape_)));
  }
  if (device().is_cuda() && src.device() == device()) {
    return cuda::CopyOnDevice(*expanded, *this);
  }
  if (!device().is_cpu()) {
    // Stage the converted values on the host, then copy them over.
    if (!is_contiguous()) {
      return absl::FailedPreconditionError(
          absl::StrCat("CopyFrom into a non-contiguous tensor on ",
                       device().ToString(), " is not supported"));
    }
    DT_ASSIGN_OR_RETURN(Tensor staged, Empty(shape_, dtype_));
    DT_RETURN_IF_ERROR(staged.CopyFrom(*expanded));
    if (nbytes() == 0) return absl::OkStatus();
    return cuda::Memcpy(raw_data(), staged.raw_data(), nbytes(),
                        cuda::CopyKind::kHostToDevice, device().index);
  }
  if (!src.device().is_cpu()) {
    DT_ASSIGN_OR_RETURN(expanded, expanded->To(Device::CPU()));
  } else if (src.storage() == storage_) {
    // The source may overlap the destination: read from a snapshot.
    DT_ASSIGN_OR_RETURN(expanded, ContiguousCopy(*expanded));
  }
  CopyElements(*this, *expanded);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Tensor::To(DType dtype) const {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "To"));
  if (dtype == dtype_) return *this;
  DT_ASSIGN_OR_RETURN(Tensor converted, Empty(shape_, dtype, device()));
  DT_RETURN_IF_ERROR(converted.CopyFrom(*this));
  return converted;
}

absl::StatusOr<Tensor> Tensor::To(Device device) const {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "To"));
  if (device == this->device()) return *this;
  if (!device.is_cpu() && !this->device().is_cpu()) {
    // Between CUDA devices through the host.
    DT_ASSIGN_OR_RETURN(Tensor host, To(Device::CPU()));
    return host.To(device);
  }
  if (!device.is_cpu()) {
    DT_ASSIGN_OR_RETURN(Tensor source, ContiguousOrCopy(*this));
    DT_ASSIGN_OR_RETURN(Tensor copy, Empty(shape_, dtype_, device));
    if (nbytes() == 0) return copy;
    DT_RETURN_IF_ERROR(cuda::Memcpy(copy.raw_data(), source.raw_data(),
                                    nbytes(), cuda::CopyKind::kHostToDevice,
                                    device.index));
    return copy;
  }
  // To the host: copy the span of storage the view covers and re-apply the
  // view there. The copy waits for the device's stream, after which the
  // deferred index checks are read at no further wait; a bad index is
  // reported before what the copy says (their contract, index_checks.h).
  if (numel() == 0) {
    DT_RETURN_IF_ERROR(ReadDeferredIndexChecks());
    return Empty(shape_, dtype_);
  }
  const int64_t span = *LastElementOffset(shape_, strides_) + 1;
  DT_ASSIGN_OR_RETURN(auto host,
                      Storage::Allocate(span * ElementSize(dtype_), device));
  const absl::Status copied =
      cuda::Memcpy(host->data(), raw_data(), host->nbytes(),
                   cuda::CopyKind::kDeviceToHost, this->device().index);
  // A failed copy may not have waited.
  DT_RETURN_IF_ERROR(copied.ok()
                         ? ReadDeferredIndexChecksAfterWait(this->device())
                         : ReadDeferredIndexChecks());
  DT_RETURN_IF_ERROR(copied);
  Tensor view = MakeView(shape_, strides_, 0);
  view.storage_ = std::move(host);
  return ContiguousOrCopy(view);
}

// ---- In place. ----

namespace {

// Fills CUDA tensor `t` on its device: the fill kernel over its elements when
// contiguous, else a filled one-element tensor broadcast through the view.
absl::Status FillOnDevice(const Tensor& t, double value) {
  uint64_t bits = 0;
  DispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T converted = ConvertValue<T>(value);
    std::memcpy(&bits, &converted, sizeof(T));
  });
  const int element_bytes = static_cast<int>(ElementSize(t.dtype()));
  if (t.is_contiguous()) {
    return cuda::Fill(t.raw_data(), t.numel(), bits, element_bytes,
                      t.device().index);
  }
  DT_ASSIGN_OR_RETURN(Tensor one, Tensor::Empty({}, t.dtype(), t.device()));
  DT_RETURN_IF_ERROR(
      cuda::Fill(one.raw_data(), 1, bits, element_bytes, t.device().index));
  Tensor target = t;
  return target.CopyFrom(one);
}

}  // namespace

absl::Status Tensor::Fill(double value) {
  DT_RETURN_IF_ERROR(CheckDefined(*this, "Fill"));
  if (device().is_cuda()) return FillOnDevice(*this, value);
  DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T fill = ConvertValue<T>(value);
    T* const base = data<T>();
    ForEachStridedRun<1>(shape_, {strides_}, {0},
                         [&](const OperandOffsets<1>& offsets,
                             const OperandOffsets<1>& steps, int64_t count) {
                           T* out = base + offsets[0];
                           for (int64_t j = 0; j < count; ++j) {
                             out[j * steps[0]] = fill;
                           }
                         });
  });
  return absl::OkStatus();
}

}  // namespace dtensor
