#ifndef DTENSOR_TENSOR_ROTARY_TABLES_H_
#define DTENSOR_TENSOR_ROTARY_TABLES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The angle tables of the rotary embedding: entry [s, i] of `cos` and `sin`
// is the cosine and sine of position_s * theta^(-i / half), f64 [seq, half]
// (contiguous), on the device of the rotated tensor.
struct RotaryTables {
  Tensor cos;
  Tensor sin;
};

// At most this many runs of explicit positions use the cached tables.
inline constexpr int kMaxCachedRotaryRuns = 8;

// The tables of explicit `positions` on `device`, or with `inverse` the
// tables of the rotation back by minus those angles (sin negated). Positions
// made of at most kMaxCachedRotaryRuns runs of consecutive positions, each
// ascending from a position >= 0, are rows of CachedRotaryTables joined on
// `device`: no host work and no host-to-device copy once cached (context
// parallelism's balanced chunks are two runs per rank). Other positions get
// tables computed on the host and copied to a CUDA device (a copy that waits
// for its stream).
// Errors: what Tensor::To reports.
absl::StatusOr<RotaryTables> RotaryTablesOf(absl::Span<const int64_t> positions,
                                            int64_t half, double theta,
                                            bool inverse, Device device);

// The tables of positions first, ..., first + seq - 1 (with `inverse`, the
// rotation by minus those angles: sin negated, exactly as positions negated
// would give), rows [first, first + seq) of tables of the positions
// 0..first+seq-1 that are computed on the host once per (device, length,
// half, theta, inverse) and kept there for the rest of the process (a
// training step rotates by the same few tables every step: no host work, no
// copy, no wait for the stream). Thread-safe. The cached tensors are never
// freed (their device memory would outlive the CUDA context at exit).
// Requires: first >= 0, seq >= 0, half >= 0, theta > 0.
// Errors: what Tensor::To reports (a CUDA device without CUDA).
absl::StatusOr<RotaryTables> CachedRotaryTables(int64_t first, int64_t seq,
                                                int64_t half, double theta,
                                                bool inverse, Device device);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_ROTARY_TABLES_H_
