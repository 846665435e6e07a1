// Argument errors found on the calling rank: each comes back at once as
// InvalidArgument naming the bad value, without involving the peers (the
// next call still pairs up).
#include <string>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::RunOnWorld;

Tensor F32(const Shape& shape) {
  return Tensor::Zeros(shape, DType::kF32).value();
}

// `status` is InvalidArgument with `text` in its message.
void ExpectInvalid(const absl::Status& status, const std::string& text) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(text), absl::string_view::npos)
      << status << "\nmissing: " << text;
}

TEST(ArgumentErrorsTest, EachBadArgumentIsNamed) {
  ASSERT_EQ(
      RunOnWorld(
          2,
          [](Communicator& world) -> absl::Status {
            const Tensor x = F32({4, 6});
            ExpectInvalid(world.AllReduce(Tensor(), ReduceOp::kSum),
                          "all_reduce: tensor is undefined");
            ExpectInvalid(
                world.AllReduce(Tensor::Zeros({2}, DType::kI32).value(),
                                ReduceOp::kAvg),
                "avg needs a floating dtype, got i32");
            ExpectInvalid(world.AllGather(x, F32({8, 6}), 2),
                          "all_gather: dim 2 is out of range");
            ExpectInvalid(world.AllGather(F32({}), F32({2}), 0),
                          "needs a tensor with at least one dim");
            ExpectInvalid(
                world.AllGather(x, F32({9, 6}), 0),
                "output has shape [9, 6] but the arguments need [8, 6]");
            const int64_t three[] = {4, 4, 4};
            ExpectInvalid(world.AllGather(x, F32({12, 6}), 0, three),
                          "3 piece sizes [4, 4, 4] for a group of 2");
            const int64_t negative[] = {-1, 4};
            ExpectInvalid(world.AllGather(x, F32({3, 6}), 0, negative),
                          "negative piece size -1");
            const int64_t not_mine[] = {1, 1};
            ExpectInvalid(world.AllGather(x, F32({2, 6}), 0, not_mine),
                          "but its input f32[4, 6] has 4 along dim 0");
            ExpectInvalid(world.AllGather(
                              x, Tensor::Zeros({8, 6}, DType::kF64).value(), 0),
                          "dtypes differ: f32[4, 6] vs f64[8, 6]");
            ExpectInvalid(
                world.ReduceScatter(F32({5}), F32({2}), 0, ReduceOp::kSum),
                "size 5 does not split into 2 equal pieces");
            const int64_t short_sizes[] = {1, 2};
            ExpectInvalid(world.ReduceScatter(x, F32({1, 6}), 0, ReduceOp::kSum,
                                              short_sizes),
                          "sizes [1, 2] do not add up to size 4 of dim 0");
            const int64_t bad_recv[] = {1, 1};
            ExpectInvalid(world.AllToAll(x, F32({4, 6}), 0, 0, {}, bad_recv),
                          "recv sizes [1, 1] do not add up to size 4 of concat "
                          "dim 0");
            ExpectInvalid(world.AllToAll(x, F32({4, 7}), 0, 0),
                          "differ in dim 1, which is neither the split nor the "
                          "concat dim");
            ExpectInvalid(world.Broadcast(x, 2),
                          "root 2 is not a rank of a group "
                          "of 2");
            ExpectInvalid(world.Scatter(Tensor(), x, 0, -1), "root -1");
            ExpectInvalid(world.Gather(x, Tensor(), 0, world.rank()),
                          "gather: output is undefined");
            ExpectInvalid(world.Send(x, world.rank()), "cannot send to itself");
            ExpectInvalid(world.Recv(x, 5), "src 5 is not a rank");
            const PermutePair twice[] = {{0, 1}, {1, 1}};
            ExpectInvalid(world.Permute(x, F32({4, 6}), twice),
                          "rank 1 receives more than once in [0->1, 1->1]");
            const PermutePair self[] = {{0, 0}, {1, 1}};
            ExpectInvalid(world.Permute(x, x, self), "output overlaps input");
            // Interleaved views of one buffer do not overlap.
            const Tensor both = F32({4, 2});
            const PermutePair swap[] = {{0, 1}, {1, 0}};
            DT_RETURN_IF_ERROR(world.Permute(both.Select(1, 0).value(),
                                             both.Select(1, 1).value(), swap));
            // Nothing above reached the peer: this call pairs up.
            return world.Barrier();
          }),
      absl::OkStatus());
}

}  // namespace
}  // namespace dtensor
