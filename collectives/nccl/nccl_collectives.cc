// The collective bodies of NcclCommunicator: per op, the staging buffers it
// needs and the NCCL (and copy) calls it enqueues. Launching, waiting and
// failure handling are in nccl_communicator.cc.

#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/multiprocess/piece_geometry.h"
#include "dtensor/collectives/nccl/nccl_communicator.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/tensor_copies_cuda.h"

namespace dtensor {
namespace {

// NCCL's element type for each C++ type a DType stores (bool as its byte):
// a dtype added to DTENSOR_FOR_EACH_DTYPE without one fails to compile.
template <typename T>
struct NcclTypeOf;
template <ncclDataType_t kType>
using NcclTypeIs = std::integral_constant<ncclDataType_t, kType>;
template <>
struct NcclTypeOf<float> : NcclTypeIs<ncclFloat32> {};
template <>
struct NcclTypeOf<double> : NcclTypeIs<ncclFloat64> {};
template <>
struct NcclTypeOf<BFloat16> : NcclTypeIs<ncclBfloat16> {};
template <>
struct NcclTypeOf<Half> : NcclTypeIs<ncclFloat16> {};
template <>
struct NcclTypeOf<int32_t> : NcclTypeIs<ncclInt32> {};
template <>
struct NcclTypeOf<int64_t> : NcclTypeIs<ncclInt64> {};
template <>
struct NcclTypeOf<bool> : NcclTypeIs<ncclUint8> {};

ncclDataType_t NcclType(DType dtype) {
  return DispatchDType(
      dtype, [](auto tag) { return NcclTypeOf<decltype(tag)>::value; });
}

// On bool, sum and max are logical or (max of 0/1), min is logical and.
ncclRedOp_t NcclOp(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::kSum:
      return dtype == DType::kBool ? ncclMax : ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

char* Ptr(const Tensor& tensor) {
  return static_cast<char*>(tensor.raw_data());
}

bool Same(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset();
}

// `tensor` when contiguous (or undefined), else a contiguous scratch tensor
// of its shape on its device.
absl::StatusOr<Tensor> ContiguousBuffer(const Tensor& tensor) {
  if (!tensor.defined() || tensor.is_contiguous()) return tensor;
  return Tensor::Empty(tensor.shape(), tensor.dtype(), tensor.device());
}

// Copies view `from` into view `to` (same shape and dtype) on `stream`.
absl::Status CopyView(const Tensor& to, const Tensor& from,
                      cudaStream_t stream) {
  return cuda::CopyOnStream(from, to, stream);
}

// Copies `from` into its staging buffer `to` unless they are the same.
absl::Status Stage(const Tensor& to, const Tensor& from, cudaStream_t stream) {
  if (Same(to, from)) return absl::OkStatus();
  return CopyView(to, from, stream);
}

absl::Status Pack(const Tensor& packed, const Tensor& tensor, int64_t dim,
                  absl::Span<const int64_t> sizes, cudaStream_t stream) {
  if (Same(packed, tensor) || PiecesAreRanges(tensor, dim)) {
    return absl::OkStatus();
  }
  return ForEachPackedPiece(packed, tensor, dim, sizes,
                            [stream](const Tensor& piece, const Tensor& view) {
                              return CopyView(view, piece, stream);
                            });
}

absl::Status Unpack(const Tensor& packed, const Tensor& tensor, int64_t dim,
                    absl::Span<const int64_t> sizes, cudaStream_t stream) {
  if (PiecesAreRanges(tensor, dim)) return absl::OkStatus();
  return ForEachPackedPiece(packed, tensor, dim, sizes,
                            [stream](const Tensor& piece, const Tensor& view) {
                              return CopyView(piece, view, stream);
                            });
}

absl::Status DeviceCopy(char* dst, const char* src, int64_t bytes,
                        cudaStream_t stream) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  return FromCuda(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
      "cudaMemcpyAsync");
}

// Enqueues a send (`send`) or a receive of `bytes` bytes at `buffer` with
// group rank `peer`, inside an NCCL group (whose end reports errors).
void Transfer(bool send, char* buffer, int64_t bytes, int64_t peer,
              ncclComm_t comm, cudaStream_t stream) {
  if (send) {
    ncclSend(buffer, bytes, ncclUint8, static_cast<int>(peer), comm, stream);
  } else {
    ncclRecv(buffer, bytes, ncclUint8, static_cast<int>(peer), comm, stream);
  }
}

// The transfers of scatter (`scatter`: the root sends piece r of `packed` to
// rank r) or gather (the root receives piece r into `packed` from rank r), in
// one NCCL group (whose errors name the collective). `bytes` are the pieces'
// sizes; `mine` is this
// rank's piece off the root. The root's own piece stays where it is.
absl::Status ExchangeWithRoot(bool scatter, int64_t root, int64_t me,
                              const std::vector<int64_t>& bytes, char* packed,
                              char* mine, ncclComm_t comm,
                              cudaStream_t stream) {
  DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
  if (me == root) {
    for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()); ++r) {
      if (r == me || bytes[r] == 0) continue;
      Transfer(scatter, packed + OffsetOf(bytes, r), bytes[r], r, comm, stream);
    }
  } else if (bytes[me] > 0) {
    Transfer(!scatter, mine, bytes[me], root, comm, stream);
  }
  return FromNccl(ncclGroupEnd(), scatter ? "scatter" : "gather");
}

}  // namespace

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const AllReduceArgs& args) const {
  DT_ASSIGN_OR_RETURN(Tensor staged, ContiguousBuffer(args.tensor));
  return Prepared{{args.tensor, staged},
                  [tensor = args.tensor, op = args.op, staged](
                      ncclComm_t comm, cudaStream_t stream) -> absl::Status {
                    if (tensor.numel() == 0) return absl::OkStatus();
                    DT_RETURN_IF_ERROR(Stage(staged, tensor, stream));
                    DT_RETURN_IF_ERROR(FromNccl(
                        ncclAllReduce(Ptr(staged), Ptr(staged), staged.numel(),
                                      NcclType(tensor.dtype()),
                                      NcclOp(op, tensor.dtype()), comm, stream),
                        "ncclAllReduce"));
                    return Stage(tensor, staged, stream);
                  }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const AllGatherArgs& args) const {
  DT_ASSIGN_OR_RETURN(Tensor in, ContiguousBuffer(args.input));
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(args.output, args.dim));
  const std::vector<int64_t> bytes =
      PieceBytes(args.output, args.dim, args.sizes);
  return Prepared{
      {args.input, args.output, in, packed},
      [args, bytes, me = rank(), in, packed](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (SumOf(bytes) == 0) return absl::OkStatus();
        DT_RETURN_IF_ERROR(Stage(in, args.input, stream));
        if (AllEqual(bytes)) {
          DT_RETURN_IF_ERROR(
              FromNccl(ncclAllGather(Ptr(in), Ptr(packed), bytes[0], ncclUint8,
                                     comm, stream),
                       "ncclAllGather"));
        } else {
          // Uneven pieces: every rank sends its piece to every other.
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
          for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()); ++r) {
            if (r == me) continue;
            if (bytes[r] > 0) {
              ncclRecv(Ptr(packed) + OffsetOf(bytes, r), bytes[r], ncclUint8,
                       static_cast<int>(r), comm, stream);
            }
            if (bytes[me] > 0) {
              ncclSend(Ptr(in), bytes[me], ncclUint8, static_cast<int>(r), comm,
                       stream);
            }
          }
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "all_gather"));
          DT_RETURN_IF_ERROR(DeviceCopy(Ptr(packed) + OffsetOf(bytes, me),
                                        Ptr(in), bytes[me], stream));
        }
        return Unpack(packed, args.output, args.dim, args.sizes, stream);
      }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const ReduceScatterArgs& args) const {
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(args.input, args.dim));
  DT_ASSIGN_OR_RETURN(Tensor out, ContiguousBuffer(args.output));
  const int64_t per_index = ElementsPerIndex(args.input.shape(), args.dim);
  return Prepared{
      {args.input, args.output, packed, out},
      [args, per_index, me = rank(), packed, out](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        const std::vector<int64_t>& sizes = args.sizes;
        if (args.input.numel() == 0) return absl::OkStatus();
        DT_RETURN_IF_ERROR(Pack(packed, args.input, args.dim, sizes, stream));
        const ncclDataType_t type = NcclType(args.input.dtype());
        const ncclRedOp_t reduce = NcclOp(args.op, args.input.dtype());
        if (AllEqual(sizes)) {
          DT_RETURN_IF_ERROR(FromNccl(
              ncclReduceScatter(Ptr(packed), Ptr(out), sizes[me] * per_index,
                                type, reduce, comm, stream),
              "ncclReduceScatter"));
        } else {
          // Uneven pieces: NCCL has no reduce-scatter-v; one reduce per
          // piece, to its owner, in one group.
          const int64_t element = ElementSize(args.input.dtype());
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
          for (int64_t r = 0; r < static_cast<int64_t>(sizes.size()); ++r) {
            if (sizes[r] == 0) continue;
            char* piece =
                Ptr(packed) + OffsetOf(sizes, r) * per_index * element;
            ncclReduce(piece, r == me ? Ptr(out) : piece, sizes[r] * per_index,
                       type, reduce, static_cast<int>(r), comm, stream);
          }
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "reduce_scatter"));
        }
        return Stage(args.output, out, stream);
      }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const AllToAllArgs& args) const {
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(args.input, args.split_dim));
  DT_ASSIGN_OR_RETURN(Tensor received,
                      PackedBuffer(args.output, args.concat_dim));
  const std::vector<int64_t> sends =
      PieceBytes(args.input, args.split_dim, args.send_sizes);
  const std::vector<int64_t> receives =
      PieceBytes(args.output, args.concat_dim, args.recv_sizes);
  return Prepared{
      {args.input, args.output, packed, received},
      [args, sends, receives, me = rank(), packed, received](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        DT_RETURN_IF_ERROR(
            Pack(packed, args.input, args.split_dim, args.send_sizes, stream));
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
        for (int64_t r = 0; r < static_cast<int64_t>(sends.size()); ++r) {
          if (r == me) continue;
          if (sends[r] > 0) {
            ncclSend(Ptr(packed) + OffsetOf(sends, r), sends[r], ncclUint8,
                     static_cast<int>(r), comm, stream);
          }
          if (receives[r] > 0) {
            ncclRecv(Ptr(received) + OffsetOf(receives, r), receives[r],
                     ncclUint8, static_cast<int>(r), comm, stream);
          }
        }
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "all_to_all"));
        DT_RETURN_IF_ERROR(DeviceCopy(Ptr(received) + OffsetOf(receives, me),
                                      Ptr(packed) + OffsetOf(sends, me),
                                      receives[me], stream));
        return Unpack(received, args.output, args.concat_dim, args.recv_sizes,
                      stream);
      }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const BroadcastArgs& args) const {
  DT_ASSIGN_OR_RETURN(Tensor staged, ContiguousBuffer(args.tensor));
  return Prepared{
      {args.tensor, staged},
      [tensor = args.tensor, root = args.root, is_root = rank() == args.root,
       staged](ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (tensor.numel() == 0) return absl::OkStatus();
        if (is_root) DT_RETURN_IF_ERROR(Stage(staged, tensor, stream));
        DT_RETURN_IF_ERROR(FromNccl(
            ncclBroadcast(Ptr(staged), Ptr(staged), staged.nbytes(), ncclUint8,
                          static_cast<int>(root), comm, stream),
            "ncclBroadcast"));
        return is_root ? absl::OkStatus() : Stage(tensor, staged, stream);
      }};
}

