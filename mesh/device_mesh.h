#ifndef DTENSOR_MESH_DEVICE_MESH_H_
#define DTENSOR_MESH_DEVICE_MESH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/mesh/layout.h"

namespace dtensor {

// An n-d array of ranks with named dims.
//
// A mesh is a rank list plus a Layout with one (possibly hierarchical) mode
// per mesh dim, mapping a mesh coordinate to a position in the rank list.
// Row-major over the given shape by default; flattening non-adjacent dims
// produces hierarchical modes, which is why this is a Layout and not a plain
// shape. A DeviceMesh is an immutable value: every operation returns a new one.
class DeviceMesh {
 public:
  // `dim_names` defaults to "d0", "d1", ...; `ranks` to 0..N-1 (row-major
  // over `shape`). Errors: a size < 1, sizes that do not multiply out to the
  // number of ranks, a rank listed twice or negative, a name empty or repeated,
  // a name count that differs from the dim count.
  static absl::StatusOr<DeviceMesh> Create(
      std::vector<int64_t> shape, std::vector<std::string> dim_names = {},
      std::vector<int64_t> ranks = {});

  int64_t ndim() const;
  // Number of ranks.
  int64_t size() const;
  std::vector<int64_t> shape() const;
  int64_t size(int64_t dim) const;
  const std::vector<std::string>& dim_names() const { return dim_names_; }
  // Index of the dim called `name`, or NotFound naming it and the known names.
  absl::StatusOr<int64_t> DimIndex(std::string_view name) const;
  // The rank list in the order of layout positions (shared by the mesh's
  // copies and the meshes derived from it that keep its ranks).
  const std::vector<int64_t>& rank_list() const;
  // The coordinate -> rank-list-position map, one mode per mesh dim.
  const Layout& layout() const { return layout_; }

  bool Contains(int64_t rank) const;
  // The mesh coordinate of `rank`.
  // Errors: `rank` not in the mesh (NotFound).
  absl::StatusOr<std::vector<int64_t>> CoordinateOf(int64_t rank) const;
  // The rank at `coordinate`.
  // Errors: a coordinate of the wrong length or out of range (OutOfRange).
  absl::StatusOr<int64_t> RankAt(absl::Span<const int64_t> coordinate) const;
  // All ranks, ordered row-major over mesh coordinates.
  std::vector<int64_t> Ranks() const;

  // The rank groups along `dims` (one group per coordinate of the other dims,
  // groups ordered row-major over the other dims, each group ordered row-major
  // over `dims` in the order given).
  absl::StatusOr<std::vector<std::vector<int64_t>>> Groups(
      absl::Span<const int64_t> dims) const;
  // The group along `dims` that contains `rank`.
  absl::StatusOr<std::vector<int64_t>> GroupOf(
      int64_t rank, absl::Span<const int64_t> dims) const;

  // The sub-mesh over `names` that contains `rank` (the ranks sharing its
  // coordinates on all other dims), dims in the order named.
  absl::StatusOr<DeviceMesh> Slice(int64_t rank,
                                   absl::Span<const std::string> names) const;
  // The sub-mesh that keeps only `rank`'s coordinate along `dim`: size 1
  // there, names, order and the other dims unchanged (ranks row-major over the
  // other dims). Tensor parallelism's tp-local mesh
  // (dtensor/parallel/tp_local.h). Cached per (dim, coordinate) on this mesh
  // and its copies, so that a forward pass asks for it without rebuilding it;
  // safe to call from several threads (ranks are threads) at once. Errors:
  // `dim` not in [0, ndim()) (InvalidArgument), `rank` not in the mesh
  // (NotFound).
  absl::StatusOr<DeviceMesh> PinnedAt(int64_t dim, int64_t rank) const;
  // The mesh with the dims `names` merged into one dim called `new_name`
  // (ordered row-major over `names` in the order given), placed where the
  // first of them was. The dims need not be adjacent.
  absl::StatusOr<DeviceMesh> Flatten(absl::Span<const std::string> names,
                                     std::string new_name) const;
  // The mesh with dim `name` split into dims `names` of `sizes` (row-major),
  // in its place.
  // Errors: no dim `name`, sizes that do not multiply to the dim's size, a
  // name count other than the size count, a repeated or empty name.
  absl::StatusOr<DeviceMesh> Unflatten(
      std::string_view name, absl::Span<const int64_t> sizes,
      absl::Span<const std::string> names) const;

  // "DeviceMesh((dp=2, tp=4), ranks=[0, 1, 2, 3, 4, 5, 6, 7])". Beyond
  // kMaxListedRanks ranks: "ranks=0..511" when they are 0..n-1 in order, else
  // the first and last kMaxListedRanks / 2 around "...".
  std::string ToString() const;
  static constexpr size_t kMaxListedRanks = 16;

  // Two meshes are equal when they have the same names, shape and rank at
  // every coordinate. Copies (which share their rank list) compare in time
  // independent of the number of ranks.
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b);
  friend bool operator!=(const DeviceMesh& a, const DeviceMesh& b) {
    return !(a == b);
  }
  // Hashes the names, the shape and the first and last ranks (row-major):
  // equal meshes hash alike, in time independent of the number of ranks.
  template <typename H>
  friend H AbslHashValue(H h, const DeviceMesh& mesh) {
    return H::combine(std::move(h), mesh.dim_names_, mesh.shape(),
                      mesh.CornerRanks());
  }

 private:
  // Derived meshes computed once per mesh value (see PinnedAt).
  class SubMeshCache;

  DeviceMesh(Layout layout, std::vector<std::string> dim_names,
             std::shared_ptr<const std::vector<int64_t>> ranks);

  // The ranks at the first and the last coordinate (row-major).
  std::pair<int64_t, int64_t> CornerRanks() const;

  // PinnedAt without the cache.
  absl::StatusOr<DeviceMesh> ComputePinnedAt(int64_t dim,
                                             int64_t coordinate) const;

  Layout layout_;
  std::vector<std::string> dim_names_;
  // Immutable, so copies of a mesh (every DTensorSpec holds one) share it
  // instead of copying a list as long as the mesh. Null only when moved from.
  std::shared_ptr<const std::vector<int64_t>> ranks_;
  // Shared by copies: they describe the same mesh. Null only when moved from.
  std::shared_ptr<SubMeshCache> cache_;
};

}  // namespace dtensor

#endif  // DTENSOR_MESH_DEVICE_MESH_H_
