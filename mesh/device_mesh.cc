#include "dtensor/mesh/device_mesh.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/mesh/layout.h"

namespace dtensor {
namespace {

// Meshes are materialised (rank lists, groups): cap them far above any real
// cluster so that absurd sizes are an error, not an allocation failure.
constexpr int64_t kMaxRanks = int64_t{1} << 24;

IntTuple TupleOf(absl::Span<const int64_t> values) {
  return IntTuple(std::vector<IntTuple>(values.begin(), values.end()));
}

std::vector<int64_t> Reversed(absl::Span<const int64_t> values) {
  return std::vector<int64_t>(values.rbegin(), values.rend());
}

std::string Bracketed(absl::Span<const int64_t> values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

// Errors for an empty or repeated name.
absl::Status CheckDimNames(absl::Span<const std::string> names) {
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : names) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim names must not be empty: [",
                       absl::StrJoin(names, ", "), "]"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim name '", name, "' is repeated in [",
                       absl::StrJoin(names, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

// Errors for a dim out of [0, ndim) or repeated.
absl::Status CheckDims(absl::Span<const int64_t> dims, int64_t ndim) {
  std::vector<bool> seen(ndim, false);
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= ndim) {
      return absl::OutOfRangeError(absl::StrCat(
          "mesh dim ", dim, " is out of range for a mesh of ", ndim, " dims"));
    }
    if (seen[dim]) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim ", dim, " is repeated in ", Bracketed(dims)));
    }
    seen[dim] = true;
  }
  return absl::OkStatus();
}

// The dims of `mesh` not in `dims`, ascending.
std::vector<int64_t> OtherDims(int64_t ndim, absl::Span<const int64_t> dims) {
  std::vector<int64_t> others;
  for (int64_t d = 0; d < ndim; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      others.push_back(d);
    }
  }
  return others;
}

absl::StatusOr<std::vector<int64_t>> DimIndices(
    const DeviceMesh& mesh, absl::Span<const std::string> names) {
  std::vector<int64_t> dims;
  for (const std::string& name : names) {
    DT_ASSIGN_OR_RETURN(const int64_t dim, mesh.DimIndex(name));
    dims.push_back(dim);
  }
  DT_RETURN_IF_ERROR(CheckDims(dims, mesh.ndim()));
  return dims;
}

}  // namespace

// At most one entry per (dim, coordinate): sum of the dim sizes in all.
class DeviceMesh::SubMeshCache {
 public:
  // The cached mesh for `key`, computing and storing it on the first call.
  // Errors are not cached (they are cheap to recompute).
  template <typename Compute>
  absl::StatusOr<DeviceMesh> GetOrCompute(std::pair<int64_t, int64_t> key,
                                          Compute compute) {
    {
      MutexLock lock(&mutex_);
      const auto it = pinned_.find(key);
      if (it != pinned_.end()) return it->second;
    }
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, compute());
    MutexLock lock(&mutex_);
    return pinned_.try_emplace(key, std::move(mesh)).first->second;
  }

 private:
  Mutex mutex_;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, DeviceMesh> pinned_
      ABSL_GUARDED_BY(mutex_);
};

DeviceMesh::DeviceMesh(Layout layout, std::vector<std::string> dim_names,
                       std::shared_ptr<const std::vector<int64_t>> ranks)
    : layout_(std::move(layout)),
      dim_names_(std::move(dim_names)),
      ranks_(std::move(ranks)),
      cache_(std::make_shared<SubMeshCache>()) {}

absl::StatusOr<DeviceMesh> DeviceMesh::Create(
    std::vector<int64_t> shape, std::vector<std::string> dim_names,
    std::vector<int64_t> ranks) {
  int64_t count = 1;
  for (int64_t size : shape) {
    if (size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape ", Bracketed(shape), " has a size < 1"));
    }
    if (__builtin_mul_overflow(count, size, &count) || count > kMaxRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape ", Bracketed(shape), " has more than ",
                       kMaxRanks, " ranks"));
    }
  }
  if (dim_names.empty()) {
    for (size_t d = 0; d < shape.size(); ++d) {
      dim_names.push_back(absl::StrCat("d", d));
    }
  }
  if (dim_names.size() != shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh shape ", Bracketed(shape), " has ", shape.size(), " dims but ",
        dim_names.size(), " names: [", absl::StrJoin(dim_names, ", "), "]"));
  }
  DT_RETURN_IF_ERROR(CheckDimNames(dim_names));
  if (ranks.empty()) {
    for (int64_t r = 0; r < count; ++r) ranks.push_back(r);
  }
  if (static_cast<int64_t>(ranks.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh shape ", Bracketed(shape), " holds ", count,
                     " ranks, not the ", ranks.size(), " listed"));
  }
  absl::flat_hash_set<int64_t> seen;
  for (int64_t rank : ranks) {
    if (rank < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh rank ", rank, " is negative"));
    }
    if (!seen.insert(rank).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh rank ", rank, " is listed twice"));
    }
  }
  DT_ASSIGN_OR_RETURN(Layout layout, Layout::RowMajor(TupleOf(shape)));
  return DeviceMesh(
      std::move(layout), std::move(dim_names),
      std::make_shared<const std::vector<int64_t>>(std::move(ranks)));
}

