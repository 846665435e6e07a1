// One rank of the multi-process backend tests (gloo_test.cc and
// nccl_test.cc start it as several processes, like dtrun does): runs a
// scenario against references computed here from every rank's inputs
// (collective_test_util.h), prints what went wrong, and exits 0 when
// everything matched.
//
//   collective_worker <gloo|nccl> <scenario>
//
// Scenarios: collectives, subgroups, debug, exit_mid_collective,
// missing_rank, p2p_deadline, missing_member, smoke. With nccl the tensors
// live on the rank's CUDA device.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
#include "base/status_macros.h"
#include "collectives/argument_checks.h"
#include "collectives/collective_options.h"
#include "collectives/functional.h"
#include "collectives/gloo/gloo_backend.h"
#include "collectives/nccl/nccl_backend.h"
#include "collectives/process_groups.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor {
namespace {

using testing::AllDTypes;
using testing::ConcatHost;
using testing::HostTensor;
using testing::NarrowHost;
using testing::RandomHost;
using testing::RandomPieces;
using testing::RandomShape;
using testing::ReduceHost;
using testing::ToTensor;

// The exit code of the rank that leaves mid-job in exit_mid_collective.
constexpr int kDepartedExitCode = 7;

absl::Status Fail(absl::string_view what) {
  return absl::InternalError(std::string(what));
}

absl::Status ExpectMatch(const Tensor& actual, const HostTensor& expected,
                         absl::string_view what) {
  ::testing::AssertionResult result = testing::Matches(actual, expected);
  if (result) return absl::OkStatus();
  return Fail(absl::StrCat(what, ": ", result.message()));
}

// `status` has `code` and its message contains every one of `parts`.
absl::Status ExpectError(const absl::Status& status, absl::StatusCode code,
                         std::initializer_list<absl::string_view> parts,
                         absl::string_view what) {
  bool matches = status.code() == code;
  for (absl::string_view part : parts) {
    matches = matches && absl::StrContains(status.message(), part);
  }
  if (matches) return absl::OkStatus();
  return Fail(absl::StrCat(what, ": expected ", absl::StatusCodeToString(code),
                           " containing [", absl::StrJoin(parts, "] and ["),
                           "], got ", status.ToString()));
}

// A tensor of `dtype` on `device` with the values of `host`: contiguous, or
// a strided view (ToTensor's layout, the whole buffer moved to the device).
Tensor Place(const HostTensor& host, DType dtype, Device device,
             bool contiguous = true) {
  const Tensor cpu = ToTensor(host, dtype, contiguous);
  if (device.is_cpu()) return cpu;
  const int64_t buffer_numel =
      cpu.storage()->nbytes() / static_cast<int64_t>(ElementSize(dtype));
  const Tensor buffer =
      Tensor::FromStorage(cpu.storage(), dtype, {buffer_numel}, {1}, 0)
          .value()
          .To(device)
          .value();
  return Tensor::FromStorage(buffer.storage(), dtype, cpu.shape(),
                             cpu.strides(), cpu.storage_offset())
      .value();
}

Shape WithDim(Shape shape, int64_t dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

HostTensor Zeros(const Shape& shape) {
  return HostTensor{shape, std::vector<double>(NumElements(shape), 0.0)};
}

std::string Name(absl::string_view op, DType dtype, const Shape& shape,
                 int64_t call) {
  return absl::StrCat(op, " #", call, " ", std::string(DTypeName(dtype)),
                      ShapeToString(shape));
}

int64_t Pick(std::mt19937& rng, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

// The state every rank of a group advances alike: the shared random
// source of shapes and sizes, and the call counter that seeds the inputs
// (rank r's input of call c is RandomHost(shape, dtype, c * 1000 + r)).
struct Cases {
  explicit Cases(Communicator& comm)
      : comm(comm), device(comm.device()), rng(2024) {}

  uint64_t Seed(int64_t rank) const { return call * 1000 + rank; }
  // Every rank's input of the current call.
  std::vector<HostTensor> Inputs(const std::vector<Shape>& shapes,
                                 DType dtype) const {
    std::vector<HostTensor> inputs;
    for (int64_t r = 0; r < comm.size(); ++r) {
      inputs.push_back(RandomHost(shapes[r], dtype, Seed(r)));
    }
    return inputs;
  }
  std::vector<Shape> Same(const Shape& shape) const {
    return std::vector<Shape>(comm.size(), shape);
  }
  // Case `k`'s dtype: every dtype in turn.
  static DType DTypeOf(int64_t k) { return AllDTypes()[k % 7]; }
  Tensor Make(const HostTensor& host, DType dtype, bool contiguous = true) {
    return Place(host, dtype, device, contiguous);
  }

  Communicator& comm;
  const Device device;
  std::mt19937 rng;
  int64_t call = 0;
};

absl::Status TestAllReduce(Cases& c) {
  const int64_t me = c.comm.rank();
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    for (DType dtype : AllDTypes()) {
      if (op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) continue;
      for (bool contiguous : {true, false}) {
        const Shape shape = RandomShape(c.rng);
        ++c.call;
        const std::vector<HostTensor> inputs = c.Inputs(c.Same(shape), dtype);
        Tensor tensor = c.Make(inputs[me], dtype, contiguous);
        DT_RETURN_IF_ERROR(c.comm.AllReduce(tensor, op));
        DT_RETURN_IF_ERROR(
            ExpectMatch(tensor, ReduceHost(inputs, op, dtype),
                        absl::StrCat(Name("all_reduce", dtype, shape, c.call),
                                     " ", ReduceOpName(op))));
      }
    }
  }
  // Empty tensors and a large one (several Gloo segments).
  for (const Shape& shape : {Shape{0, 3}, Shape{3, 70000}}) {
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(c.Same(shape), DType::kF32);
    Tensor tensor = c.Make(inputs[me], DType::kF32);
    DT_RETURN_IF_ERROR(c.comm.AllReduce(tensor, ReduceOp::kSum));
    DT_RETURN_IF_ERROR(
        ExpectMatch(tensor, ReduceHost(inputs, ReduceOp::kSum, DType::kF32),
                    Name("all_reduce", DType::kF32, shape, c.call)));
  }
  return absl::OkStatus();
}

absl::Status TestAllGather(Cases& c) {
  const int64_t n = c.comm.size();
  const int64_t me = c.comm.rank();
  for (int k = 0; k < 24; ++k) {
    const DType dtype = Cases::DTypeOf(k);
    const Shape base = RandomShape(c.rng);
    const int64_t dim = Pick(c.rng, 0, base.size() - 1);
    const bool equal = k % 4 == 0;
    const std::vector<int64_t> sizes =
        equal ? std::vector<int64_t>(n, base[dim]) : RandomPieces(n, 3, c.rng);
    std::vector<Shape> shapes;
    for (int64_t size : sizes) shapes.push_back(WithDim(base, dim, size));
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(shapes, dtype);
    const Tensor input = c.Make(inputs[me], dtype, k % 2 == 0);
    const Shape out_shape = WithDim(base, dim, SumOf(sizes));
    const Tensor output = c.Make(Zeros(out_shape), dtype, k % 3 != 0);
    const int64_t passed_dim = k % 5 == 0 ? dim - base.size() : dim;
    DT_RETURN_IF_ERROR(c.comm.AllGather(
        input, output, passed_dim, equal ? std::vector<int64_t>() : sizes));
    DT_RETURN_IF_ERROR(
        ExpectMatch(output, ConcatHost(inputs, dim),
                    Name("all_gather", dtype, out_shape, c.call)));
  }
  // The allocating form learns the sizes from the peers.
  ++c.call;
  std::vector<Shape> shapes;
  for (int64_t r = 0; r < n; ++r) shapes.push_back({r % 3, 2});
  const std::vector<HostTensor> inputs = c.Inputs(shapes, DType::kI64);
  DT_ASSIGN_OR_RETURN(Tensor gathered,
                      AllGather(c.comm, c.Make(inputs[me], DType::kI64), 0));
  return ExpectMatch(gathered, ConcatHost(inputs, 0), "functional AllGather");
}

absl::Status TestReduceScatter(Cases& c) {
  const int64_t n = c.comm.size();
  const int64_t me = c.comm.rank();
  for (int k = 0; k < 28; ++k) {
    const DType dtype = AllDTypes()[k % 7];
    ReduceOp op = static_cast<ReduceOp>(Pick(c.rng, 0, 3));
    if (op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) op = ReduceOp::kMax;
    Shape base = RandomShape(c.rng);
    const int64_t dim = Pick(c.rng, 0, base.size() - 1);
    const bool equal = k % 4 == 0;
    const std::vector<int64_t> sizes =
        equal ? std::vector<int64_t>(n, base[dim]) : RandomPieces(n, 3, c.rng);
    base[dim] = SumOf(sizes);
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(c.Same(base), dtype);
    const Tensor input = c.Make(inputs[me], dtype, k % 2 == 0);
    const Tensor output =
        c.Make(Zeros(WithDim(base, dim, sizes[me])), dtype, k % 3 != 0);
    DT_RETURN_IF_ERROR(c.comm.ReduceScatter(
        input, output, dim, op, equal ? std::vector<int64_t>() : sizes));
    DT_RETURN_IF_ERROR(
        ExpectMatch(output,
                    NarrowHost(ReduceHost(inputs, op, dtype), dim,
                               OffsetOf(sizes, me), sizes[me]),
                    absl::StrCat(Name("reduce_scatter", dtype, base, c.call),
                                 " ", ReduceOpName(op))));
  }
  return absl::OkStatus();
}

absl::Status TestAllToAll(Cases& c) {
  const int64_t n = c.comm.size();
  const int64_t me = c.comm.rank();
  for (int k = 0; k < 16; ++k) {
    const DType dtype = Cases::DTypeOf(k);
    Shape base = RandomShape(c.rng);
    if (base.size() == 1) base.push_back(Pick(c.rng, 1, 3));
    const int64_t split = Pick(c.rng, 0, base.size() - 1);
    const int64_t concat = k % 3 == 0 ? split : Pick(c.rng, 0, base.size() - 1);
    // sends[i][j]: rows rank i sends rank j along the split dim.
    std::vector<std::vector<int64_t>> sends(n);
    std::vector<Shape> in_shapes(n);
    std::vector<Shape> out_shapes(n);
    std::vector<std::vector<int64_t>> recvs(n);
    if (split == concat) {
      for (auto& row : sends) row = RandomPieces(n, 2, c.rng);
      for (int64_t i = 0; i < n; ++i) {
        in_shapes[i] = WithDim(base, split, SumOf(sends[i]));
        for (int64_t j = 0; j < n; ++j) recvs[j].push_back(sends[i][j]);
      }
      for (int64_t j = 0; j < n; ++j) {
        out_shapes[j] = WithDim(base, split, SumOf(recvs[j]));
      }
    } else {
      // Pieces meet along the concat dim: their split-dim sizes agree per
      // receiver, their concat-dim sizes are the senders'.
      const std::vector<int64_t> rows = RandomPieces(n, 2, c.rng);
      const std::vector<int64_t> cols = RandomPieces(n, 2, c.rng);
      for (int64_t i = 0; i < n; ++i) {
        sends[i] = rows;
        recvs[i] = cols;
        in_shapes[i] =
            WithDim(WithDim(base, split, SumOf(rows)), concat, cols[i]);
        out_shapes[i] =
            WithDim(WithDim(base, split, rows[i]), concat, SumOf(cols));
      }
    }
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(in_shapes, dtype);
    std::vector<HostTensor> pieces;
    for (int64_t i = 0; i < n; ++i) {
      pieces.push_back(
          NarrowHost(inputs[i], split, OffsetOf(sends[i], me), sends[i][me]));
    }
    const Tensor input = c.Make(inputs[me], dtype, k % 2 == 0);
    const Tensor output = c.Make(Zeros(out_shapes[me]), dtype, k % 3 != 1);
    DT_RETURN_IF_ERROR(
        c.comm.AllToAll(input, output, split, concat, sends[me], recvs[me]));
    DT_RETURN_IF_ERROR(ExpectMatch(
        output, ConcatHost(pieces, concat),
        absl::StrCat(Name("all_to_all", dtype, in_shapes[me], c.call),
                     " split ", split, " concat ", concat)));
  }
  return absl::OkStatus();
}

absl::Status TestRooted(Cases& c) {
  const int64_t n = c.comm.size();
  const int64_t me = c.comm.rank();
  for (int64_t root = 0; root < n; ++root) {
    for (int k = 0; k < 3; ++k) {
      const DType dtype = Cases::DTypeOf(root * 3 + k);
      // Broadcast.
      const Shape shape = RandomShape(c.rng);
      ++c.call;
      const HostTensor source = RandomHost(shape, dtype, c.Seed(root));
      Tensor tensor = c.Make(me == root ? source : Zeros(shape), dtype, k != 1);
      DT_RETURN_IF_ERROR(c.comm.Broadcast(tensor, root));
      DT_RETURN_IF_ERROR(
          ExpectMatch(tensor, source, Name("broadcast", dtype, shape, c.call)));
      // Scatter: uneven pieces, or equal ones.
      Shape base = RandomShape(c.rng);
      const int64_t dim = Pick(c.rng, 0, base.size() - 1);
      const std::vector<int64_t> sizes =
          k == 0 ? std::vector<int64_t>(n, base[dim])
                 : RandomPieces(n, 3, c.rng);
      ++c.call;
      const HostTensor whole =
          RandomHost(WithDim(base, dim, SumOf(sizes)), dtype, c.Seed(root));
      const Tensor input = me == root ? c.Make(whole, dtype, k != 2) : Tensor();
      const Tensor piece =
          c.Make(Zeros(WithDim(base, dim, sizes[me])), dtype, k != 1);
      DT_RETURN_IF_ERROR(c.comm.Scatter(input, piece, dim, root, sizes));
      DT_RETURN_IF_ERROR(ExpectMatch(
          piece, NarrowHost(whole, dim, OffsetOf(sizes, me), sizes[me]),
          Name("scatter", dtype, whole.shape, c.call)));
      // Gather.
      std::vector<Shape> shapes;
      for (int64_t size : sizes) shapes.push_back(WithDim(base, dim, size));
      ++c.call;
      const std::vector<HostTensor> inputs = c.Inputs(shapes, dtype);
      const Tensor output =
          me == root
              ? c.Make(Zeros(WithDim(base, dim, SumOf(sizes))), dtype, k != 2)
              : Tensor();
      DT_RETURN_IF_ERROR(c.comm.Gather(c.Make(inputs[me], dtype, k != 0),
                                       output, dim, root, sizes));
      if (me == root) {
        DT_RETURN_IF_ERROR(ExpectMatch(output, ConcatHost(inputs, dim),
                                       Name("gather", dtype, base, c.call)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TestPointToPoint(Cases& c) {
  const int64_t n = c.comm.size();
  const int64_t me = c.comm.rank();
  for (int k = 0; k < 7; ++k) {
    const DType dtype = Cases::DTypeOf(k);
    // Permute: a random permutation, some ranks left out (self pairs
    // allowed).
    std::vector<int64_t> targets(n);
    std::iota(targets.begin(), targets.end(), 0);
    std::shuffle(targets.begin(), targets.end(), c.rng);
    std::vector<PermutePair> pairs;
    std::vector<Shape> shapes(n);
    for (int64_t src = 0; src < n; ++src) {
      shapes[src] = RandomShape(c.rng);
      if (Pick(c.rng, 0, 3) != 0) pairs.push_back({src, targets[src]});
    }
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(shapes, dtype);
    Tensor input;
    Tensor output;
    std::optional<int64_t> from;
    for (const PermutePair& pair : pairs) {
      if (pair.src == me) input = c.Make(inputs[me], dtype, k % 2 == 0);
      if (pair.dst == me) {
        from = pair.src;
        output = c.Make(Zeros(shapes[pair.src]), dtype, k % 3 != 0);
      }
    }
    DT_RETURN_IF_ERROR(c.comm.Permute(input, output, pairs));
    if (from.has_value()) {
      DT_RETURN_IF_ERROR(
          ExpectMatch(output, inputs[*from],
                      Name("permute", dtype, shapes[*from], c.call)));
    }
  }
  if (n < 2) return absl::OkStatus();
  // A ring of sends and receives: each rank sends first (asynchronously).
  for (int k = 0; k < 7; ++k) {
    const DType dtype = Cases::DTypeOf(k);
    std::vector<Shape> shapes(n);
    for (Shape& shape : shapes) shape = RandomShape(c.rng);
    ++c.call;
    const std::vector<HostTensor> inputs = c.Inputs(shapes, dtype);
    const int64_t next = (me + 1) % n;
    const int64_t prev = (me + n - 1) % n;
    std::shared_ptr<Work> sent =
        c.comm.SendAsync(c.Make(inputs[me], dtype, k % 2 == 0), next);
    const Tensor received = c.Make(Zeros(shapes[prev]), dtype, k % 2 == 1);
    DT_RETURN_IF_ERROR(c.comm.Recv(received, prev));
    DT_RETURN_IF_ERROR(sent->Wait());
    DT_RETURN_IF_ERROR(
        ExpectMatch(received, inputs[prev],
                    Name("send/recv", dtype, shapes[prev], c.call)));
  }
  return absl::OkStatus();
}

absl::Status TestAsync(Cases& c) {
  const int64_t me = c.comm.rank();
  std::vector<std::vector<HostTensor>> inputs;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 4; ++k) {
    const Shape shape = RandomShape(c.rng);
    ++c.call;
    inputs.push_back(c.Inputs(c.Same(shape), DType::kF64));
    tensors.push_back(c.Make(inputs.back()[me], DType::kF64));
    works.push_back(c.comm.AllReduceAsync(tensors.back(), ReduceOp::kSum));
  }
  works.push_back(c.comm.BarrierAsync());
  for (size_t k = 0; k < works.size(); ++k) {
    DT_RETURN_IF_ERROR(works[k]->Wait());
    if (k == tensors.size()) continue;
    DT_RETURN_IF_ERROR(ExpectMatch(
        tensors[k], ReduceHost(inputs[k], ReduceOp::kSum, DType::kF64),
        absl::StrCat("async all_reduce ", k)));
  }
  return c.comm.Barrier();
}

absl::Status RunAll(Communicator& comm) {
  Cases cases(comm);
  DT_RETURN_IF_ERROR(TestAllReduce(cases));
  DT_RETURN_IF_ERROR(TestAllGather(cases));
  DT_RETURN_IF_ERROR(TestReduceScatter(cases));
  DT_RETURN_IF_ERROR(TestAllToAll(cases));
  DT_RETURN_IF_ERROR(TestRooted(cases));
  DT_RETURN_IF_ERROR(TestPointToPoint(cases));
  return TestAsync(cases);
}

// ---- Scenarios ----

CommunicatorOptions Options(absl::Duration deadline, bool debug = false) {
  CommunicatorOptions options;
  options.default_deadline = deadline;
  options.debug = debug;
  return options;
}

absl::Status Collectives(ProcessGroups& groups) {
  DT_ASSIGN_OR_RETURN(auto world, groups.World());
  return RunAll(*world);
}

// Groups in reverse order, pairs of neighbours and strided pairs, used in
// turn; every rank runs the same cases on its groups.
absl::Status Subgroups(ProcessGroups& groups) {
  const int64_t n = groups.world_size();
  const int64_t me = groups.rank();
  std::vector<int64_t> reversed(n);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  DT_ASSIGN_OR_RETURN(auto backwards, groups.ForRanks(reversed));
  DT_RETURN_IF_ERROR(RunAll(*backwards));
  if (n % 2 != 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(auto neighbours,
                      groups.ForRanks({me - me % 2, me - me % 2 + 1}));
  const int64_t half = n / 2;
  DT_ASSIGN_OR_RETURN(auto strided,
                      groups.ForRanks({me % half, me % half + half}));
  Cases on_neighbours(*neighbours);
  Cases on_strided(*strided);
  DT_RETURN_IF_ERROR(TestAllReduce(on_neighbours));
  DT_RETURN_IF_ERROR(TestAllGather(on_strided));
  DT_RETURN_IF_ERROR(TestPointToPoint(on_neighbours));
  return TestReduceScatter(on_strided);
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
      {"p2p_deadline", {PointToPointDeadline, Options(absl::Seconds(60))}},
      // No deadline of its own: each wait takes the process-wide default.
      {"missing_member", {MissingMember, CommunicatorOptions()}},
      {"smoke", {Smoke, Options(absl::Seconds(30))}},
  };
  const std::string backend_name = argc == 3 ? argv[1] : "";
  auto scenario = argc == 3 ? scenarios.find(argv[2]) : scenarios.end();
  if (scenario == scenarios.end() ||
      (backend_name != "gloo" && backend_name != "nccl")) {
    std::fprintf(stderr, "usage: collective_worker <gloo|nccl> <scenario>\n");
    return 2;
  }
  if (scenario->first == "missing_member") {
    SetDefaultCollectiveDeadline(kMissingMemberStartup);
  }
  absl::StatusOr<std::shared_ptr<Backend>> backend =
      backend_name == "gloo" ? GlooBackendFromEnv(scenario->second.options)
                             : NcclBackendFromEnv(scenario->second.options);
  absl::Status status = backend.status();
  if (status.ok()) {
    ProcessGroups groups(*backend);
    status = scenario->second.run(groups);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) { return dtensor::Main(argc, argv); }
