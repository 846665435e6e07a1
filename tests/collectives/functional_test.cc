// The allocating forms (dtensor/collectives/functional.h): results and the
// sizes, shapes and dtypes they learn from the peers, against references
// assembled in the test from every rank's input.
#include "dtensor/collectives/functional.h"

#include <random>
#include <vector>

#include "dtensor/base/status_macros.h"
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
using testing::ReduceHost;
using testing::RunOnWorld;
using testing::ToTensor;

// Rank r's size along the varying dim: uneven, zero for some ranks.
int64_t SizeOf(int64_t rank) { return (rank * 2) % 5; }

TEST(FunctionalTest, AllGatherLearnsThePeersSizes) {
  for (int64_t n = 1; n <= 6; ++n) {
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  for (DType dtype : AllDTypes()) {
                    std::vector<HostTensor> pieces;
                    for (int64_t r = 0; r < n; ++r) {
                      pieces.push_back(RandomHost({3, SizeOf(r)}, dtype, r));
                    }
                    DT_ASSIGN_OR_RETURN(
                        Tensor gathered,
                        AllGather(world,
                                  ToTensor(pieces[world.rank()], dtype, false),
                                  1));
                    EXPECT_TRUE(Matches(gathered, ConcatHost(pieces, 1)))
                        << DTypeName(dtype);
                    // Sizes passed: nothing to learn.
                    std::vector<int64_t> sizes;
                    for (int64_t r = 0; r < n; ++r) sizes.push_back(SizeOf(r));
                    DT_ASSIGN_OR_RETURN(
                        Tensor given,
                        AllGather(world, ToTensor(pieces[world.rank()], dtype),
                                  -1, sizes));
                    EXPECT_TRUE(Matches(given, ConcatHost(pieces, 1)))
                        << DTypeName(dtype);
                  }
                  return absl::OkStatus();
                }).ok());
  }
}

TEST(FunctionalTest, GatherAndScatterLearnWhatTheRootHas) {
  for (int64_t n = 1; n <= 6; ++n) {
    const int64_t root = n / 2;
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          const int64_t me = world.rank();
          for (DType dtype : AllDTypes()) {
            std::vector<HostTensor> pieces;
            std::vector<int64_t> sizes;
            for (int64_t r = 0; r < n; ++r) {
              pieces.push_back(RandomHost({SizeOf(r), 2}, dtype, 7 * r));
              sizes.push_back(SizeOf(r));
            }
            const HostTensor whole = ConcatHost(pieces, 0);
            DT_ASSIGN_OR_RETURN(
                Tensor gathered,
                Gather(world, ToTensor(pieces[me], dtype), 0, root));
            if (me == root) {
              EXPECT_TRUE(Matches(gathered, whole)) << DTypeName(dtype);
            } else {
              EXPECT_FALSE(gathered.defined());
            }
            // Only the root has the input and the sizes.
            Tensor input = me == root ? ToTensor(whole, dtype) : Tensor();
            DT_ASSIGN_OR_RETURN(
                Tensor piece,
                Scatter(world, input, 0, root,
                        me == root ? absl::MakeConstSpan(sizes)
                                   : absl::Span<const int64_t>()));
            EXPECT_TRUE(Matches(piece, pieces[me])) << DTypeName(dtype);
          }
          return absl::OkStatus();
        }).ok());
  }
}

TEST(FunctionalTest, ReduceScatterAllocatesThisRanksPiece) {
  for (int64_t n = 1; n <= 6; ++n) {
    ASSERT_TRUE(
        RunOnWorld(n, [&](Communicator& world) -> absl::Status {
          std::vector<int64_t> sizes;
          int64_t total = 0;
          for (int64_t r = 0; r < n; ++r) {
            sizes.push_back(SizeOf(r));
            total += SizeOf(r);
          }
          std::vector<HostTensor> inputs;
          for (int64_t r = 0; r < n; ++r) {
            inputs.push_back(RandomHost({2, total}, DType::kF32, r));
          }
          DT_ASSIGN_OR_RETURN(
              Tensor piece,
              ReduceScatter(world, ToTensor(inputs[world.rank()], DType::kF32),
                            1, ReduceOp::kSum, sizes));
          int64_t offset = 0;
          for (int64_t r = 0; r < world.rank(); ++r) offset += sizes[r];
          EXPECT_TRUE(Matches(
              piece, NarrowHost(ReduceHost(inputs, ReduceOp::kSum, DType::kF32),
                                1, offset, sizes[world.rank()])));
          return absl::OkStatus();
        }).ok());
  }
}

