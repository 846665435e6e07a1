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

// Whether `t` is a one-element host tensor: a scalar operand, which the
// kernels take by value (a kernel argument) instead of as a copy on the
// device, which would wait for the device's stream.
bool IsHostScalar(const Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.numel() == 1;
}

// `t` on `device`: a copy when it is on the CPU (and no scalar operand).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device,
                                absl::string_view op, absl::string_view arg) {
  if (t.defined() && t.device().is_cpu()) return t.To(device);
  DT_RETURN_IF_ERROR(internal::CheckOn(t, device, op, arg));
  return t;
}

// op(x, scalar), or op(scalar, x) when `scalar_first`, over `shape` (their
// broadcast shape) into a new tensor of `out_dtype` on x's device: `scalar`
// is a host scalar (IsHostScalar) of x's dtype, read at the launch.
absl::StatusOr<Tensor> BinaryWithScalar(BinaryOp op, absl::string_view name,
                                        const Tensor& x, const Tensor& scalar,
                                        bool scalar_first, const Shape& shape,
                                        DType out_dtype) {
  DT_ASSIGN_OR_RETURN(const Tensor x_view, x.Expand(shape));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, out_dtype, x.device()));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<2> strided,
      Coalesce<2>(shape, {&out.strides(), &x_view.strides()}, name));
  return LaunchInto(out, name, [&](cudaStream_t stream) {
    return LaunchBinaryScalar(op, ToScalarType(x.dtype()), x_view.raw_data(),
                              scalar.raw_data(), scalar_first, out.raw_data(),
                              strided, out.numel(), stream);
  });
}

// Where(cond, a, b) over `shape` with exactly one of a and b a host scalar
// (IsHostScalar), passed by value; cond and the other on `device`.
absl::StatusOr<Tensor> WhereWithScalar(const Tensor& cond, const Tensor& a,
                                       const Tensor& b, const Shape& shape,
                                       Device device) {
  const bool scalar_is_a = IsHostScalar(a);
  const Tensor& scalar = scalar_is_a ? a : b;
  DT_ASSIGN_OR_RETURN(
      const Tensor x,
      OnDevice(scalar_is_a ? b : a, device, "Where", scalar_is_a ? "b" : "a"));
  DT_ASSIGN_OR_RETURN(const Tensor cond_view, cond.Expand(shape));
  DT_ASSIGN_OR_RETURN(const Tensor x_view, x.Expand(shape));
  DT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, a.dtype(), device));
  DT_ASSIGN_OR_RETURN(
      const StridedShape<3> strided,
      Coalesce<3>(shape,
                  {&out.strides(), &cond_view.strides(), &x_view.strides()},
                  "Where"));
  return LaunchInto(out, "Where", [&](cudaStream_t stream) {
    return LaunchWhereScalar(ToScalarType(a.dtype()),
                             static_cast<const bool*>(cond_view.raw_data()),
                             x_view.raw_data(), scalar.raw_data(), scalar_is_a,
                             out.raw_data(), strided, out.numel(), stream);
  });
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
  // One of a and b is on the device: the other may be a host scalar.
  const bool a_scalar = IsHostScalar(a_in);
  const bool b_scalar = IsHostScalar(b_in);
  DT_ASSIGN_OR_RETURN(const Tensor a,
                      a_scalar ? a_in : OnDevice(a_in, device, name, "a"));
  DT_ASSIGN_OR_RETURN(const Tensor b,
                      b_scalar ? b_in : OnDevice(b_in, device, name, "b"));
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
  const DType out_dtype = IsComparison(op) ? DType::kBool : a.dtype();
  if (a_scalar || b_scalar) {
    return BinaryWithScalar(op, name, a_scalar ? b : a, a_scalar ? a : b,
                            a_scalar, *shape, out_dtype);
  }
  DT_ASSIGN_OR_RETURN(const Tensor a_view, a.Expand(*shape));
  DT_ASSIGN_OR_RETURN(const Tensor b_view, b.Expand(*shape));
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
  if (IsHostScalar(a_in) != IsHostScalar(b_in)) {
    return WhereWithScalar(cond, a_in, b_in, shape, device);
  }
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
