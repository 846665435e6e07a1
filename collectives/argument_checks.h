#ifndef DTENSOR_COLLECTIVES_ARGUMENT_CHECKS_H_
#define DTENSOR_COLLECTIVES_ARGUMENT_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/reduce_op.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Checks of collective arguments shared by the communicator and the
// backends.
// Errors: (every check) InvalidArgument whose message starts with the op
// ("all_gather: ...") and names the bad value.

// "f32[4, 8]", or "none" for an undefined tensor.
std::string TensorText(const Tensor& tensor);

// `tensor` (called `name` in messages) is defined and on `device`.
absl::Status CheckTensor(const Tensor& tensor, absl::string_view name,
                         Device device, absl::string_view op);

// `a` and `b` have the same dtype.
absl::Status CheckSameDType(const Tensor& a, const Tensor& b,
                            absl::string_view op);

// `tensor` (called `name`) has shape `expected`.
absl::Status CheckShape(const Tensor& tensor,
                        absl::Span<const int64_t> expected,
                        absl::string_view name, absl::string_view op);

// `reduce` applies to `dtype` (kAvg needs a floating dtype).
absl::Status CheckReduceDType(ReduceOp reduce, DType dtype,
                              absl::string_view op);

// `rank` is a group rank of a group of `size` (called `name`).
absl::Status CheckGroupRank(int64_t rank, int64_t size, absl::string_view name,
                            absl::string_view op);

// When input and output share storage, neither may overlap the other; only
// contiguous pairs are checked (interleaved strided views are allowed).
absl::Status CheckDisjoint(const Tensor& input, const Tensor& output,
                           absl::string_view op);

// `dim` normalized for a tensor of `ndim` dims (collectives need ndim >= 1).
absl::StatusOr<int64_t> NormalizeCollectiveDim(int64_t dim, int64_t ndim,
                                               absl::string_view op);

// One piece size per rank: `sizes` when given (`group_size` entries, none
// negative), else `group_size` copies of `equal_size`.
absl::StatusOr<std::vector<int64_t>> CompletePieceSizes(
    absl::Span<const int64_t> sizes, int64_t group_size, int64_t equal_size,
    absl::string_view op);

// `group_size` equal pieces of `total`, or an error when they do not divide
// it (naming `total` and the group size).
absl::StatusOr<std::vector<int64_t>> EqualPieceSizes(int64_t total,
                                                     int64_t group_size,
                                                     absl::string_view op);

// The pieces `total` splits into over `group_size` ranks: `sizes` when given
// (as CompletePieceSizes checks them), else EqualPieceSizes. The sum of
// given sizes is not checked against `total`.
absl::StatusOr<std::vector<int64_t>> SplitPieceSizes(
    absl::Span<const int64_t> sizes, int64_t total, int64_t group_size,
    absl::string_view op);

int64_t SumOf(absl::Span<const int64_t> sizes);
// Whether all pieces have one size (then a transport's even collective
// serves; uneven pieces take its "v" form or single transfers).
bool AllEqual(absl::Span<const int64_t> sizes);
// The offset of piece `index`: the sum of the sizes before it.
int64_t OffsetOf(absl::Span<const int64_t> sizes, int64_t index);

// `shape` with dim `dim` set to `size`.
Shape WithDimSize(absl::Span<const int64_t> shape, int64_t dim, int64_t size);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_ARGUMENT_CHECKS_H_