int64_t DeviceMesh::ndim() const {
  return static_cast<int64_t>(dim_names_.size());
}

const std::vector<int64_t>& DeviceMesh::rank_list() const {
  static const std::vector<int64_t>* const kNone = new std::vector<int64_t>();
  return ranks_ == nullptr ? *kNone : *ranks_;
}

int64_t DeviceMesh::size() const {
  return static_cast<int64_t>(rank_list().size());
}

std::vector<int64_t> DeviceMesh::shape() const {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < ndim(); ++d) shape.push_back(size(d));
  return shape;
}

int64_t DeviceMesh::size(int64_t dim) const {
  absl::StatusOr<Layout> mode = layout_.Mode(dim);
  return mode.ok() ? mode->size() : 0;
}

absl::StatusOr<int64_t> DeviceMesh::DimIndex(std::string_view name) const {
  for (int64_t d = 0; d < ndim(); ++d) {
    if (dim_names_[d] == name) return d;
  }
  return absl::NotFoundError(
      absl::StrCat("no mesh dim named '", std::string(name), "'; dims: [",
                   absl::StrJoin(dim_names_, ", "), "]"));
}

bool DeviceMesh::Contains(int64_t rank) const {
  const std::vector<int64_t>& ranks = rank_list();
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

absl::StatusOr<std::vector<int64_t>> DeviceMesh::CoordinateOf(
    int64_t rank) const {
  const std::vector<int64_t>& ranks = rank_list();
  // Most meshes list 0..n-1 in order: rank r at position r, found at once.
  const auto it = rank >= 0 && rank < size() && ranks[rank] == rank
                      ? ranks.begin() + rank
                      : std::find(ranks.begin(), ranks.end(), rank);
  if (it == ranks.end()) {
    return absl::NotFoundError(
        absl::StrCat("rank ", rank, " is not in ", ToString()));
  }
  // The layout is a bijection onto the rank-list positions: its right
  // inverse maps a position back to the linear coordinate, which the
  // column-major layout of the shape splits into one coordinate per dim.
  const int64_t linear = RightInverse(layout_)(it - ranks.begin());
  DT_ASSIGN_OR_RETURN(const Layout dims, Layout::ColumnMajor(TupleOf(shape())));
  DT_ASSIGN_OR_RETURN(const IntTuple coordinate, dims.Coordinate(linear));
  std::vector<int64_t> result;
  for (const IntTuple& c : coordinate.elements()) result.push_back(c.value());
  return result;
}

absl::StatusOr<int64_t> DeviceMesh::RankAt(
    absl::Span<const int64_t> coordinate) const {
  const std::vector<int64_t> sizes = shape();
  bool in_range = coordinate.size() == sizes.size();
  for (size_t d = 0; in_range && d < sizes.size(); ++d) {
    in_range = coordinate[d] >= 0 && coordinate[d] < sizes[d];
  }
  if (!in_range) {
    return absl::OutOfRangeError(
        absl::StrCat("coordinate ", Bracketed(coordinate),
                     " is not in mesh shape ", Bracketed(sizes)));
  }
  DT_ASSIGN_OR_RETURN(const int64_t position,
                      layout_.Index(TupleOf(coordinate)));
  return rank_list()[position];
}

std::vector<int64_t> DeviceMesh::Ranks() const {
  std::vector<int64_t> all_dims(ndim());
  for (int64_t d = 0; d < ndim(); ++d) all_dims[d] = d;
  // Colexicographic over the reversed dims is row-major over the dims.
  const Layout row_major = *layout_.Select(Reversed(all_dims));
  const std::vector<int64_t>& listed = rank_list();
  std::vector<int64_t> ranks;
  ranks.reserve(listed.size());
  for (int64_t i = 0; i < size(); ++i) ranks.push_back(listed[row_major(i)]);
  return ranks;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> DeviceMesh::Groups(
    absl::Span<const int64_t> dims) const {
  DT_RETURN_IF_ERROR(CheckDims(dims, ndim()));
  // A group is the sub-layout of `dims` offset by a coordinate of the other
  // dims; both enumerated row-major by selecting the modes reversed.
  DT_ASSIGN_OR_RETURN(const Layout along, layout_.Select(Reversed(dims)));
  DT_ASSIGN_OR_RETURN(const Layout across,
                      layout_.Select(Reversed(OtherDims(ndim(), dims))));
  std::vector<std::vector<int64_t>> groups(across.size());
  for (int64_t j = 0; j < across.size(); ++j) {
    const int64_t offset = across(j);
    for (int64_t i = 0; i < along.size(); ++i) {
      groups[j].push_back(rank_list()[offset + along(i)]);
    }
  }
  return groups;
}

absl::StatusOr<std::vector<int64_t>> DeviceMesh::GroupOf(
    int64_t rank, absl::Span<const int64_t> dims) const {
  DT_RETURN_IF_ERROR(CheckDims(dims, ndim()));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coordinate, CoordinateOf(rank));
  for (int64_t dim : dims) coordinate[dim] = 0;
  DT_ASSIGN_OR_RETURN(const int64_t offset, layout_.Index(TupleOf(coordinate)));
  DT_ASSIGN_OR_RETURN(const Layout along, layout_.Select(Reversed(dims)));
  std::vector<int64_t> group;
  for (int64_t i = 0; i < along.size(); ++i) {
    group.push_back(rank_list()[offset + along(i)]);
  }
  return group;
}

absl::StatusOr<DeviceMesh> DeviceMesh::Slice(
    int64_t rank, absl::Span<const std::string> names) const {
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                      DimIndices(*this, names));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> group, GroupOf(rank, dims));
  std::vector<int64_t> sizes;
  for (int64_t dim : dims) sizes.push_back(size(dim));
  return Create(std::move(sizes),
                std::vector<std::string>(names.begin(), names.end()),
                std::move(group));
}

