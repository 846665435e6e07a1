#ifndef DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_
#define DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/collectives/multiprocess/piece_geometry.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Staging of a collective's pieces on the CPU for transports that move flat
// byte ranges (piece_geometry.h): packed one after another (each row-major)
// into a contiguous buffer, or unpacked from one.

// `tensor`'s pieces along `dim` (of `sizes`), each row-major, one after
// another in a new contiguous 1-d tensor; `tensor` itself (as a 1-d view)
// when they already are ranges.
absl::StatusOr<Tensor> PackPieces(const Tensor& tensor, int64_t dim,
                                  absl::Span<const int64_t> sizes);

// Copies consecutive row-major pieces of `packed` into `tensor`'s pieces
// along `dim` (of `sizes`).
absl::Status UnpackPieces(const Tensor& packed, const Tensor& tensor,
                          int64_t dim, absl::Span<const int64_t> sizes);

// Where a collective writes `output`: `output` itself when it is
// contiguous, else a contiguous scratch tensor that Finish copies over.
class OutputStage {
 public:
  static absl::StatusOr<OutputStage> For(const Tensor& output);
  const Tensor& buffer() const { return buffer_; }
  // Copies the buffer into the output when they differ.
  absl::Status Finish() const;

 private:
  OutputStage(Tensor output, Tensor buffer)
      : output_(std::move(output)), buffer_(std::move(buffer)) {}
  Tensor output_;
  Tensor buffer_;
};

// `tensor` or a contiguous copy; ResourceExhausted when there is no memory
// for the copy.
absl::StatusOr<Tensor> ContiguousInput(const Tensor& tensor);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_PIECE_LAYOUT_H_
