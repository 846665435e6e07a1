#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_PIECE_GEOMETRY_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_PIECE_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Where a collective's pieces along a dim lie in memory. Transports move
// flat byte ranges; the pieces are such ranges only when the tensor is
// contiguous and every dim before `dim` has size 1 (otherwise a backend
// stages them). Any device.

// The elements of one index along `dim`: the product of the other dims.
int64_t ElementsPerIndex(absl::Span<const int64_t> shape, int64_t dim);

// Whether `tensor`'s pieces along `dim` are consecutive ranges of its
// memory, in order.
bool PiecesAreRanges(const Tensor& tensor, int64_t dim);

// A contiguous 1-d tensor for `tensor`'s pieces along `dim`, one after
// another: `tensor` itself (a 1-d view) when they are ranges of its memory,
// else a new scratch tensor on its device; undefined for an undefined
// `tensor`.
absl::StatusOr<Tensor> PackedBuffer(const Tensor& tensor, int64_t dim);

// The byte size of each piece of `sizes` along `dim` of `tensor`.
std::vector<int64_t> PieceBytes(const Tensor& tensor, int64_t dim,
                                absl::Span<const int64_t> sizes);

// Pairs each non-empty piece of `tensor` along `dim` (of `sizes`) with its
// row-major view in `packed`, a 1-d tensor of the same dtype and device
// where the pieces lie one after another, and calls `fn(piece, view)`;
// stops at the first error. The staging of packed collectives.
absl::Status ForEachPackedPiece(
    const Tensor& packed, const Tensor& tensor, int64_t dim,
    absl::Span<const int64_t> sizes,
    absl::FunctionRef<absl::Status(const Tensor& piece, const Tensor& view)>
        fn);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_PIECE_GEOMETRY_H_