absl::StatusOr<DeviceMesh> DeviceMesh::PinnedAt(int64_t dim,
                                                int64_t rank) const {
  if (dim < 0 || dim >= ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh dim ", dim, " is not a dim of ", ToString()));
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> mine, CoordinateOf(rank));
  const int64_t coordinate = mine[dim];
  if (cache_ == nullptr)
    return ComputePinnedAt(dim, coordinate);  // Moved from.
  return cache_->GetOrCompute({dim, coordinate},
                              [&] { return ComputePinnedAt(dim, coordinate); });
}

absl::StatusOr<DeviceMesh> DeviceMesh::ComputePinnedAt(
    int64_t dim, int64_t coordinate) const {
  std::vector<int64_t> pinned_shape = shape();
  pinned_shape[dim] = 1;
  // Row-major over the other dims, the coordinate along `dim` fixed.
  std::vector<int64_t> ranks;
  std::vector<int64_t> coord(pinned_shape.size(), 0);
  coord[dim] = coordinate;
  while (true) {
    DT_ASSIGN_OR_RETURN(int64_t r, RankAt(coord));
    ranks.push_back(r);
    int64_t d = static_cast<int64_t>(pinned_shape.size()) - 1;
    for (; d >= 0; --d) {
      if (d == dim) continue;
      if (++coord[d] < pinned_shape[d]) break;
      coord[d] = 0;
    }
    if (d < 0) break;
  }
  return Create(std::move(pinned_shape), dim_names_, std::move(ranks));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Flatten(
    absl::Span<const std::string> names, std::string new_name) const {
  if (names.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no mesh dims to flatten into '", new_name, "'"));
  }
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                      DimIndices(*this, names));
  // One mode, row-major over `dims`: the colexicographic order of the
  // reversed modes, coalesced. Non-adjacent dims stay a hierarchical mode.
  DT_ASSIGN_OR_RETURN(const Layout selected, layout_.Select(Reversed(dims)));
  const Layout merged = Coalesce(selected);
  std::vector<Layout> modes;
  std::vector<std::string> new_names;
  for (int64_t d = 0; d < ndim(); ++d) {
    if (d == dims[0]) {
      modes.push_back(merged);
      new_names.push_back(new_name);
    } else if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      DT_ASSIGN_OR_RETURN(Layout mode, layout_.Mode(d));
      modes.push_back(std::move(mode));
      new_names.push_back(dim_names_[d]);
    }
  }
  DT_RETURN_IF_ERROR(CheckDimNames(new_names));
  DT_ASSIGN_OR_RETURN(Layout layout, Layout::Concat(modes));
  return DeviceMesh(std::move(layout), std::move(new_names), ranks_);
}

