// DeviceMesh against the spec's facts (row-major ranks): its groups,
// coordinates, flattening, slicing and pinning, and its errors, each naming
// the bad value. The random meshes are in device_mesh_random_test.cc.

#include "dtensor/mesh/device_mesh.h"

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"
#include "tests/mesh/device_mesh_reference.h"

namespace dtensor {
namespace {

using ::dtensor::mesh_testing::ExpectMatches;
using ::dtensor::mesh_testing::Groups;
using ::dtensor::mesh_testing::Mesh;
using ::dtensor::mesh_testing::Ok;
using ::dtensor::mesh_testing::RefFlatten;
using ::dtensor::mesh_testing::RefMesh;
using ::dtensor::mesh_testing::RefUnflatten;

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

}  // namespace
}  // namespace dtensor
