#include "tests/mesh/device_mesh_reference.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"

namespace dtensor::mesh_testing {

DeviceMesh Mesh(std::vector<int64_t> shape, std::vector<std::string> names,
                std::vector<int64_t> ranks) {
  absl::StatusOr<DeviceMesh> mesh =
      DeviceMesh::Create(std::move(shape), std::move(names), std::move(ranks));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  return count;
}

namespace {

std::vector<int64_t> RowMajorCoordinate(const std::vector<int64_t>& shape,
                                        int64_t index) {
  std::vector<int64_t> coordinate(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coordinate[d] = index % shape[d];
    index /= shape[d];
  }
  return coordinate;
}

int64_t RowMajorIndex(const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& coordinate) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    index = index * shape[d] + coordinate[d];
  }
  return index;
}

int64_t RefRankAt(const RefMesh& ref, const std::vector<int64_t>& coordinate) {
  return ref.ranks[RowMajorIndex(ref.shape, coordinate)];
}

std::vector<int64_t> RefCoordinateOf(const RefMesh& ref, int64_t rank) {
  const auto it = std::find(ref.ranks.begin(), ref.ranks.end(), rank);
  return RowMajorCoordinate(ref.shape, it - ref.ranks.begin());
}

std::vector<int64_t> SizesOf(const RefMesh& ref,
                             const std::vector<int64_t>& dims) {
  std::vector<int64_t> sizes;
  for (int64_t d : dims) sizes.push_back(ref.shape[d]);
  return sizes;
}

// `base` with the coordinates of `dims` set to row-major index `i` over them.
std::vector<int64_t> WithDims(const RefMesh& ref, std::vector<int64_t> base,
                              const std::vector<int64_t>& dims, int64_t i) {
  const std::vector<int64_t> sub = RowMajorCoordinate(SizesOf(ref, dims), i);
  for (size_t k = 0; k < dims.size(); ++k) base[dims[k]] = sub[k];
  return base;
}

std::vector<int64_t> RefOthers(const RefMesh& ref,
                               const std::vector<int64_t>& dims) {
  std::vector<int64_t> others;
  for (int64_t d = 0; d < static_cast<int64_t>(ref.shape.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      others.push_back(d);
    }
  }
  return others;
}

std::vector<int64_t> RefGroupAt(const RefMesh& ref,
                                const std::vector<int64_t>& base,
                                const std::vector<int64_t>& dims) {
  std::vector<int64_t> group;
  for (int64_t i = 0; i < Count(SizesOf(ref, dims)); ++i) {
    group.push_back(RefRankAt(ref, WithDims(ref, base, dims, i)));
  }
  return group;
}

Groups RefGroups(const RefMesh& ref, const std::vector<int64_t>& dims) {
  const std::vector<int64_t> others = RefOthers(ref, dims);
  Groups groups;
  for (int64_t j = 0; j < Count(SizesOf(ref, others)); ++j) {
    const std::vector<int64_t> base =
        WithDims(ref, std::vector<int64_t>(ref.shape.size(), 0), others, j);
    groups.push_back(RefGroupAt(ref, base, dims));
  }
  return groups;
}

}  // namespace

std::vector<int64_t> RefDims(const RefMesh& ref,
                             const std::vector<std::string>& names) {
  std::vector<int64_t> dims;
  for (const std::string& name : names) {
    dims.push_back(std::find(ref.names.begin(), ref.names.end(), name) -
                   ref.names.begin());
  }
  return dims;
}

// `ref` with `dim` cut down to `rank`'s coordinate (size 1).
RefMesh RefPinned(const RefMesh& ref, int64_t dim, int64_t rank) {
  std::vector<int64_t> shape = ref.shape;
  shape[dim] = 1;
  const int64_t mine = RefCoordinateOf(ref, rank)[dim];
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < Count(shape); ++i) {
    std::vector<int64_t> coordinate = RowMajorCoordinate(shape, i);
    coordinate[dim] = mine;
    ranks.push_back(RefRankAt(ref, coordinate));
  }
  return {shape, ref.names, ranks};
}

RefMesh RefSlice(const RefMesh& ref, int64_t rank,
                 const std::vector<std::string>& names) {
  const std::vector<int64_t> dims = RefDims(ref, names);
  return {SizesOf(ref, dims), names,
          RefGroupAt(ref, RefCoordinateOf(ref, rank), dims)};
}