absl::StatusOr<DeviceMesh> DeviceMesh::Unflatten(
    std::string_view name, absl::Span<const int64_t> sizes,
    absl::Span<const std::string> names) const {
  DT_ASSIGN_OR_RETURN(const int64_t dim, DimIndex(name));
  if (sizes.empty() || sizes.size() != names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot unflatten mesh dim '", std::string(name), "' into sizes ",
        Bracketed(sizes), " named [", absl::StrJoin(names, ", "), "]"));
  }
  int64_t product = 1;
  for (int64_t s : sizes) {
    if (s < 1 || __builtin_mul_overflow(product, s, &product) ||
        product > size(dim)) {
      product = -1;
      break;
    }
  }
  if (product != size(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sizes ", Bracketed(sizes), " do not multiply to the size ", size(dim),
        " of mesh dim '", std::string(name), "'"));
  }
  std::vector<std::string> new_names;
  std::vector<int64_t> new_shape;
  for (int64_t d = 0; d < ndim(); ++d) {
    if (d == dim) {
      new_names.insert(new_names.end(), names.begin(), names.end());
      new_shape.insert(new_shape.end(), sizes.begin(), sizes.end());
    } else {
      new_names.push_back(dim_names_[d]);
      new_shape.push_back(size(d));
    }
  }
  DT_RETURN_IF_ERROR(CheckDimNames(new_names));
  // The new dims index the old mode row-major: compose it with the row-major
  // layout of `sizes`, which splits it into one mode per new dim.
  DT_ASSIGN_OR_RETURN(const Layout mode, layout_.Mode(dim));
  DT_ASSIGN_OR_RETURN(const Layout split, Layout::RowMajor(TupleOf(sizes)));
  absl::StatusOr<Layout> parts = Composition(mode, split);
  if (!parts.ok()) {
    // The split of a hierarchical mode need not be a layout; row-major order
    // over all coordinates is the same before and after, so list the ranks
    // in it instead.
    return Create(std::move(new_shape), std::move(new_names), Ranks());
  }
  std::vector<Layout> modes;
  for (int64_t d = 0; d < ndim(); ++d) {
    for (int64_t k = 0; k < (d == dim ? parts->rank() : 1); ++k) {
      DT_ASSIGN_OR_RETURN(Layout part,
                          d == dim ? parts->Mode(k) : layout_.Mode(d));
      modes.push_back(std::move(part));
    }
  }
  DT_ASSIGN_OR_RETURN(Layout layout, Layout::Concat(modes));
  return DeviceMesh(std::move(layout), std::move(new_names), ranks_);
}

std::string DeviceMesh::ToString() const {
  std::vector<std::string> dims;
  for (int64_t d = 0; d < ndim(); ++d) {
    dims.push_back(absl::StrCat(dim_names_[d], "=", size(d)));
  }
  const std::vector<int64_t> ranks = Ranks();
  // Meshes of thousands of ranks print in a line: 0..n-1 in order is the
  // common case, and a long list is cut in the middle.
  std::string listed;
  bool arange = true;
  for (size_t i = 0; i < ranks.size(); ++i) {
    arange = arange && ranks[i] == static_cast<int64_t>(i);
  }
  if (ranks.size() <= kMaxListedRanks) {
    listed = Bracketed(ranks);
  } else if (arange) {
    listed = absl::StrCat("0..", ranks.size() - 1);
  } else {
    listed = absl::StrCat(
        "[",
        absl::StrJoin(ranks.begin(), ranks.begin() + kMaxListedRanks / 2, ", "),
        ", ..., ",
        absl::StrJoin(ranks.end() - kMaxListedRanks / 2, ranks.end(), ", "),
        "]");
  }
  return absl::StrCat("DeviceMesh((", absl::StrJoin(dims, ", "),
                      "), ranks=", listed, ")");
}

std::pair<int64_t, int64_t> DeviceMesh::CornerRanks() const {
  if (size() == 0) return {-1, -1};  // Moved from.
  std::vector<int64_t> last = shape();
  for (int64_t& coordinate : last) --coordinate;
  return {*RankAt(std::vector<int64_t>(ndim(), 0)), *RankAt(last)};
}

bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
  if (a.dim_names_ != b.dim_names_ || a.shape() != b.shape()) return false;
  // The same rank list under the same layout: the same rank everywhere.
  if (a.ranks_ == b.ranks_ && a.layout_ == b.layout_) return true;
  return a.Ranks() == b.Ranks();
}

}  // namespace dtensor
