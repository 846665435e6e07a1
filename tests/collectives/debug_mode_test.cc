// Debug mode: ranks that call different ops, or the same op with a different
// dtype, shape, reduce op, root or order, all fail with an error that shows
// both calls. Without debug mode a different op is still caught, and so are
// shapes that cannot fit together.
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::TestOptions;

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

// Runs `fn` on a debug-mode world of `n` ranks and returns each rank's
// status.
std::vector<absl::Status> RunDebug(
    int64_t n, const std::function<absl::Status(Communicator&)>& fn,
    bool debug = true) {
  return LocalCluster(n, TestOptions(absl::Seconds(30), debug))
      .RunPerRank([&](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto world, groups.World());
        return fn(*world);
      });
}

// Every rank failed with InvalidArgument, the same message, holding `texts`.
void ExpectMismatch(const std::vector<absl::Status>& statuses,
                    const std::vector<std::string>& texts) {
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message(), statuses[0].message());
    for (const std::string& text : texts) {
      EXPECT_TRUE(Contains(status, text)) << status << "\nmissing: " << text;
    }
  }
}

TEST(DebugModeTest, DifferentOpsShowBothCalls) {
  ExpectMismatch(
      RunDebug(2,
               [](Communicator& world) -> absl::Status {
                 Tensor tensor = Tensor::Ones({4}, DType::kF32).value();
                 if (world.rank() == 0) {
                   return world.AllReduce(tensor, ReduceOp::kSum);
                 }
                 Tensor output = Tensor::Zeros({8}, DType::kF32).value();
                 return world.AllGather(tensor, output, 0);
               }),
      {"mismatched collective calls on group [0, 1]",
       "rank 0 called all_reduce #0 (op=sum, tensor=f32[4])",
       "rank 1 called all_gather #0 (dim=0, sizes=[4, 4], input=f32[4], "
       "output=f32[8])"});
}

TEST(DebugModeTest, DifferentDTypesShowBothCalls) {
  ExpectMismatch(RunDebug(3,
                          [](Communicator& world) {
                            Tensor tensor =
                                Tensor::Ones({2, 3}, world.rank() == 2
                                                         ? DType::kF64
                                                         : DType::kF32)
                                    .value();
                            return world.AllReduce(tensor, ReduceOp::kMax);
                          }),
                 {"rank 0 called all_reduce #0 (op=max, tensor=f32[2, 3])",
                  "rank 2 called all_reduce #0 (op=max, tensor=f64[2, 3])"});
}

TEST(DebugModeTest, DifferentShapesShowBothCalls) {
  ExpectMismatch(
      RunDebug(
          2,
          [](Communicator& world) {
            Tensor tensor =
                Tensor::Ones({world.rank() == 0 ? 4 : 5}, DType::kI32).value();
            return world.Broadcast(tensor, 0);
          }),
      {"rank 0 called broadcast #0 (root=0, tensor=i32[4])",
       "rank 1 called broadcast #0 (root=0, tensor=i32[5])"});
}

TEST(DebugModeTest, DifferentReduceOpsAndRootsAreCaught) {
  ExpectMismatch(RunDebug(2,
                          [](Communicator& world) {
                            Tensor tensor =
                                Tensor::Ones({4}, DType::kF32).value();
                            return world.AllReduce(
                                tensor, world.rank() == 0 ? ReduceOp::kSum
                                                          : ReduceOp::kAvg);
                          }),
                 {"op=sum", "op=avg"});
  ExpectMismatch(RunDebug(2,
                          [](Communicator& world) {
                            Tensor tensor =
                                Tensor::Ones({4}, DType::kF32).value();
                            return world.Broadcast(tensor, world.rank());
                          }),
                 {"root=0", "root=1"});
}

TEST(DebugModeTest, CallsInADifferentOrderAreCaught) {
  ExpectMismatch(
      RunDebug(2,
               [](Communicator& world) -> absl::Status {
                 Tensor tensor = Tensor::Ones({4}, DType::kF32).value();
                 if (world.rank() == 0) {
                   DT_RETURN_IF_ERROR(world.Barrier());
                   return world.AllReduce(tensor, ReduceOp::kSum);
                 }
                 DT_RETURN_IF_ERROR(world.AllReduce(tensor, ReduceOp::kSum));
                 return world.Barrier();
               }),
      {"rank 0 called barrier #0", "rank 1 called all_reduce #0"});
}

TEST(DebugModeTest, MatchingCallsPass) {
  for (const absl::Status& status :
       RunDebug(3, [](Communicator& world) -> absl::Status {
         Tensor tensor = Tensor::Ones({4}, DType::kF32).value();
         DT_RETURN_IF_ERROR(world.AllReduce(tensor, ReduceOp::kSum));
         // Uneven all_gather: inputs differ, the call matches.
         Tensor piece = Tensor::Ones({world.rank()}, DType::kF32).value();
         Tensor output = Tensor::Zeros({3}, DType::kF32).value();
         const int64_t sizes[] = {0, 1, 2};
         DT_RETURN_IF_ERROR(world.AllGather(piece, output, 0, sizes));
         return world.Barrier();
       })) {
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(DebugModeTest, WithoutDebugModeADifferentOpIsStillCaught) {
  ExpectMismatch(RunDebug(
                     2,
                     [](Communicator& world) -> absl::Status {
                       Tensor tensor = Tensor::Ones({4}, DType::kF32).value();
                       if (world.rank() == 0) return world.Barrier();
                       return world.AllReduce(tensor, ReduceOp::kSum);
                     },
                     /*debug=*/false),
                 {"rank 0 called barrier #0 but rank 1 called all_reduce #0",
                  "DTENSOR_COLLECTIVES_DEBUG=1"});
}

TEST(DebugModeTest, WithoutDebugModeShapesThatDoNotFitAreCaught) {
  ExpectMismatch(
      RunDebug(
          2,
          [](Communicator& world) {
            Tensor tensor =
                Tensor::Ones({world.rank() == 0 ? 4 : 5}, DType::kF32).value();
            return world.AllReduce(tensor, ReduceOp::kSum);
          },
          /*debug=*/false),
      {"all_reduce #0 on group [0, 1]: ranks disagree on the "
       "tensor: rank 0 passed f32[4] but rank 1 passed f32[5]"});
  // all_gather sizes that disagree with a peer's input.
  ExpectMismatch(RunDebug(
                     2,
                     [](Communicator& world) {
                       Tensor piece = Tensor::Ones({2}, DType::kF32).value();
                       Tensor output = Tensor::Zeros({5}, DType::kF32).value();
                       const int64_t claims[2][2] = {{2, 3}, {3, 2}};
                       return world.AllGather(piece, output, 0,
                                              claims[world.rank()]);
                     },
                     /*debug=*/false),
                 {"ranks disagree on the piece sizes"});
}

TEST(DebugModeTest, EnvironmentVariableSwitchesItOn) {
  unsetenv(kCollectivesDebugEnvVar);
  EXPECT_FALSE(DebugModeFromEnvironment());
  EXPECT_FALSE(CommunicatorOptions().debug);
  for (const char* on : {"1", "true", "ON", "yes"}) {
    setenv(kCollectivesDebugEnvVar, on, 1);
    EXPECT_TRUE(DebugModeFromEnvironment()) << on;
    EXPECT_TRUE(CommunicatorOptions().debug) << on;
  }
  setenv(kCollectivesDebugEnvVar, "0", 1);
  EXPECT_FALSE(DebugModeFromEnvironment());
  unsetenv(kCollectivesDebugEnvVar);
}

}  // namespace
}  // namespace dtensor
