// One rank of the multi-process backend tests (gloo_test.cc and
// nccl_test.cc start it as several processes, like dtrun does): runs a
// scenario against references computed here from every rank's inputs
// (collective_test_util.h), prints what went wrong, and exits 0 when
// everything matched.
//
//   collective_worker <backend> <scenario>
//
// The backend is a registered one with a process per rank (gloo, nccl;
// dtensor/collectives/backend_registry.h).
//
// Scenarios: collectives, subgroups, debug, exit_mid_collective,
// missing_rank, p2p_deadline, missing_member, smoke, rank_order. With nccl the
// tensors live on the rank's CUDA device.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/backend_registry.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/functional.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/collectives/reduce_kernel.h"
#include "dtensor/tensor/generator.h"
#include "tests/collectives/collective_scenarios.h"
#include "tests/collectives/collective_test_util.h"
#include "tests/collectives/worker_exit.h"

namespace dtensor {
namespace {

using testing::Collectives;
using testing::ExpectError;
using testing::ExpectMatch;
using testing::Fail;
using testing::HostTensor;
using testing::Subgroups;

// The exit code of the rank that leaves mid-job in exit_mid_collective.
constexpr int kDepartedExitCode = 7;

// ---- Scenarios ----

CommunicatorOptions Options(absl::Duration deadline, bool debug = false) {
  CommunicatorOptions options;
  options.default_deadline = deadline;
  options.debug = debug;
  return options;
}

absl::Status Debug(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  const int64_t me = groups.rank();
  // Different shapes.
  Tensor tensor = Tensor::Ones({me == 0 ? 4 : 8}, DType::kF32).value();
  DT_RETURN_IF_ERROR(
      ExpectError(world->AllReduce(tensor, ReduceOp::kSum),
                  absl::StatusCode::kInvalidArgument,
                  {"mismatched collective calls on group [0, 1, 2]",
                   "rank 0 called all_reduce #0 (op=sum, tensor=f32[4])",
                   "but rank 1 called all_reduce #0 (op=sum, tensor=f32[8])"},
                  "all_reduce with different shapes"));
  // Different ops.
  Tensor same = Tensor::Ones({4}, DType::kF32).value();
  absl::Status status =
      me == 2 ? world->Barrier() : world->AllReduce(same, ReduceOp::kSum);
  DT_RETURN_IF_ERROR(ExpectError(
      status, absl::StatusCode::kInvalidArgument,
      {"mismatched collective calls", "but rank 2 called barrier #1"},
      "different ops"));
  // Pieces that do not fit: rank 0 sends 2 elements to rank 1, which
  // expects 1.
  const Tensor input = Tensor::Ones({3}, DType::kF32).value();
  const Tensor output = Tensor::Zeros({3}, DType::kF32).value();
  const std::vector<int64_t> sends =
      me == 0 ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{1, 1, 1};
  DT_RETURN_IF_ERROR(ExpectError(
      world->AllToAll(input, output, 0, 0, sends, {1, 1, 1}),
      absl::StatusCode::kInvalidArgument,
      {"all_to_all #2 on group [0, 1, 2]: rank 0 sends 8 bytes to rank 1, "
       "which expects 4"},
      "all_to_all with mismatched pieces"));
  // The communicator still works.
  Tensor ones = Tensor::Ones({5}, DType::kI32).value();
  DT_RETURN_IF_ERROR(world->AllReduce(ones, ReduceOp::kSum));
  DT_RETURN_IF_ERROR(ExpectMatch(ones,
                                 HostTensor{{5}, std::vector<double>(5, 3.0)},
                                 "all_reduce after the mismatches"));
  // A send and a recv of different shapes fail on both sides; the channel
  // stays usable.
  if (me < 2) {
    const Tensor sent = Tensor::Ones({4}, DType::kF32).value();
    const Tensor received = Tensor::Zeros({8}, DType::kF32).value();
    status = me == 0 ? world->Send(sent, 1) : world->Recv(received, 0);
    DT_RETURN_IF_ERROR(ExpectError(
        status, absl::StatusCode::kInvalidArgument,
        {"send/recv on group [0, 1, 2]: rank 0 sends f32[4] but rank 1 "
         "receives into f32[8]"},
        "mismatched send/recv"));
    const Tensor fits = Tensor::Zeros({4}, DType::kF32).value();
    DT_RETURN_IF_ERROR(me == 0 ? world->Send(sent, 1) : world->Recv(fits, 0));
    if (me == 1) {
      DT_RETURN_IF_ERROR(
          ExpectMatch(fits, HostTensor{{4}, std::vector<double>(4, 1.0)},
                      "send/recv after the mismatch"));
    }
  }
  return world->Barrier();
}

absl::Status ExitMidCollective(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  Tensor tensor = Tensor::Ones({1000}, DType::kF32).value();
  DT_RETURN_IF_ERROR(world->AllReduce(tensor, ReduceOp::kSum));
  if (groups.rank() == 2) {
    std::fflush(nullptr);
    ::_exit(kDepartedExitCode);
  }
  const absl::Time start = absl::Now();
  const absl::Status status = world->AllReduce(tensor, ReduceOp::kSum);
  DT_RETURN_IF_ERROR(
      ExpectError(status, absl::StatusCode::kUnavailable,
                  {"all_reduce #1 on group [0, 1, 2]", "ranks [2] exited"},
                  "all_reduce with an exited peer"));
  if (absl::Now() - start > absl::Seconds(10)) {
    return Fail("the peers of an exited rank waited for their deadline");
  }
  // Broken for good: later calls fail at once with the same error.
  return ExpectError(world->Barrier(), status.code(), {status.message()},
                     "a call on the broken communicator");
}

// Without debug mode nothing compares the calls: ranks that disagree on an
// all-reduce's size (rank 0's is large, so that its data would overflow the
// buffers the others post) must each end with an error at the deadline, the
// process alive (Gloo aborts on a message larger than its buffer).
absl::Status MismatchedSizes(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  DT_RETURN_IF_ERROR(world->Barrier());
  const int64_t me = groups.rank();
  Tensor tensor =
      Tensor::Ones({me == 0 ? 1 << 18 : 1 << 10}, DType::kF32).value();
  const absl::Status status = world->AllReduce(tensor, ReduceOp::kSum);
  if (status.ok()) return Fail("an all_reduce of mismatched sizes succeeded");
  return ExpectError(status, status.code(),
                     {"all_reduce #1 on group [0, 1, 2]"},
                     "all_reduce of mismatched sizes");
}

absl::Status MissingRank(ProcessGroups& groups) {
  const absl::Duration deadline = absl::Milliseconds(500);
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  DT_RETURN_IF_ERROR(world->Barrier());
  Tensor tensor = Tensor::Ones({16}, DType::kF32).value();
  const std::vector<absl::string_view> expected = {
      "all_reduce #1 on group [0, 1, 2]: ranks [2] did not arrive within "
      "500ms"};
  if (groups.rank() == 2) {
    // Arrives long after the others gave up: its call fails at once, with
    // their error.
    absl::SleepFor(3 * deadline);
    const absl::Time start = absl::Now();
    DT_RETURN_IF_ERROR(ExpectError(world->AllReduce(tensor, ReduceOp::kSum),
                                   absl::StatusCode::kDeadlineExceeded,
                                   {expected[0]}, "the late rank's call"));
    if (absl::Now() - start > absl::Seconds(3)) {
      return Fail("the late rank waited although its peers had given up");
    }
    return absl::OkStatus();
  }
  const absl::Time start = absl::Now();
  const absl::Status status = world->AllReduce(tensor, ReduceOp::kSum);
  const absl::Duration waited = absl::Now() - start;
  DT_RETURN_IF_ERROR(ExpectError(status, absl::StatusCode::kDeadlineExceeded,
                                 {expected[0]}, "all_reduce without rank 2"));
  if (waited < deadline * 0.9 || waited > deadline + absl::Seconds(3)) {
    return Fail(absl::StrCat("waited ", absl::FormatDuration(waited),
                             " for a deadline of 500ms"));
  }
  return ExpectError(world->Barrier(), status.code(), {status.message()},
                     "a call on the broken communicator");
}

absl::Status PointToPointDeadline(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  const int64_t me = groups.rank();
  CollectiveOptions quick;
  quick.deadline = absl::Milliseconds(200);
  // Both send first: neither receives in time.
  const Tensor tensor = Tensor::Ones({4}, DType::kF32).value();
  return ExpectError(world->Send(tensor, 1 - me, quick),
                     absl::StatusCode::kDeadlineExceeded,
                     {absl::StrCat("send on group [0, 1]: ranks [", 1 - me,
                                   "] did not receive within 200ms")},
                     "send that nobody receives");
}

// How long missing_member's ranks wait for the store, and for each other
// in the groups that order the scenario: long enough for any start-up.
constexpr absl::Duration kMissingMemberStartup = absl::Seconds(60);
// How long ranks 0 and 1 wait for rank 2 to join the world.
constexpr absl::Duration kMissingMemberJoin = absl::Seconds(1);

// Returns once `groups`' rank and `peer` have both made the group of the
// two, or the peer has gone: a signal between processes. The group is not
// used, and its creation may fail once the peer has connected and exited, so
// its status says nothing.
void Meet(ProcessGroups& groups, int64_t peer) {
  const int64_t me = groups.rank();
  groups.ForRanks({std::min(me, peer), std::max(me, peer)}).IgnoreError();
}

// Ranks 0 and 1 create the world, which rank 2 never joins, and get an error
// naming rank 2 alone. The short deadline covers only that: ranks 0 and 1
// first make group [0, 1] (so neither can miss the other because it started
// late), and rank 2 stays alive (so not "exited") until both have had their
// error, which they signal by meeting it. Every other wait has the long
// default deadline set in Main (this scenario's options set none), so process
// start-up under load cannot fail it; a wrong error, code or member list
// still does.
absl::Status MissingMember(ProcessGroups& groups) {
  const int64_t me = groups.rank();
  if (me == 2) {
    Meet(groups, 0);
    Meet(groups, 1);
    return absl::OkStatus();
  }
  DT_RETURN_IF_ERROR(groups.ForRanks({0, 1}).status());
  SetDefaultCollectiveDeadline(kMissingMemberJoin);
  const absl::Status world = groups.World().status();
  SetDefaultCollectiveDeadline(kMissingMemberStartup);
  Meet(groups, 2);
  return ExpectError(
      world, absl::StatusCode::kDeadlineExceeded,
      {"creating a communicator for group [0, 1, 2]: ranks [2] did not join "
       "within 1s"},
      "a group with a missing member");
}

absl::Status Smoke(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  Tensor tensor =
      Tensor::Full({3}, groups.rank() + 1, DType::kF32, world->device())
          .value();
  DT_RETURN_IF_ERROR(world->AllReduce(tensor, ReduceOp::kSum));
  const double n = groups.world_size();
  std::printf("rank %lld of %lld: sum %g\n",
              static_cast<long long>(groups.rank()),
              static_cast<long long>(groups.world_size()), tensor.At({0}));
  return ExpectMatch(tensor,
                     HostTensor{{3}, std::vector<double>(3, n * (n + 1) / 2)},
                     "smoke all_reduce");
}

// all_reduce adds in rank order, as the in-process backend does: every op
// on normals of three magnitudes (so that the order of the additions shows
// in the last bits) of every dtype equals, bit for bit, ReduceInto of every
// rank's input in rank order (docs/collectives_backends.md); no elements,
// one chunk of the chain and several with an uneven last one.
absl::Status RankOrder(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  const int64_t n = world->size();
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64,
                            DType::kI32, DType::kI64}) {
    for (const ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      if (op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) continue;
      std::vector<Shape> shapes = {Shape{0}, Shape{3, 1001}};
      // Several chunks of the chain, the last one shorter: sums of floats.
      if (IsFloatingPoint(dtype) && op == ReduceOp::kSum) {
        shapes.push_back(Shape{3, 50021});
      }
      for (const Shape& shape : shapes) {
        std::vector<Tensor> inputs;
        for (int64_t r = 0; r < n; ++r) {
          Generator generator(100 + r);
          DT_ASSIGN_OR_RETURN(Tensor input,
                              Tensor::Normal(shape, 0.0, std::pow(1e3, r % 3),
                                             generator, DType::kF64));
          DT_ASSIGN_OR_RETURN(input, input.To(dtype));
          inputs.push_back(std::move(input));
        }
        std::vector<const void*> pointers;
        for (const Tensor& input : inputs) pointers.push_back(input.raw_data());
        DT_ASSIGN_OR_RETURN(Tensor want, Tensor::Empty(shape, dtype));
        ReduceInto(dtype, op, pointers, want.raw_data(), want.numel());
        Tensor got = inputs[world->rank()];
        DT_RETURN_IF_ERROR(world->AllReduce(got, op));
        if (std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) != 0) {
          return Fail(absl::StrCat("all_reduce ", ReduceOpName(op), " of ",
                                   std::string(DTypeName(dtype)), " ",
                                   ShapeToString(shape),
                                   ": not the rank-order bits"));
        }
      }
    }
  }
  return absl::OkStatus();
}