TEST(FunctionalTest, AllToAllLearnsWhatEachPeerSends) {
  for (int64_t n = 1; n <= 6; ++n) {
    ASSERT_TRUE(RunOnWorld(n, [&](Communicator& world) -> absl::Status {
                  const int64_t me = world.rank();
                  // Same dims: rank i sends rank j (i + j) % 3 rows.
                  auto sends = [&](int64_t i) {
                    std::vector<int64_t> sizes;
                    for (int64_t j = 0; j < n; ++j)
                      sizes.push_back((i + j) % 3);
                    return sizes;
                  };
                  auto input_of = [&](int64_t i) {
                    int64_t rows = 0;
                    for (int64_t size : sends(i)) rows += size;
                    return RandomHost({rows, 2}, DType::kI32, 50 + i);
                  };
                  std::vector<HostTensor> received;
                  for (int64_t i = 0; i < n; ++i) {
                    int64_t offset = 0;
                    for (int64_t j = 0; j < me; ++j) offset += sends(i)[j];
                    received.push_back(
                        NarrowHost(input_of(i), 0, offset, sends(i)[me]));
                  }
                  DT_ASSIGN_OR_RETURN(
                      Tensor output,
                      AllToAll(world, ToTensor(input_of(me), DType::kI32), 0, 0,
                               sends(me)));
                  EXPECT_TRUE(Matches(output, ConcatHost(received, 0)));
                  // Different dims: rank i has SizeOf(i) columns, split its
                  // n rows one each.
                  auto wide = [&](int64_t i) {
                    return RandomHost({n, SizeOf(i)}, DType::kF64, 80 + i);
                  };
                  std::vector<HostTensor> columns;
                  for (int64_t i = 0; i < n; ++i) {
                    columns.push_back(NarrowHost(wide(i), 0, me, 1));
                  }
                  DT_ASSIGN_OR_RETURN(
                      Tensor transposed,
                      AllToAll(world, ToTensor(wide(me), DType::kF64), 0, 1));
                  EXPECT_TRUE(Matches(transposed, ConcatHost(columns, 1)));
                  return absl::OkStatus();
                }).ok());
  }
}

TEST(FunctionalTest, PermuteLearnsTheSendersShapeAndDType) {
  ASSERT_EQ(RunOnWorld(4,
                       [](Communicator& world) -> absl::Status {
                         // 0 -> 1 -> 2 -> 0; rank 3 neither sends nor receives.
                         const PermutePair pairs[] = {{0, 1}, {1, 2}, {2, 0}};
                         const DType dtypes[] = {DType::kBF16, DType::kI64,
                                                 DType::kBool, DType::kF32};
                         auto input_of = [&](int64_t r) {
                           return RandomHost({r + 1, 2}, dtypes[r], r);
                         };
                         const int64_t me = world.rank();
                         Tensor input =
                             me == 3 ? Tensor()
                                     : ToTensor(input_of(me), dtypes[me]);
                         DT_ASSIGN_OR_RETURN(Tensor output,
                                             Permute(world, input, pairs));
                         if (me == 3) {
                           EXPECT_FALSE(output.defined());
                         } else {
                           const int64_t src = (me + 2) % 3;
                           EXPECT_EQ(output.dtype(), dtypes[src]);
                           EXPECT_TRUE(Matches(output, input_of(src)));
                         }
                         return absl::OkStatus();
                       }),
            absl::OkStatus());
}

}  // namespace
}  // namespace dtensor
