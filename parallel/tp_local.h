#ifndef DTENSOR_PARALLEL_TP_LOCAL_H_
#define DTENSOR_PARALLEL_TP_LOCAL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/placement.h"

namespace dtensor {
namespace parallel {

// The tp-local form of an activation, what a style with use_local_output
// hands on (dtensor/parallel/plan.h): the rank's shard along the
// tensor-parallel mesh dim `tp`, still a DTensor over the other mesh dims. It
// lives on the tp-local mesh of the rank: the mesh with dim `tp` cut down to
// the rank's own coordinate (size 1; names, order and the other dims
// unchanged), so that a sharding keeps one placement per mesh dim and `tp`
// keeps its index. Ops run on it like on any DTensor; its global shape is the
// tp shard's.

// The tp-local mesh of `rank`: mesh.PinnedAt(tp, rank), computed once per
// mesh and tp coordinate.
// Errors: `rank` not in `mesh` (NotFound), `tp` not a dim of it.
absl::StatusOr<DeviceMesh> TpLocalMesh(const DeviceMesh& mesh, int64_t tp,
                                       int64_t rank);

// Whether `x` lives on the tp-local mesh of its rank for `mesh`.
bool IsTpLocal(const DTensor& x, const DeviceMesh& mesh, int64_t tp);

// x's tp-local value: the same local data, on TpLocalMesh, placed as x on the
// other mesh dims and Replicate on `tp`; a dim that `tp` shards takes the
// size of the rank's block. No communication. Recorded by an active
// GradientTape (the gradient comes back to x's sharding, a Partial as
// Replicate).
// Errors: `tp` not a mesh dim of x, x Partial on `tp` (a term is no tp-local
// value), or the tensor dim that `tp` shards also sharded by another mesh dim
// (InvalidArgument naming the sharding).
absl::StatusOr<DTensor> ToTpLocal(const DTensor& x, int64_t tp);

// The inverse, like PyTorch's DTensor.from_local on the tp group: wraps the
// tp-local `local` onto `mesh` with `placement` on `tp` (the other mesh dims
// as in `local`). Shard(d) takes every tp rank to hold an equal block (global
// size = local size x tp size; FromLocal's check rejects another split);
// Replicate and Partial take the local value as the replica or this rank's
// term. No communication. Recorded like ToTpLocal.
// Errors: (InvalidArgument) `local` not on the tp-local mesh of its rank, a
// shard dim out of range or already sharded by another mesh dim.
absl::StatusOr<DTensor> FromTpLocal(const DTensor& local,
                                    const DeviceMesh& mesh, int64_t tp,
                                    const Placement& placement);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_TP_LOCAL_H_