template <typename Direction>
absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const RootedPiecesArgs<Direction>& args) const {
  constexpr bool kScatter =
      std::is_same_v<RootedPiecesArgs<Direction>, ScatterArgs>;
  // `local` is this rank's piece (scatter's output, gather's input);
  // `rooted` the root's whole tensor, undefined off the root, as is `packed`.
  const Tensor& local = kScatter ? args.output : args.input;
  const Tensor& rooted = kScatter ? args.input : args.output;
  DT_ASSIGN_OR_RETURN(Tensor mine, ContiguousBuffer(local));
  DT_ASSIGN_OR_RETURN(Tensor packed, PackedBuffer(rooted, args.dim));
  const std::vector<int64_t> bytes = PieceBytes(local, args.dim, args.sizes);
  return Prepared{
      {args.input, args.output, mine, packed},
      [local, rooted, dim = args.dim, root = args.root, sizes = args.sizes,
       bytes, me = rank(), mine,
       packed](ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        const bool is_root = me == root;
        if (kScatter && is_root) {
          DT_RETURN_IF_ERROR(Pack(packed, rooted, dim, sizes, stream));
        }
        if (!kScatter) DT_RETURN_IF_ERROR(Stage(mine, local, stream));
        DT_RETURN_IF_ERROR(ExchangeWithRoot(
            kScatter, root, me, bytes, Ptr(packed), Ptr(mine), comm, stream));
        // The root's own piece moves between its buffers by a copy.
        char* const own = Ptr(packed) + (is_root ? OffsetOf(bytes, me) : 0);
        if (kScatter) {
          if (is_root) {
            DT_RETURN_IF_ERROR(DeviceCopy(Ptr(mine), own, bytes[me], stream));
          }
          return Stage(local, mine, stream);
        }
        if (!is_root) return absl::OkStatus();
        DT_RETURN_IF_ERROR(DeviceCopy(own, Ptr(mine), bytes[me], stream));
        return Unpack(packed, rooted, dim, sizes, stream);
      }};
}
template absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const ScatterArgs& args) const;
template absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const GatherArgs& args) const;

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const PermuteArgs& args) const {
  // `args.input` is undefined unless this rank sends, `args.output` unless
  // it receives; so are their buffers.
  DT_ASSIGN_OR_RETURN(Tensor in, ContiguousBuffer(args.input));
  DT_ASSIGN_OR_RETURN(Tensor out, ContiguousBuffer(args.output));
  const PermutePeers peers = PermutePeersOf(args.pairs, rank());
  return Prepared{
      {args.input, args.output, in, out},
      [args, peers, me = rank(), in, out](ncclComm_t comm,
                                          cudaStream_t stream) -> absl::Status {
        const auto& [to, from] = peers;
        if (to.has_value()) DT_RETURN_IF_ERROR(Stage(in, args.input, stream));
        if (to == me) {
          DT_RETURN_IF_ERROR(
              DeviceCopy(Ptr(out), Ptr(in), args.input.nbytes(), stream));
        } else {
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
          if (to.has_value() && args.input.nbytes() > 0) {
            ncclSend(Ptr(in), args.input.nbytes(), ncclUint8,
                     static_cast<int>(*to), comm, stream);
          }
          if (from.has_value() && args.output.nbytes() > 0) {
            ncclRecv(Ptr(out), args.output.nbytes(), ncclUint8,
                     static_cast<int>(*from), comm, stream);
          }
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "permute"));
        }
        if (!from.has_value()) return absl::OkStatus();
        return Stage(args.output, out, stream);
      }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::Prepare(
    const BarrierArgs&) const {
  DT_ASSIGN_OR_RETURN(Tensor token, Tensor::Empty({1}, DType::kI32, device()));
  return Prepared{{token}, [token](ncclComm_t comm, cudaStream_t stream) {
                    return FromNccl(
                        ncclAllReduce(Ptr(token), Ptr(token), 1, ncclInt32,
                                      ncclSum, comm, stream),
                        "barrier");
                  }};
}

absl::StatusOr<NcclCommunicator::Prepared> NcclCommunicator::PrepareTransfer(
    const Tensor& tensor, bool sending) {
  DT_ASSIGN_OR_RETURN(Tensor staged, ContiguousBuffer(tensor));
  // The channel's ranks: 0 sends, 1 receives.
  return Prepared{
      {tensor, staged},
      [tensor, staged, sending](ncclComm_t comm,
                                cudaStream_t stream) -> absl::Status {
        if (staged.nbytes() == 0) return absl::OkStatus();
        if (sending) {
          DT_RETURN_IF_ERROR(Stage(staged, tensor, stream));
          return FromNccl(ncclSend(Ptr(staged), staged.nbytes(), ncclUint8, 1,
                                   comm, stream),
                          "ncclSend");
        }
        DT_RETURN_IF_ERROR(FromNccl(
            ncclRecv(Ptr(staged), staged.nbytes(), ncclUint8, 0, comm, stream),
            "ncclRecv"));
        return Stage(tensor, staged, stream);
      }};
}

}  // namespace dtensor
