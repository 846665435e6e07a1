// DeviceMesh against the spec's facts (row-major ranks) and, over random
// meshes up to 4-D, against a brute-force row-major reference written here.

#include "dtensor/mesh/device_mesh.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

DeviceMesh Mesh(std::vector<int64_t> shape, std::vector<std::string> names = {},
                std::vector<int64_t> ranks = {}) {
  absl::StatusOr<DeviceMesh> mesh =
      DeviceMesh::Create(std::move(shape), std::move(names), std::move(ranks));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

template <typename T>
T Ok(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

// ---------------------------------------------------------------------------
// The reference: a shape, names, and the rank at each row-major coordinate.

struct RefMesh {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> ranks;
};

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  return count;
}

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

// ---------------------------------------------------------------------------
// Facts from the spec.

TEST(DeviceMeshTest, TwoByFourGroups) {
  const DeviceMesh mesh = Mesh({2, 4});
  EXPECT_EQ(Ok(mesh.Groups({0})), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(Ok(mesh.Groups({1})), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(Ok(mesh.Groups({0, 1})), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(Ok(mesh.Groups({1, 0})), (Groups{{0, 4, 1, 5, 2, 6, 3, 7}}));
  EXPECT_EQ(Ok(mesh.Groups({})).size(), 8u);
  EXPECT_EQ(Ok(mesh.GroupOf(6, {0})), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(Ok(mesh.GroupOf(6, {1})), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(Ok(mesh.CoordinateOf(6)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ok(mesh.RankAt({1, 2})), 6);
  EXPECT_EQ(mesh.dim_names(), (std::vector<std::string>{"d0", "d1"}));
  EXPECT_EQ(mesh.layout().ToString(), "(2,4):(4,1)");
  EXPECT_EQ(mesh.ToString(),
            "DeviceMesh((d0=2, d1=4), ranks=[0, 1, 2, 3, 4, "
            "5, 6, 7])");
}

TEST(DeviceMeshTest, ToStringShortensLongRankLists) {
  EXPECT_EQ(Mesh({64, 8}, {"dp", "tp"}).ToString(),
            "DeviceMesh((dp=64, tp=8), ranks=0..511)");
  std::vector<int64_t> reversed(20);
  for (int64_t i = 0; i < 20; ++i) reversed[i] = 19 - i;
  const DeviceMesh mesh = Ok(DeviceMesh::Create({20}, {"x"}, reversed));
  EXPECT_EQ(mesh.ToString(),
            "DeviceMesh((x=20), ranks=[19, 18, 17, 16, 15, 14, 13, 12, ..., "
            "7, 6, 5, 4, 3, 2, 1, 0])");
  // 16 ranks are still listed.
  EXPECT_EQ(Mesh({16}, {"x"}).ToString(),
            "DeviceMesh((x=16), ranks=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, "
            "12, 13, 14, 15])");
}

TEST(DeviceMeshTest, FlattenAdjacentAndNonAdjacentDims) {
  const DeviceMesh mesh = Mesh({2, 2, 2}, {"dp", "cp", "tp"});
  const DeviceMesh dp_cp = Ok(mesh.Flatten({"dp", "cp"}, "dp_cp"));
  EXPECT_EQ(dp_cp.dim_names(), (std::vector<std::string>{"dp_cp", "tp"}));
  EXPECT_EQ(Ok(dp_cp.Groups({0})), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(dp_cp.layout().ToString(), "(4,2):(2,1)");  // Coalesced.

  const DeviceMesh dp_tp = Ok(mesh.Flatten({"dp", "tp"}, "dp_tp"));
  EXPECT_EQ(dp_tp.dim_names(), (std::vector<std::string>{"dp_tp", "cp"}));
  EXPECT_EQ(Ok(dp_tp.Groups({0})), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(Ok(dp_tp.Groups({1})), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  // Non-adjacent dims make a hierarchical mode: tp fastest, then dp.
  EXPECT_EQ(dp_tp.layout().ToString(), "((2,2),2):((1,4),2)");
  EXPECT_EQ(Ok(dp_tp.CoordinateOf(5)), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(Ok(dp_tp.RankAt({2, 1})), 6);

  // In the order given: tp, dp makes dp fastest.
  const DeviceMesh tp_dp = Ok(mesh.Flatten({"tp", "dp"}, "tp_dp"));
  EXPECT_EQ(tp_dp.dim_names(), (std::vector<std::string>{"cp", "tp_dp"}));
  EXPECT_EQ(Ok(tp_dp.Groups({1})), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
}

TEST(DeviceMeshTest, SliceGivesTheCallingRanksSubMesh) {
  const DeviceMesh mesh = Mesh({2, 2, 2}, {"dp", "cp", "tp"});
  // Rank 5 is at (dp=1, cp=0, tp=1).
  EXPECT_EQ(Ok(mesh.Slice(5, {"tp"})), Mesh({2}, {"tp"}, {4, 5}));
  EXPECT_EQ(Ok(mesh.Slice(5, {"dp", "cp"})),
            Mesh({2, 2}, {"dp", "cp"}, {1, 3, 5, 7}));
  EXPECT_EQ(Ok(mesh.Slice(5, {"cp", "dp"})),
            Mesh({2, 2}, {"cp", "dp"}, {1, 5, 3, 7}));
  EXPECT_EQ(Ok(mesh.Slice(2, {"dp", "tp"})),
            Mesh({2, 2}, {"dp", "tp"}, {2, 3, 6, 7}));
  EXPECT_EQ(Ok(mesh.Slice(5, {})), Mesh({}, {}, {5}));
}

TEST(DeviceMeshTest, PinnedAtKeepsTheRanksCoordinateOnOneDim) {
  const DeviceMesh mesh = Mesh({2, 3}, {"dp", "tp"}, {17, 3, 9, 12, 0, 40});
  // Rank 9 is at (dp=0, tp=2); rank 0 at (dp=1, tp=1).
  EXPECT_EQ(Ok(mesh.PinnedAt(1, 9)), Mesh({2, 1}, {"dp", "tp"}, {9, 40}));
  EXPECT_EQ(Ok(mesh.PinnedAt(0, 0)), Mesh({1, 3}, {"dp", "tp"}, {12, 0, 40}));
  // A copy shares the cache and gives the same mesh.
  const DeviceMesh copy = mesh;
  EXPECT_EQ(Ok(copy.PinnedAt(1, 40)), Mesh({2, 1}, {"dp", "tp"}, {9, 40}));
}

TEST(DeviceMeshTest, PinnedAtFromManyThreadsAgrees) {
  const DeviceMesh mesh = Mesh({4, 8}, {"dp", "tp"});
  constexpr int kThreads = 8;
  std::vector<std::vector<DeviceMesh>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t rank = 0; rank < mesh.size(); ++rank) {
        results[t].push_back(Ok(mesh.PinnedAt(1, rank)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int64_t rank = 0; rank < mesh.size(); ++rank) {
      const int64_t tp = rank % 8;
      EXPECT_EQ(results[t][rank],
                Mesh({4, 1}, {"dp", "tp"}, {tp, 8 + tp, 16 + tp, 24 + tp}));
    }
  }
}

TEST(DeviceMeshTest, ExplicitRankLists) {
  const DeviceMesh mesh = Mesh({2, 3}, {"a", "b"}, {17, 3, 9, 12, 0, 40});
  EXPECT_EQ(mesh.rank_list(), (std::vector<int64_t>{17, 3, 9, 12, 0, 40}));
  EXPECT_EQ(Ok(mesh.Groups({0})), (Groups{{17, 12}, {3, 0}, {9, 40}}));
  EXPECT_EQ(Ok(mesh.Groups({1})), (Groups{{17, 3, 9}, {12, 0, 40}}));
  EXPECT_EQ(Ok(mesh.CoordinateOf(40)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ok(mesh.RankAt({1, 1})), 0);
  EXPECT_TRUE(mesh.Contains(12));
  EXPECT_FALSE(mesh.Contains(1));
  EXPECT_EQ(Ok(mesh.Slice(0, {"b"})), Mesh({3}, {"b"}, {12, 0, 40}));
}

TEST(DeviceMeshTest, UnflattenRoundTripsFlatten) {
  const DeviceMesh mesh = Mesh({2, 3, 4}, {"dp", "cp", "tp"},
                               {5,  23, 1,  7,  9,  11, 2,  3,  4,  6,  8,  10,
                                12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 0});
  // Adjacent dims in order: the very same mesh back.
  const DeviceMesh flat = Ok(mesh.Flatten({"cp", "tp"}, "cp_tp"));
  EXPECT_EQ(Ok(flat.Unflatten("cp_tp", {3, 4}, {"cp", "tp"})), mesh);
  const DeviceMesh all = Ok(mesh.Flatten({"dp", "cp", "tp"}, "world"));
  EXPECT_EQ(all.rank_list(), mesh.Ranks());
  EXPECT_EQ(Ok(all.Unflatten("world", {2, 3, 4}, {"dp", "cp", "tp"})), mesh);

  // Non-adjacent dims come back next to each other: the ranks at every
  // coordinate agree with the mesh's.
  const DeviceMesh dp_tp = Ok(mesh.Flatten({"dp", "tp"}, "dp_tp"));
  const DeviceMesh back = Ok(dp_tp.Unflatten("dp_tp", {2, 4}, {"dp", "tp"}));
  EXPECT_EQ(back.dim_names(), (std::vector<std::string>{"dp", "tp", "cp"}));
  for (int64_t dp = 0; dp < 2; ++dp) {
    for (int64_t cp = 0; cp < 3; ++cp) {
      for (int64_t tp = 0; tp < 4; ++tp) {
        EXPECT_EQ(Ok(back.RankAt({dp, tp, cp})), Ok(mesh.RankAt({dp, cp, tp})));
      }
    }
  }
  // Unflatten composes the mode with the split: hierarchical modes stay
  // layouts where the split fits them...
  EXPECT_EQ(back.layout().ToString(), "(2,4,3):(12,1,4)");
  const DeviceMesh tp_dp = Ok(dp_tp.Unflatten("dp_tp", {4, 2}, {"x", "y"}));
  EXPECT_EQ(tp_dp.layout().ToString(), "((2,2),2,3):((2,12),1,4)");
  // ...and fall back to listing the ranks row-major where it does not: the
  // mode (2,3):(12,4) of (cp, dp), split (2,3), is no layout.
  const DeviceMesh cp_dp = Ok(mesh.Flatten({"cp", "dp"}, "cp_dp"));
  EXPECT_EQ(cp_dp.layout().ToString(), "((2,3),4):((12,4),1)");
  const DeviceMesh odd = Ok(cp_dp.Unflatten("cp_dp", {2, 3}, {"x", "y"}));
  EXPECT_EQ(odd.layout().ToString(), "(2,3,4):(12,4,1)");
  const RefMesh ref = {mesh.shape(), mesh.dim_names(), mesh.Ranks()};
  ExpectMatches(odd, RefUnflatten(RefFlatten(ref, {"cp", "dp"}, "cp_dp"),
                                  "cp_dp", {2, 3}, {"x", "y"}));
}

TEST(DeviceMeshTest, EqualityAndHash) {
  const DeviceMesh a = Mesh({2, 4}, {"dp", "tp"});
  const DeviceMesh b =
      Ok(Ok(a.Flatten({"dp", "tp"}, "x")).Unflatten("x", {2, 4}, {"dp", "tp"}));
  EXPECT_EQ(a, b);
  EXPECT_EQ(absl::Hash<DeviceMesh>()(a), absl::Hash<DeviceMesh>()(b));
  EXPECT_NE(a, Mesh({2, 4}, {"dp", "sp"}));
  EXPECT_NE(a, Mesh({4, 2}, {"dp", "tp"}));
  EXPECT_NE(a, Mesh({2, 4}, {"dp", "tp"}, {1, 0, 2, 3, 4, 5, 6, 7}));
}

// Copies and flattenings share the rank list (a DTensorSpec holds a mesh by
// value); equality still compares the ranks of meshes built apart.
TEST(DeviceMeshTest, CopiesShareTheirRankList) {
  const DeviceMesh a = Mesh({4096, 8}, {"dp", "tp"});
  const DeviceMesh copy = a;
  EXPECT_EQ(&copy.rank_list(), &a.rank_list());
  EXPECT_EQ(&Ok(a.Flatten({"dp", "tp"}, "x")).rank_list(), &a.rank_list());
  EXPECT_EQ(copy, a);
  const DeviceMesh apart = Mesh({4096, 8}, {"dp", "tp"});
  EXPECT_NE(&apart.rank_list(), &a.rank_list());
  EXPECT_EQ(apart, a);
  EXPECT_EQ(absl::Hash<DeviceMesh>()(apart), absl::Hash<DeviceMesh>()(a));
  // The same first and last ranks, two swapped inside.
  std::vector<int64_t> swapped = a.rank_list();
  std::swap(swapped[1], swapped[2]);
  EXPECT_NE(a, Mesh({4096, 8}, {"dp", "tp"}, swapped));
}

TEST(DeviceMeshTest, ZeroDimMesh) {
  const DeviceMesh mesh = Mesh({});
  EXPECT_EQ(mesh.ndim(), 0);
  EXPECT_EQ(mesh.size(), 1);
  EXPECT_EQ(Ok(mesh.RankAt({})), 0);
  EXPECT_EQ(Ok(mesh.CoordinateOf(0)), std::vector<int64_t>{});
  EXPECT_EQ(Ok(mesh.Groups({})), (Groups{{0}}));
}

// ---------------------------------------------------------------------------
// Errors.

// Expects an error whose message contains `needle`.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, const std::string& needle) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning " << needle;
  EXPECT_NE(result.status().message().find(needle), std::string::npos)
      << result.status();
}

TEST(DeviceMeshTest, CreateErrors) {
  ExpectError(DeviceMesh::Create({2, 0}), "[2, 0]");
  ExpectError(DeviceMesh::Create({2, -1}), "[2, -1]");
  ExpectError(DeviceMesh::Create({1 << 20, 1 << 20}), "1048576");
  ExpectError(DeviceMesh::Create({int64_t{1} << 62, 4}), "more than");
  ExpectError(DeviceMesh::Create({2, 2}, {"dp"}), "dp");
  ExpectError(DeviceMesh::Create({2, 2}, {"dp", ""}), "empty");
  ExpectError(DeviceMesh::Create({2, 2}, {"dp", "dp"}), "'dp' is repeated");
  ExpectError(DeviceMesh::Create({2, 2}, {}, {0, 1, 2}), "3 listed");
  ExpectError(DeviceMesh::Create({2, 2}, {}, {0, 1, 2, 3, 4}), "5 listed");
  ExpectError(DeviceMesh::Create({2, 2}, {}, {0, 1, 2, 1}),
              "rank 1 is listed twice");
  ExpectError(DeviceMesh::Create({2, 2}, {}, {0, 1, -2, 3}), "rank -2");
}

TEST(DeviceMeshTest, PinnedAtErrors) {
  const DeviceMesh mesh = Mesh({2, 3}, {"dp", "tp"}, {17, 3, 9, 12, 0, 40});
  ExpectError(mesh.PinnedAt(2, 9), "mesh dim 2");
  ExpectError(mesh.PinnedAt(-1, 9), "mesh dim -1");
  EXPECT_EQ(mesh.PinnedAt(0, 1).status().code(), absl::StatusCode::kNotFound);
  ExpectError(mesh.PinnedAt(0, 1), "rank 1");
}

TEST(DeviceMeshTest, LookupErrors) {
  const DeviceMesh mesh = Mesh({2, 4}, {"dp", "tp"});
  absl::StatusOr<int64_t> dim = mesh.DimIndex("pp");
  EXPECT_EQ(dim.status().code(), absl::StatusCode::kNotFound);
  ExpectError(dim, "'pp'");
  ExpectError(dim, "dp, tp");
  absl::StatusOr<std::vector<int64_t>> coordinate = mesh.CoordinateOf(8);
  EXPECT_EQ(coordinate.status().code(), absl::StatusCode::kNotFound);
  ExpectError(coordinate, "rank 8");
  ExpectError(mesh.RankAt({1}), "[1]");
  ExpectError(mesh.RankAt({1, 4}), "[1, 4]");
  ExpectError(mesh.RankAt({-1, 0}), "[-1, 0]");
  ExpectError(mesh.RankAt({0, 0, 0}), "[0, 0, 0]");
  ExpectError(mesh.Groups({2}), "mesh dim 2");
  ExpectError(mesh.Groups({-1}), "mesh dim -1");
  ExpectError(mesh.Groups({0, 0}), "repeated");
  ExpectError(mesh.GroupOf(9, {0}), "rank 9");
  ExpectError(mesh.GroupOf(1, {1, 1}), "repeated");
  EXPECT_EQ(mesh.size(2), 0);
  EXPECT_EQ(mesh.size(-1), 0);
}

TEST(DeviceMeshTest, SliceFlattenUnflattenErrors) {
  const DeviceMesh mesh = Mesh({2, 2, 3}, {"dp", "cp", "tp"});
  ExpectError(mesh.Slice(0, {"pp"}), "'pp'");
  ExpectError(mesh.Slice(0, {"dp", "dp"}), "repeated");
  ExpectError(mesh.Slice(12, {"dp"}), "rank 12");

  ExpectError(mesh.Flatten({}, "x"), "'x'");
  ExpectError(mesh.Flatten({"dp", "pp"}, "x"), "'pp'");
  ExpectError(mesh.Flatten({"dp", "dp"}, "x"), "repeated");
  ExpectError(mesh.Flatten({"dp", "cp"}, "tp"), "'tp' is repeated");
  ExpectError(mesh.Flatten({"dp", "cp"}, ""), "empty");
  EXPECT_TRUE(mesh.Flatten({"dp", "cp"}, "dp").ok());  // Reuses a merged name.

  ExpectError(mesh.Unflatten("pp", {2}, {"a"}), "'pp'");
  ExpectError(mesh.Unflatten("tp", {2, 2}, {"a", "b"}), "size 3");
  ExpectError(mesh.Unflatten("tp", {3, 0}, {"a", "b"}), "[3, 0]");
  ExpectError(mesh.Unflatten("tp", {-1, -3}, {"a", "b"}), "[-1, -3]");
  ExpectError(mesh.Unflatten("tp", {3, 1}, {"a"}), "[3, 1]");
  ExpectError(mesh.Unflatten("tp", {}, {}), "[]");
  ExpectError(mesh.Unflatten("tp", {3, 1}, {"a", "dp"}), "'dp' is repeated");
  ExpectError(mesh.Unflatten("tp", {3, 1}, {"a", ""}), "empty");
  EXPECT_TRUE(mesh.Unflatten("tp", {3, 1}, {"tp", "x"}).ok());
}

// ---------------------------------------------------------------------------
// Random meshes against the reference.

class RandomMeshes {
 public:
  explicit RandomMeshes(uint32_t seed) : rng_(seed) {}

  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  // Up to 4 dims of sizes 1..4, distinct names, distinct scattered ranks.
  RefMesh Mesh() {
    RefMesh ref;
    for (int64_t d = Int(1, 4); d > 0; --d) ref.shape.push_back(Int(1, 4));
    for (size_t d = 0; d < ref.shape.size(); ++d) {
      ref.names.push_back("m" + std::to_string(Int(0, 99)) + "_" +
                          std::to_string(d));
    }
    const int64_t count = Count(ref.shape);
    const int64_t spacing = Int(1, 3), offset = Int(0, 5);
    for (int64_t r = 0; r < count; ++r)
      ref.ranks.push_back(offset + r * spacing);
    std::shuffle(ref.ranks.begin(), ref.ranks.end(), rng_);
    return ref;
  }

  // A random non-empty selection of the names, in random order.
  std::vector<std::string> Names(const RefMesh& ref) {
    std::vector<std::string> names = ref.names;
    std::shuffle(names.begin(), names.end(), rng_);
    names.resize(Int(1, names.size()));
    return names;
  }

  // `size` split into 1..3 factors.
  std::vector<int64_t> Factors(int64_t size) {
    std::vector<int64_t> factors;
    for (int64_t n = Int(0, 2); n > 0; --n) {
      std::vector<int64_t> divisors;
      for (int64_t f = 1; f <= size; ++f) {
        if (size % f == 0) divisors.push_back(f);
      }
      const int64_t f = divisors[Int(0, divisors.size() - 1)];
      factors.push_back(f);
      size /= f;
    }
    factors.push_back(size);
    std::shuffle(factors.begin(), factors.end(), rng_);
    return factors;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

DeviceMesh FromRef(const RefMesh& ref) {
  return Mesh(ref.shape, ref.names, ref.ranks);
}

// Unflattens a random dim of `mesh` (reference `ref`) into random factors
// named `prefix`0, `prefix`1, ... and checks the result; returns the pair.
std::pair<DeviceMesh, RefMesh> CheckRandomUnflatten(RandomMeshes& random,
                                                    const DeviceMesh& mesh,
                                                    const RefMesh& ref,
                                                    const std::string& prefix) {
  const int64_t dim = random.Int(0, ref.shape.size() - 1);
  const std::vector<int64_t> sizes = random.Factors(ref.shape[dim]);
  std::vector<std::string> names;
  for (size_t k = 0; k < sizes.size(); ++k) {
    names.push_back(prefix + std::to_string(k));
  }
  const DeviceMesh out = Ok(mesh.Unflatten(ref.names[dim], sizes, names));
  const RefMesh out_ref = RefUnflatten(ref, ref.names[dim], sizes, names);
  ExpectMatches(out, out_ref);
  return {out, out_ref};
}

TEST(DeviceMeshRandomTest, MatchesTheRowMajorReference) {
  RandomMeshes random(42);
  for (int c = 0; c < 200; ++c) {
    const RefMesh ref = random.Mesh();
    const DeviceMesh mesh = FromRef(ref);
    ExpectMatches(mesh, ref);
    ASSERT_FALSE(mesh.Contains(-1));

    // Slice at a random rank.
    const int64_t rank = ref.ranks[random.Int(0, ref.ranks.size() - 1)];
    const std::vector<std::string> slice_names = random.Names(ref);
    ExpectMatches(Ok(mesh.Slice(rank, slice_names)),
                  RefSlice(ref, rank, slice_names));

    // Pin a random dim at a random rank's coordinate, twice (the second from
    // the cache).
    if (!ref.shape.empty()) {
      const int64_t dim = random.Int(0, ref.shape.size() - 1);
      const RefMesh pinned_ref = RefPinned(ref, dim, rank);
      ExpectMatches(Ok(mesh.PinnedAt(dim, rank)), pinned_ref);
      ExpectMatches(Ok(mesh.PinnedAt(dim, rank)), pinned_ref);
    }

    // Flatten a random selection, then work on the flattened mesh.
    const std::vector<std::string> names = random.Names(ref);
    const DeviceMesh flat = Ok(mesh.Flatten(names, "flat"));
    const RefMesh flat_ref = RefFlatten(ref, names, "flat");
    ExpectMatches(flat, flat_ref);
    const int64_t flat_rank = ref.ranks[random.Int(0, ref.ranks.size() - 1)];
    const std::vector<std::string> flat_names = random.Names(flat_ref);
    ExpectMatches(Ok(flat.Slice(flat_rank, flat_names)),
                  RefSlice(flat_ref, flat_rank, flat_names));

    // Unflatten the merged dim back into the dims it came from.
    std::vector<int64_t> sizes;
    for (const std::string& name : names) {
      sizes.push_back(ref.shape[RefDims(ref, {name})[0]]);
    }
    ExpectMatches(Ok(flat.Unflatten("flat", sizes, names)),
                  RefUnflatten(flat_ref, "flat", sizes, names));

    // Unflatten random dims into random factors, twice over.
    auto [split, split_ref] = CheckRandomUnflatten(random, flat, flat_ref, "u");
    CheckRandomUnflatten(random, split, split_ref, "v");
    CheckRandomUnflatten(random, mesh, ref, "w");
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace dtensor
