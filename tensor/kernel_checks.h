#ifndef DTENSOR_TENSOR_KERNEL_CHECKS_H_
#define DTENSOR_TENSOR_KERNEL_CHECKS_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/tensor.h"

// Argument checks shared by the CPU kernels of matmul, nn_functional and
// indexing.
// Errors: (every check) InvalidArgument naming the op, the argument and the
// offending value.
namespace dtensor::internal {

// `t` is defined and on the CPU.
absl::Status CheckCpu(const Tensor& t, absl::string_view op,
                      absl::string_view arg);
// `t` is defined, on the CPU and of a floating dtype.
absl::Status CheckFloatingCpu(const Tensor& t, absl::string_view op,
                              absl::string_view arg);
// `t` is defined and on `device` (the other operands', for kernels that also
// run on CUDA devices; on the CPU, CheckCpu).
absl::Status CheckOn(const Tensor& t, Device device, absl::string_view op,
                     absl::string_view arg);
// `t` has a floating dtype (f32, f64, bf16, f16).
absl::Status CheckFloatingDType(const Tensor& t, absl::string_view op,
                                absl::string_view arg);
// CheckOn and CheckFloatingDType.
absl::Status CheckFloatingOn(const Tensor& t, Device device,
                             absl::string_view op, absl::string_view arg);
// `a` and `b` have the same dtype.
absl::Status CheckSameDType(const Tensor& a, const Tensor& b,
                            absl::string_view op, absl::string_view arg_a,
                            absl::string_view arg_b);
// `index` is a defined i32 or i64 tensor; returns its elements in row-major
// order (copied to the host when `index` is on a device).
absl::StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& index,
                                                 absl::string_view op,
                                                 absl::string_view arg);
// `index` lies in [0, bound).
absl::Status CheckIndexInRange(int64_t index, int64_t bound,
                               absl::string_view op);
// Cross entropy's shapes (any device): `logits` [N, C] with `target` [N], or
// [C] with a 0-d `target`.
absl::Status CheckCrossEntropyShapes(const Tensor& logits,
                                     const Tensor& target);
// The input of a normalization over the last dim (any device): a defined
// floating `x` of at least 1 dim.
absl::Status CheckNormInput(const Tensor& x, absl::string_view op);
// `t` (named `arg`) is floating and of x's shape, dtype and device: a
// second row operand of a normalization (a gradient, a residual).
absl::Status CheckLikeNormInput(const Tensor& x, const Tensor& t,
                                absl::string_view op, absl::string_view arg);
// A norm's optional per-feature `param`: undefined, or [last dim of x] of x's
// dtype on x's device.
absl::Status CheckNormParam(const Tensor& x, const Tensor& param,
                            absl::string_view op, absl::string_view arg);
// Every target is `ignore_index` or a class in [0, classes).
absl::Status CheckCrossEntropyTargets(absl::Span<const int64_t> targets,
                                      int64_t classes, int64_t ignore_index);

// DispatchDType for a dtype already checked to be floating: `fn` is only
// instantiated for float, double, BFloat16 and Half.
// Requires: IsFloatingPoint(dtype) (debug-checked).
template <typename Fn>
decltype(auto) DispatchFloatingDType(DType dtype, Fn&& fn) {
  DT_DCHECK(IsFloatingPoint(dtype));
  return DispatchDType(dtype, [&fn](auto tag) -> decltype(auto) {
    if constexpr (std::is_floating_point_v<ComputeType<decltype(tag)>>) {
      return fn(tag);
    } else {
      return fn(float{});  // Unreachable for a checked dtype.
    }
  });
}

}  // namespace dtensor::internal

#endif  // DTENSOR_TENSOR_KERNEL_CHECKS_H_
