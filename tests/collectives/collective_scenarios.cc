#include "tests/collectives/collective_scenarios.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/functional.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::testing {

absl::Status Fail(absl::string_view what) {
  return absl::InternalError(std::string(what));
}

absl::Status ExpectMatch(const Tensor& actual, const HostTensor& expected,
                         absl::string_view what) {
  ::testing::AssertionResult result = testing::Matches(actual, expected);
  if (result) return absl::OkStatus();
  return Fail(absl::StrCat(what, ": ", result.message()));
}

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

namespace {

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

}  // namespace

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

}  // namespace dtensor::testing