struct Scenario {
  std::function<absl::Status(ProcessGroups&)> run;
  CommunicatorOptions options;
};

// The scenarios that use CPU tensors of their own run on Gloo only.
int Main(int argc, char** argv) {
  const std::map<std::string, Scenario> scenarios = {
      {"collectives", {Collectives, Options(absl::Seconds(30))}},
      {"subgroups", {Subgroups, Options(absl::Seconds(30))}},
      {"debug", {Debug, Options(absl::Seconds(30), /*debug=*/true)}},
      {"exit_mid_collective", {ExitMidCollective, Options(absl::Seconds(60))}},
      {"missing_rank", {MissingRank, Options(absl::Milliseconds(500))}},
      {"mismatched_sizes",
       {MismatchedSizes, Options(absl::Milliseconds(1500))}},
      {"p2p_deadline", {PointToPointDeadline, Options(absl::Seconds(60))}},
      // No deadline of its own: each wait takes the process-wide default.
      {"missing_member", {MissingMember, CommunicatorOptions()}},
      {"smoke", {Smoke, Options(absl::Seconds(30))}},
      {"rank_order", {RankOrder, Options(absl::Seconds(30))}},
  };
  absl::StatusOr<BackendDef> backend =
      BackendRegistry::Global().Find(argc == 3 ? argv[1] : "");
  auto scenario = argc == 3 ? scenarios.find(argv[2]) : scenarios.end();
  if (scenario == scenarios.end() || !backend.ok()) {
    std::fprintf(stderr, "usage: collective_worker <%s> <scenario>\n",
                 absl::StrJoin(BackendRegistry::Global().Names(), "|").c_str());
    return 2;
  }
  if (scenario->first == "missing_member") {
    SetDefaultCollectiveDeadline(kMissingMemberStartup);
  }
  RankLaunch launch;
  launch.communicator = scenario->second.options;
  return testing::RunWorker(*backend, launch, scenario->second.run);
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::Main(argc, argv); }
