// ProcessGroups: communicators for the groups of 2-D and 3-D meshes (along
// each dim and along sets of dims, as if flattened), checked against groups
// enumerated in the test from mesh coordinates, with collectives run inside
// each group (all_gather, all_reduce, broadcast, reduce_scatter, permute);
// caching; bad groups.
#include <string>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::ConcatHost;
using testing::HostTensor;
using testing::Matches;
using testing::NarrowHost;
using testing::RandomHost;
using testing::ReduceHost;
using testing::TestOptions;
using testing::ToTensor;

// The mesh coordinate of row-major position `position` in `shape`.
std::vector<int64_t> CoordinateOf(int64_t position, const Shape& shape) {
  std::vector<int64_t> coordinate(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coordinate[d] = position % shape[d];
    position /= shape[d];
  }
  return coordinate;
}

int64_t PositionOf(const std::vector<int64_t>& coordinate, const Shape& shape) {
  int64_t position = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    position = position * shape[d] + coordinate[d];
  }
  return position;
}

// The group along `dims` that holds `rank` in a mesh of `shape` whose
// row-major positions hold `ranks`: the ranks at every coordinate that agrees
// with rank's off `dims`, enumerated row-major over `dims` in the given order.
std::vector<int64_t> ReferenceGroup(const Shape& shape,
                                    const std::vector<int64_t>& ranks,
                                    const std::vector<int64_t>& dims,
                                    int64_t rank) {
  int64_t position = 0;
  while (ranks[position] != rank) ++position;
  const std::vector<int64_t> home = CoordinateOf(position, shape);
  Shape group_shape;
  for (int64_t dim : dims) group_shape.push_back(shape[dim]);
  int64_t group_size = 1;
  for (int64_t size : group_shape) group_size *= size;
  std::vector<int64_t> group;
  for (int64_t k = 0; k < group_size; ++k) {
    std::vector<int64_t> coordinate = home;
    const std::vector<int64_t> inner = CoordinateOf(k, group_shape);
    for (size_t i = 0; i < dims.size(); ++i) coordinate[dims[i]] = inner[i];
    group.push_back(ranks[PositionOf(coordinate, shape)]);
  }
  return group;
}

struct MeshCase {
  Shape shape;
  std::vector<int64_t> ranks;  // Row-major positions to ranks.
  std::vector<std::vector<int64_t>> dim_sets;
};

TEST(MeshGroupsTest, GroupsOfEveryDimAndDimSetRunCollectives) {
  const std::vector<MeshCase> meshes = {
      {{2, 3}, {0, 1, 2, 3, 4, 5}, {{0}, {1}, {0, 1}, {1, 0}}},
      {{2, 2, 2},
       {3, 6, 0, 5, 1, 7, 2, 4},
       {{0}, {1}, {2}, {0, 2}, {2, 0}, {1, 2}, {0, 1, 2}, {2, 0, 1}}},
  };
  for (const MeshCase& m : meshes) {
    const int64_t world_size = static_cast<int64_t>(m.ranks.size());
    const DeviceMesh mesh = DeviceMesh::Create(m.shape, {}, m.ranks).value();
    LocalCluster cluster(world_size, TestOptions());
    ASSERT_TRUE(
        cluster
            .Run([&](ProcessGroups& groups) -> absl::Status {
              const int64_t me = groups.rank();
              for (size_t k = 0; k < m.dim_sets.size(); ++k) {
                const std::vector<int64_t>& dims = m.dim_sets[k];
                const std::vector<int64_t> expected_group =
                    ReferenceGroup(m.shape, m.ranks, dims, me);
                DT_ASSIGN_OR_RETURN(auto comm, groups.ForMeshDims(mesh, dims));
                EXPECT_EQ(comm->group_ranks(), expected_group);
                EXPECT_EQ(comm->global_rank(), me);
                // Uneven pieces: global rank g contributes g % 3 rows.
                std::vector<HostTensor> pieces;
                std::vector<HostTensor> inputs;
                for (int64_t g : expected_group) {
                  pieces.push_back(
                      RandomHost({g % 3, 2}, DType::kF32, 10 * k + g));
                  inputs.push_back(RandomHost({5}, DType::kI64, 100 * k + g));
                }
                Tensor piece =
                    ToTensor(RandomHost({me % 3, 2}, DType::kF32, 10 * k + me),
                             DType::kF32);
                std::vector<int64_t> sizes;
                for (int64_t g : expected_group) sizes.push_back(g % 3);
                HostTensor gathered = ConcatHost(pieces, 0);
                Tensor output =
                    Tensor::Zeros(gathered.shape, DType::kF32).value();
                DT_RETURN_IF_ERROR(comm->AllGather(piece, output, 0, sizes));
                EXPECT_TRUE(Matches(output, gathered));
                Tensor summed = ToTensor(
                    RandomHost({5}, DType::kI64, 100 * k + me), DType::kI64);
                DT_RETURN_IF_ERROR(comm->AllReduce(summed, ReduceOp::kSum));
                EXPECT_TRUE(Matches(
                    summed, ReduceHost(inputs, ReduceOp::kSum, DType::kI64)));
                // Roots, pieces and pairs are group ranks.
                const int64_t size = comm->size();
                const int64_t root = size - 1;
                Tensor broadcast = ToTensor(
                    RandomHost({3}, DType::kBF16, 200 * k + me), DType::kBF16);
                DT_RETURN_IF_ERROR(comm->Broadcast(broadcast, root));
                EXPECT_TRUE(Matches(
                    broadcast, RandomHost({3}, DType::kBF16,
                                          200 * k + expected_group[root])));
                std::vector<HostTensor> wholes;
                for (int64_t g : expected_group) {
                  wholes.push_back(
                      RandomHost({2 * size}, DType::kF64, 300 * k + g));
                }
                Tensor piece_sum = Tensor::Zeros({2}, DType::kF64).value();
                DT_RETURN_IF_ERROR(comm->ReduceScatter(
                    ToTensor(RandomHost({2 * size}, DType::kF64, 300 * k + me),
                             DType::kF64),
                    piece_sum, 0, ReduceOp::kSum));
                EXPECT_TRUE(Matches(
                    piece_sum,
                    NarrowHost(ReduceHost(wholes, ReduceOp::kSum, DType::kF64),
                               0, 2 * comm->rank(), 2)));
                std::vector<PermutePair> shift;
                for (int64_t r = 0; r < size; ++r) {
                  shift.push_back({r, (r + 1) % size});
                }
                Tensor shifted = Tensor::Zeros({4}, DType::kI32).value();
                DT_RETURN_IF_ERROR(comm->Permute(
                    ToTensor(RandomHost({4}, DType::kI32, 400 * k + me),
                             DType::kI32),
                    shifted, shift));
                const int64_t from = (comm->rank() + size - 1) % size;
                EXPECT_TRUE(Matches(
                    shifted, RandomHost({4}, DType::kI32,
                                        400 * k + expected_group[from])));
              }
              return absl::OkStatus();
            })
            .ok());
  }
}

