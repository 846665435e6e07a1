// all_gather, all_to_all, broadcast, scatter, gather, permute, send/recv and
// barrier on in-process groups of 1 to 8 ranks, for every dtype, random
// shapes and dims, uneven pieces (zeros included) and strided tensors,
// against results assembled in the test from every rank's input.
#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::AllDTypes;
using testing::ConcatHost;
using testing::HostTensor;
using testing::Matches;
using testing::NarrowHost;
using testing::RandomHost;
using testing::RandomPieces;
using testing::RandomShape;
using testing::RunOnWorld;
using testing::ToTensor;

int64_t RandomDim(const Shape& shape, std::mt19937& rng) {
  return std::uniform_int_distribution<int64_t>(
      0, static_cast<int64_t>(shape.size()) - 1)(rng);
}

int64_t Sum(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
}

int64_t OffsetOf(const std::vector<int64_t>& sizes, int64_t index) {
  return std::accumulate(sizes.begin(), sizes.begin() + index, int64_t{0});
}

Shape WithSize(Shape shape, int64_t dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

// A case over pieces along `dim`: piece r has size sizes[r] along `dim` and
// `shape` elsewhere; rank r's data is RandomHost(..., seed + r).
struct PieceCase {
  Shape shape;
  int64_t dim;
  std::vector<int64_t> sizes;
  DType dtype;
  bool contiguous;
  uint64_t seed;
  int64_t root;
};

std::vector<PieceCase> PieceCases(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<PieceCase> cases;
  for (DType dtype : AllDTypes()) {
    for (bool contiguous : {true, false}) {
      PieceCase c;
      c.shape = RandomShape(rng);
      c.dim = RandomDim(c.shape, rng);
      c.sizes = RandomPieces(n, 3, rng);
      c.dtype = dtype;
      c.contiguous = contiguous;
      c.seed = rng();
      c.root = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
      cases.push_back(c);
    }
  }
  return cases;
}

HostTensor PieceOf(const PieceCase& c, int64_t rank) {
  return RandomHost(WithSize(c.shape, c.dim, c.sizes[rank]), c.dtype,
                    c.seed + rank);
}

HostTensor AllPieces(const PieceCase& c) {
  std::vector<HostTensor> pieces;
  for (size_t r = 0; r < c.sizes.size(); ++r) pieces.push_back(PieceOf(c, r));
  return ConcatHost(pieces, c.dim);
}

Tensor EmptyLike(const HostTensor& host, DType dtype, bool contiguous) {
  return ToTensor(RandomHost(host.shape, dtype, 99), dtype, contiguous);
}

TEST(AllGatherTest, ConcatenatesUnevenPiecesAlongAnyDim) {
  for (int64_t n = 1; n <= 8; ++n) {
    const std::vector<PieceCase> cases = PieceCases(n, 200 + n);
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          for (const PieceCase& c : cases) {
            const HostTensor expected = AllPieces(c);
            Tensor input =
                ToTensor(PieceOf(c, world.rank()), c.dtype, c.contiguous);
            Tensor output = EmptyLike(expected, c.dtype, !c.contiguous);
            DT_RETURN_IF_ERROR(world.AllGather(input, output, c.dim, c.sizes));
            EXPECT_TRUE(Matches(output, expected))
                << "n=" << n << " " << DTypeName(c.dtype) << " dim " << c.dim;
          }
          return absl::OkStatus();
        }).ok());
  }
}

TEST(AllGatherTest, EmptySizesMeanEqualPieces) {
  ASSERT_TRUE(RunOnWorld(3, [](Communicator& world) -> absl::Status {
                std::vector<HostTensor> pieces;
                for (int64_t r = 0; r < 3; ++r) {
                  pieces.push_back(RandomHost({2, 2}, DType::kF32, r));
                }
                Tensor output = Tensor::Zeros({2, 6}, DType::kF32).value();
                DT_RETURN_IF_ERROR(world.AllGather(
                    ToTensor(pieces[world.rank()], DType::kF32), output, -1));
                EXPECT_TRUE(Matches(output, ConcatHost(pieces, 1)));
                return absl::OkStatus();
              }).ok());
}

