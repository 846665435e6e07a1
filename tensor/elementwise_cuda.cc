// The elementwise kernels on CUDA tensors (elementwise_cuda.h): argument
// checks, broadcasting and launches of
// dtensor/tensor/cuda/elementwise_kernels.h.
#include "dtensor/tensor/elementwise_cuda.h"

#include "dtensor/tensor/cuda_backend.h"

#ifdef DTENSOR_CUDA
#include <string>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/elementwise_kernels.h"
#include "dtensor/tensor/cuda_launch.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/kernel_checks.h"
#endif

namespace dtensor::cuda {

#ifdef DTENSOR_CUDA
namespace {

// `t` on `device`: a copy when it is on the CPU (a scalar operand).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device,
                                absl::string_view op, absl::string_view arg) {
  if (t.defined() && t.device().is_cpu()) return t.To(device);
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, op, arg));
  return t;
}

}  // namespace
#endif

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp op, absl::string_view name,
                                     const Tensor& x) {
#ifdef DTENSOR_CUDA
  DT_RETURN_IF_ERROR(internal::CheckOn(x, x.device(), name, "a"));
  if (!UnaryTakes(op, IsFloatingPoint(x.dtype()), x.dtype() == DType::kBool)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a has dtype ", std::string(DTypeName(x.dtype())),
                     ", which the op does not take"));
  }
  DT_ASSIGN_OR_RETURN(Tensor out,
                      Tensor::Empty(x.shape(), x.dtype(), x.device()));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<2> shape,
      Coalesce<2>(x.shape(), {&out.strides(), &x.strides()}, name));
  return LaunchInto(out, name, [&](cudaStream_t stream) {
    return LaunchUnary(op, ToScalarType(x.dtype()), x.raw_data(),
                       out.raw_data(), shape, x.numel(), stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp op, absl::string_view name,
                                      const Tensor& a_in, const Tensor& b_in) {
#ifdef DTENSOR_CUDA
  const Device device = OnCuda(a_in) ? a_in.device() : b_in.device();
  DT_ASSIGN_OR_RETURN(const Tensor a, OnDevice(a_in, device, name, "a"));
  DT_ASSIGN_OR_RETURN(const Tensor b, OnDevice(b_in, device, name, "b"));
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a has dtype ", std::string(DTypeName(a.dtype())),
                     " but b has dtype ", std::string(DTypeName(b.dtype()))));
  }
  if (!BinaryTakes(op, IsFloatingPoint(a.dtype()), a.dtype() == DType::kBool)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a has dtype ", std::string(DTypeName(a.dtype())),
                     ", which the op does not take"));
  }
  absl::StatusOr<Shape> shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", shape.status().message()));
  }
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(*shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(*shape));
  const DType out_dtype = IsComparison(op) ? DType::kBool : a.dtype();
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(*shape, out_dtype, device));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<3> strided,
      Coalesce<3>(*shape,
                  {&out.strides(), &a_view.strides(), &b_view.strides()},
                  name));
  return LaunchInto(out, name, [&](cudaStream_t stream) {
    return LaunchBinary(op, ToScalarType(a.dtype()), a_view.raw_data(),
                        b_view.raw_data(), out.raw_data(), strided, out.numel(),
                        stream);
  });
#else
  return NotBuilt();
#endif
}

absl::StatusOr<Tensor> WhereOnDevice(const Tensor& cond_in, const Tensor& a_in,
                                     const Tensor& b_in, const Shape& shape) {
#ifdef DTENSOR_CUDA
  const Device device = OnCuda(cond_in) ? cond_in.device()
                        : OnCuda(a_in)  ? a_in.device()
                                        : b_in.device();
  DT_ASSIGN_OR_RETURN(const Tensor cond,
                      OnDevice(cond_in, device, "Where", "cond"));
  DT_ASSIGN_OR_RETURN(const Tensor a, OnDevice(a_in, device, "Where", "a"));
  DT_ASSIGN_OR_RETURN(const Tensor b, OnDevice(b_in, device, "Where", "b"));
  DT_ASSIGN_OR_RETURN(const Tensor cond_view, cond.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(shape));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, a.dtype(), device));
  DT_ASSIGN_OR_RETURN(const StridedShape<4> strided,
                      Coalesce<4>(shape,
                                  {&out.strides(), &cond_view.strides(),
                                   &a_view.strides(), &b_view.strides()},
                                  "Where"));
  return LaunchInto(out, "Where", [&](cudaStream_t stream) {
    return LaunchWhere(ToScalarType(a.dtype()),
                       static_cast<const bool*>(cond_view.raw_data()),
                       a_view.raw_data(), b_view.raw_data(), out.raw_data(),
                       strided, out.numel(), stream);
  });
#else
  return NotBuilt();
#endif
}

}  // namespace dtensor::cuda