// The merged dim sits where names[0] was; its index is row-major over names.
RefMesh RefFlatten(const RefMesh& ref, const std::vector<std::string>& names,
                   const std::string& new_name) {
  const std::vector<int64_t> dims = RefDims(ref, names);
  RefMesh out;
  std::vector<int64_t> kept;  // Old dim of each new dim, -1 for the merged.
  for (int64_t d = 0; d < static_cast<int64_t>(ref.shape.size()); ++d) {
    if (d == dims[0]) {
      out.shape.push_back(Count(SizesOf(ref, dims)));
      out.names.push_back(new_name);
      kept.push_back(-1);
    } else if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      out.shape.push_back(ref.shape[d]);
      out.names.push_back(ref.names[d]);
      kept.push_back(d);
    }
  }
  for (int64_t i = 0; i < Count(out.shape); ++i) {
    const std::vector<int64_t> c = RowMajorCoordinate(out.shape, i);
    std::vector<int64_t> old(ref.shape.size(), 0);
    for (size_t k = 0; k < kept.size(); ++k) {
      if (kept[k] >= 0) {
        old[kept[k]] = c[k];
      } else {
        old = WithDims(ref, old, dims, c[k]);
      }
    }
    out.ranks.push_back(RefRankAt(ref, old));
  }
  return out;
}

// Splitting a dim row-major keeps the row-major order of all coordinates.
RefMesh RefUnflatten(const RefMesh& ref, const std::string& name,
                     const std::vector<int64_t>& sizes,
                     const std::vector<std::string>& names) {
  const int64_t dim = RefDims(ref, {name})[0];
  RefMesh out = ref;
  out.shape.erase(out.shape.begin() + dim);
  out.shape.insert(out.shape.begin() + dim, sizes.begin(), sizes.end());
  out.names.erase(out.names.begin() + dim);
  out.names.insert(out.names.begin() + dim, names.begin(), names.end());
  return out;
}

namespace {

// Selections of distinct dims of an `ndim`-d mesh: every ordered one up to 4
// dims; beyond, every subset in ascending and in descending order.
std::vector<std::vector<int64_t>> DimSelections(int64_t ndim) {
  std::vector<std::vector<int64_t>> result = {{}};
  if (ndim > 4) {
    for (int64_t bits = 1; bits < (int64_t{1} << ndim); ++bits) {
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < ndim; ++d) {
        if (bits & (int64_t{1} << d)) dims.push_back(d);
      }
      result.push_back(dims);
      std::reverse(dims.begin(), dims.end());
      result.push_back(dims);
    }
    return result;
  }
  for (size_t begin = 0; begin < result.size(); ++begin) {
    for (int64_t d = 0; d < ndim; ++d) {
      std::vector<int64_t> next = result[begin];
      if (std::find(next.begin(), next.end(), d) != next.end()) continue;
      next.push_back(d);
      result.push_back(next);
    }
  }
  return result;
}

}  // namespace

void ExpectMatches(const DeviceMesh& mesh, const RefMesh& ref) {
  const std::string what = mesh.ToString();
  ASSERT_EQ(mesh.dim_names(), ref.names) << what;
  ASSERT_EQ(mesh.shape(), ref.shape) << what;
  ASSERT_EQ(mesh.ndim(), static_cast<int64_t>(ref.shape.size())) << what;
  ASSERT_EQ(mesh.size(), static_cast<int64_t>(ref.ranks.size())) << what;
  ASSERT_EQ(mesh.Ranks(), ref.ranks) << what;
  ASSERT_EQ(mesh.layout().rank(), mesh.ndim()) << what;
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    ASSERT_EQ(mesh.size(d), ref.shape[d]) << what;
    ASSERT_EQ(Ok(mesh.DimIndex(ref.names[d])), d) << what;
  }
  for (int64_t i = 0; i < Count(ref.shape); ++i) {
    const std::vector<int64_t> c = RowMajorCoordinate(ref.shape, i);
    ASSERT_EQ(Ok(mesh.RankAt(c)), ref.ranks[i]) << what;
    ASSERT_EQ(Ok(mesh.CoordinateOf(ref.ranks[i])), c) << what;
    ASSERT_TRUE(mesh.Contains(ref.ranks[i])) << what;
  }
  // Groups along every ordered selection of dims; GroupOf for a few ranks.
  for (const std::vector<int64_t>& dims : DimSelections(mesh.ndim())) {
    ASSERT_EQ(Ok(mesh.Groups(dims)), RefGroups(ref, dims))
        << what << " dims " << ::testing::PrintToString(dims);
    for (size_t k = 0; k < ref.ranks.size(); k += 1 + ref.ranks.size() / 3) {
      const int64_t rank = ref.ranks[k];
      ASSERT_EQ(Ok(mesh.GroupOf(rank, dims)),
                RefGroupAt(ref, RefCoordinateOf(ref, rank), dims))
          << what << " rank " << rank;
    }
  }
}

}  // namespace dtensor::mesh_testing