TEST(MeshGroupsTest, GroupsAreCreatedOnceAndCached) {
  const DeviceMesh mesh = DeviceMesh::Create({2, 2}, {"dp", "tp"}).value();
  LocalCluster cluster(4, TestOptions());
  ASSERT_TRUE(
      cluster
          .Run([&](ProcessGroups& groups) -> absl::Status {
            const int64_t dims[] = {1};
            DT_ASSIGN_OR_RETURN(auto by_dim, groups.ForMeshDims(mesh, dims));
            DT_ASSIGN_OR_RETURN(auto again, groups.ForMeshDims(mesh, dims));
            DT_ASSIGN_OR_RETURN(auto by_name,
                                groups.ForMeshDimNames(mesh, {"tp"}));
            DT_ASSIGN_OR_RETURN(auto by_ranks,
                                groups.ForRanks(by_dim->group_ranks()));
            EXPECT_EQ(by_dim, again);
            EXPECT_EQ(by_dim, by_name);
            EXPECT_EQ(by_dim, by_ranks);
            DT_ASSIGN_OR_RETURN(auto world, groups.World());
            const int64_t all_dims[] = {0, 1};
            DT_ASSIGN_OR_RETURN(auto flat, groups.ForMeshDims(mesh, all_dims));
            EXPECT_EQ(world, flat);
            EXPECT_EQ(world->size(), 4);
            return absl::OkStatus();
          })
          .ok());
}

TEST(MeshGroupsTest, BadGroupsAreErrors) {
  const DeviceMesh big = DeviceMesh::Create({2, 4}).value();
  LocalCluster cluster(2, TestOptions());
  ASSERT_TRUE(
      cluster
          .Run([&](ProcessGroups& groups) -> absl::Status {
            const int64_t other = 1 - groups.rank();
            const int64_t without_me[] = {other};
            absl::Status status = groups.ForRanks(without_me).status();
            EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
            EXPECT_NE(
                status.message().find("does not contain the calling rank"),
                std::string::npos)
                << status;
            const int64_t twice[] = {0, 1, 1};
            status = groups.ForRanks(twice).status();
            EXPECT_NE(status.message().find("rank 1 is listed twice"),
                      std::string::npos)
                << status;
            const int64_t outside[] = {0, 1, 5};
            status = groups.ForRanks(outside).status();
            EXPECT_NE(status.message().find("rank 5 is not in a world of 2"),
                      std::string::npos)
                << status;
            EXPECT_FALSE(groups.ForRanks({}).ok());
            // A mesh over more ranks than the world.
            const int64_t dim0[] = {0};
            EXPECT_FALSE(groups.ForMeshDims(big, dim0).ok());
            const std::string unknown[] = {"nope"};
            EXPECT_FALSE(groups.ForMeshDimNames(big, unknown).ok());
            return absl::OkStatus();
          })
          .ok());
}

}  // namespace
}  // namespace dtensor