TEST(GatherTest, RootGetsTheConcatenation) {
  for (int64_t n = 1; n <= 8; ++n) {
    const std::vector<PieceCase> cases = PieceCases(n, 300 + n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  for (const PieceCase& c : cases) {
                    const HostTensor expected = AllPieces(c);
                    Tensor input = ToTensor(PieceOf(c, world.rank()), c.dtype,
                                            c.contiguous);
                    // Only the root passes an output.
                    Tensor output =
                        world.rank() == c.root
                            ? EmptyLike(expected, c.dtype, c.contiguous)
                            : Tensor();
                    DT_RETURN_IF_ERROR(
                        world.Gather(input, output, c.dim, c.root, c.sizes));
                    if (world.rank() == c.root) {
                      EXPECT_TRUE(Matches(output, expected))
                          << "n=" << n << " " << DTypeName(c.dtype);
                    }
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

TEST(ScatterTest, EachRankGetsItsPieceOfTheRoots) {
  for (int64_t n = 1; n <= 8; ++n) {
    const std::vector<PieceCase> cases = PieceCases(n, 400 + n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  const int64_t me = world.rank();
                  for (const PieceCase& c : cases) {
                    const HostTensor whole = AllPieces(c);
                    // Only the root passes an input.
                    Tensor input = me == c.root
                                       ? ToTensor(whole, c.dtype, c.contiguous)
                                       : Tensor();
                    const HostTensor expected = NarrowHost(
                        whole, c.dim, OffsetOf(c.sizes, me), c.sizes[me]);
                    Tensor output = EmptyLike(expected, c.dtype, !c.contiguous);
                    DT_RETURN_IF_ERROR(
                        world.Scatter(input, output, c.dim, c.root, c.sizes));
                    EXPECT_TRUE(Matches(output, expected))
                        << "n=" << n << " " << DTypeName(c.dtype);
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

TEST(BroadcastTest, EveryRankGetsTheRootsTensor) {
  for (int64_t n = 1; n <= 8; ++n) {
    const std::vector<PieceCase> cases = PieceCases(n, 500 + n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  for (const PieceCase& c : cases) {
                    Tensor tensor = ToTensor(
                        RandomHost(c.shape, c.dtype, c.seed + world.rank()),
                        c.dtype, c.contiguous);
                    DT_RETURN_IF_ERROR(world.Broadcast(tensor, c.root));
                    EXPECT_TRUE(Matches(
                        tensor, RandomHost(c.shape, c.dtype, c.seed + c.root)))
                        << "n=" << n << " " << DTypeName(c.dtype);
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

// One all_to_all: sends[i][j] is what rank i sends rank j along split_dim.
// When the dims differ, every rank sends rank j the same size along the
// split dim, and rank i's size along the concat dim is concat_sizes[i].
struct AllToAllCase {
  Shape shape;
  int64_t split_dim;
  int64_t concat_dim;
  std::vector<std::vector<int64_t>> sends;
  std::vector<int64_t> concat_sizes;
  DType dtype;
  bool contiguous;
  uint64_t seed;
};

std::vector<AllToAllCase> AllToAllCases(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<AllToAllCase> cases;
  for (DType dtype : AllDTypes()) {
    for (bool same_dims : {true, false}) {
      AllToAllCase c;
      c.shape = RandomShape(rng);
      if (!same_dims && c.shape.size() == 1) c.shape.push_back(2);
      c.split_dim = RandomDim(c.shape, rng);
      c.concat_dim = c.split_dim;
      while (!same_dims && c.concat_dim == c.split_dim) {
        c.concat_dim = RandomDim(c.shape, rng);
      }
      if (same_dims) {
        for (int64_t i = 0; i < n; ++i)
          c.sends.push_back(RandomPieces(n, 3, rng));
      } else {
        c.sends.assign(n, RandomPieces(n, 3, rng));
        c.concat_sizes = RandomPieces(n, 3, rng);
      }
      c.dtype = dtype;
      c.contiguous = rng() % 2 == 0;
      c.seed = rng();
      cases.push_back(c);
    }
  }
  return cases;
}

HostTensor AllToAllInput(const AllToAllCase& c, int64_t rank) {
  Shape shape = WithSize(c.shape, c.split_dim, Sum(c.sends[rank]));
  if (c.split_dim != c.concat_dim) shape[c.concat_dim] = c.concat_sizes[rank];
  return RandomHost(shape, c.dtype, c.seed + rank);
}

TEST(AllToAllTest, ExchangesUnevenPiecesBetweenAnyDims) {
  for (int64_t n = 1; n <= 8; ++n) {
    const std::vector<AllToAllCase> cases = AllToAllCases(n, 600 + n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  const int64_t me = world.rank();
                  for (const AllToAllCase& c : cases) {
                    std::vector<HostTensor> received;
                    std::vector<int64_t> recv_sizes;
                    for (int64_t i = 0; i < n; ++i) {
                      received.push_back(
                          NarrowHost(AllToAllInput(c, i), c.split_dim,
                                     OffsetOf(c.sends[i], me), c.sends[i][me]));
                      recv_sizes.push_back(received.back().shape[c.concat_dim]);
                    }
                    const HostTensor expected =
                        ConcatHost(received, c.concat_dim);
                    Tensor input =
                        ToTensor(AllToAllInput(c, me), c.dtype, c.contiguous);
                    Tensor output = EmptyLike(expected, c.dtype, !c.contiguous);
                    DT_RETURN_IF_ERROR(world.AllToAll(input, output,
                                                      c.split_dim, c.concat_dim,
                                                      c.sends[me], recv_sizes));
                    EXPECT_TRUE(Matches(output, expected))
                        << "n=" << n << " " << DTypeName(c.dtype) << " split "
                        << c.split_dim << " concat " << c.concat_dim;
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

// A random partial permutation of n ranks as (src, dst) pairs.
std::vector<PermutePair> RandomPairs(int64_t n, std::mt19937& rng) {
  std::vector<int64_t> dsts(n);
  std::iota(dsts.begin(), dsts.end(), 0);
  std::shuffle(dsts.begin(), dsts.end(), rng);
  std::vector<PermutePair> pairs;
  for (int64_t src = 0; src < n; ++src) {
    if (rng() % 4 != 0) pairs.push_back({src, dsts[src]});
  }
  return pairs;
}

TEST(PermuteTest, EachDstGetsItsSrcsTensor) {
  for (int64_t n = 1; n <= 8; ++n) {
    std::mt19937 rng(static_cast<uint32_t>(700 + n));
    struct Case {
      std::vector<PermutePair> pairs;
      std::vector<Shape> shapes;  // Per src rank.
      DType dtype;
      bool contiguous;
      uint64_t seed;
    };
    std::vector<Case> cases;
    for (DType dtype : AllDTypes()) {
      Case c{RandomPairs(n, rng), {}, dtype, rng() % 2 == 0, rng()};
      for (int64_t r = 0; r < n; ++r) c.shapes.push_back(RandomShape(rng));
      cases.push_back(c);
    }
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          const int64_t me = world.rank();
          for (const Case& c : cases) {
            Tensor input;
            Tensor output;
            int64_t src = -1;
            for (const PermutePair& pair : c.pairs) {
              if (pair.src == me) {
                input = ToTensor(RandomHost(c.shapes[me], c.dtype, c.seed + me),
                                 c.dtype, c.contiguous);
              }
              if (pair.dst == me) src = pair.src;
            }
            if (src >= 0) {
              output = EmptyLike(RandomHost(c.shapes[src], c.dtype, 0), c.dtype,
                                 !c.contiguous);
            }
            DT_RETURN_IF_ERROR(world.Permute(input, output, c.pairs));
            if (src >= 0) {
              EXPECT_TRUE(Matches(
                  output, RandomHost(c.shapes[src], c.dtype, c.seed + src)))
                  << "n=" << n << " " << DTypeName(c.dtype);
            }
          }
          return absl::OkStatus();
        }).ok());
  }
}

TEST(SendRecvTest, RingShiftWithEveryDType) {
  for (int64_t n = 2; n <= 8; ++n) {
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          const int64_t me = world.rank();
          const int64_t next = (me + 1) % n;
          const int64_t prev = (me + n - 1) % n;
          for (DType dtype : AllDTypes()) {
            const Shape shape = {3, 5};
            Tensor sent =
                ToTensor(RandomHost(shape, dtype, 10 * me), dtype, me % 2 == 0);
            Tensor received =
                ToTensor(RandomHost(shape, dtype, 1), dtype, me % 2 == 1);
            // Even ranks send first, odd ranks receive first.
            if (me % 2 == 0) {
              DT_RETURN_IF_ERROR(world.Send(sent, next));
              DT_RETURN_IF_ERROR(world.Recv(received, prev));
            } else {
              DT_RETURN_IF_ERROR(world.Recv(received, prev));
              DT_RETURN_IF_ERROR(world.Send(sent, next));
            }
            EXPECT_TRUE(Matches(received, RandomHost(shape, dtype, 10 * prev)))
                << "n=" << n << " " << DTypeName(dtype);
          }
          return absl::OkStatus();
        }).ok());
  }
}

TEST(SendRecvTest, MessagesBetweenAPairArriveInOrder) {
  ASSERT_TRUE(RunOnWorld(2, [](Communicator& world) -> absl::Status {
                for (int64_t k = 0; k < 5; ++k) {
                  Tensor tensor =
                      Tensor::Full({2}, world.rank() == 0 ? k : -1, DType::kI64)
                          .value();
                  if (world.rank() == 0) {
                    DT_RETURN_IF_ERROR(world.Send(tensor, 1));
                  } else {
                    DT_RETURN_IF_ERROR(world.Recv(tensor, 0));
                    EXPECT_EQ(tensor.ToVector<int64_t>().value(),
                              (std::vector<int64_t>{k, k}));
                  }
                }
                return absl::OkStatus();
              }).ok());
}

TEST(BarrierTest, NoRankLeavesBeforeAllArrive) {
  for (int64_t n = 1; n <= 8; ++n) {
    std::vector<std::atomic<int>> arrived(n);
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  for (int round = 1; round <= 3; ++round) {
                    arrived[world.rank()].store(round);
                    DT_RETURN_IF_ERROR(world.Barrier());
                    for (int64_t r = 0; r < n; ++r) {
                      EXPECT_GE(arrived[r].load(), round) << "rank " << r;
                    }
                    // Nobody may move on to the next round's store while a
                    // peer still checks this round.
                    DT_RETURN_IF_ERROR(world.Barrier());
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

}  // namespace
}  // namespace dtensor
