#include "collectives/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/argument_checks.h"
#include "collectives/gloo/piece_geometry.h"
#include "collectives/nccl/device_copy.h"
#include "collectives/promise_work.h"
#include "base/status_macros.h"

namespace dtensor {
namespace {

// How often a waiting call looks in the store for failed or exited peers.
constexpr absl::Duration kPeerCheck = absl::Milliseconds(50);
constexpr absl::Duration kFirstPoll = absl::Microseconds(10);
constexpr absl::Duration kLongestPoll = absl::Milliseconds(1);

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kBool:
      return ncclUint8;
  }
  return ncclUint8;
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

// `tensor` when contiguous, else a contiguous scratch tensor of its shape on
// its device.
absl::StatusOr<Tensor> ContiguousBuffer(const Tensor& tensor) {
  if (tensor.is_contiguous()) return tensor;
  return Tensor::Empty(tensor.shape(), tensor.dtype(), tensor.device());
}

// A contiguous 1-d tensor for `tensor`'s pieces along `dim`: `tensor`
// itself when they are ranges of it, else scratch.
absl::StatusOr<Tensor> PackedBuffer(const Tensor& tensor, int64_t dim) {
  if (PiecesAreRanges(tensor, dim)) return tensor.View({tensor.numel()});
  return Tensor::Empty({tensor.numel()}, tensor.dtype(), tensor.device());
}

absl::Status Pack(const Tensor& packed, const Tensor& tensor, int64_t dim,
                  absl::Span<const int64_t> sizes, cudaStream_t stream) {
  if (Same(packed, tensor) || PiecesAreRanges(tensor, dim)) {
    return absl::OkStatus();
  }
  return ForEachPackedPiece(packed, tensor, dim, sizes,
                            [stream](const Tensor& piece, const Tensor& view) {
                              return CopyViewOnDevice(view, piece, stream);
                            });
}

absl::Status Unpack(const Tensor& packed, const Tensor& tensor, int64_t dim,
                    absl::Span<const int64_t> sizes, cudaStream_t stream) {
  if (PiecesAreRanges(tensor, dim)) return absl::OkStatus();
  return ForEachPackedPiece(packed, tensor, dim, sizes,
                            [stream](const Tensor& piece, const Tensor& view) {
                              return CopyViewOnDevice(piece, view, stream);
                            });
}

absl::Status DeviceCopy(char* dst, const char* src, int64_t bytes,
                        cudaStream_t stream) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  return FromCuda(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
      "cudaMemcpyAsync");
}

bool AllEqual(absl::Span<const int64_t> values) {
  return std::adjacent_find(values.begin(), values.end(),
                            std::not_equal_to<>()) == values.end();
}

// A debug-mode post: the call record (little-endian int64s), then the
// signature text.
std::string EncodeCheck(const std::vector<int64_t>& record,
                        const std::string& text) {
  std::string post;
  for (int64_t value : record) {
    for (int byte = 0; byte < 8; ++byte) {
      post.push_back(static_cast<char>(
          (static_cast<uint64_t>(value) >> (8 * byte)) & 0xff));
    }
  }
  return post + text;
}

}  // namespace

// The Work of a launched call: waits for its GPU work, within its deadline.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator> comm,
           NcclCommunicator::Launched launched, cudaEvent_t done,
           std::vector<Tensor> keep)
      : comm_(std::move(comm)),
        launched_(std::move(launched)),
        done_(done),
        keep_(std::move(keep)) {}

  // A Work dropped unwaited still waits (within its deadline): the tensors
  // must outlive the GPU's use of them.
  ~NcclWork() override {
    Wait().IgnoreError();
    cudaEventDestroy(done_);
  }

  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    if (!status_.has_value()) {
      status_ = comm_->Await(launched_, done_);
      keep_.clear();
    }
    return *status_;
  }

  bool IsCompleted() const override {
    absl::MutexLock lock(&mu_);
    return status_.has_value() || cudaEventQuery(done_) == cudaSuccess;
  }

 private:
  const std::shared_ptr<NcclCommunicator> comm_;
  const NcclCommunicator::Launched launched_;
  const cudaEvent_t done_;
  mutable absl::Mutex mu_;
  std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> keep_ ABSL_GUARDED_BY(mu_);
};

NcclCommunicator::NcclCommunicator(std::vector<int64_t> group_ranks,
                                   int64_t rank, CommunicatorOptions options,
                                   std::shared_ptr<NcclRuntime> runtime,
                                   std::unique_ptr<NcclChannel> channel,
                                   std::string key_prefix)
    : Communicator(std::move(group_ranks), rank, std::move(options)),
      runtime_(std::move(runtime)),
      channel_(std::move(channel)),
      key_prefix_(std::move(key_prefix)),
      failures_(*runtime_->session, key_prefix_, this->group_ranks(),
                this->rank()) {}

std::string NcclCommunicator::Describe(const CallInfo& call) const {
  if (call.sequence < 0) return absl::StrCat(call.op, " on ", GroupName());
  return absl::StrCat(call.op, " #", call.sequence, " on ", GroupName());
}

// ---- Launching and waiting ----

std::shared_ptr<Work> NcclCommunicator::LaunchCollective(
    const CallInfo& call, CallTraffic traffic, std::vector<Tensor> keep,
    Enqueue enqueue) {
  const absl::Time deadline = absl::Now() + call.deadline;
  if (options().debug) {
    absl::Status agreed = CheckCallsAgree(call, traffic, deadline);
    if (!agreed.ok()) return CompletedWork(agreed);
  }
  return Launch(Launched{call, deadline, channel_.get(), std::nullopt, false},
                std::move(keep), enqueue);
}

std::shared_ptr<Work> NcclCommunicator::Launch(Launched launched,
                                               std::vector<Tensor> keep,
                                               const Enqueue& enqueue) {
  absl::Status broken = Broken();
  if (!broken.ok()) return CompletedWork(broken);
  const bool point_to_point = launched.peer.has_value();
  cudaEvent_t done = nullptr;
  absl::Status status = FromCuda(
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
  if (status.ok()) {
    status = launched.channel->Enqueue(launched.deadline, done, enqueue);
  }
  if (!status.ok()) {
    if (done != nullptr) cudaEventDestroy(done);
    status = absl::Status(status.code(), absl::StrCat(Describe(launched.call),
                                                      ": ", status.message()));
    // A rank that cannot join leaves its peers waiting: break.
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      status = Break(status, true, point_to_point);
    }
    return CompletedWork(status);
  }
  return std::make_shared<NcclWork>(shared_from_this(), std::move(launched),
                                    done, std::move(keep));
}

absl::Status NcclCommunicator::Await(const Launched& launched,
                                     cudaEvent_t done) {
  const CallInfo& call = launched.call;
  const bool point_to_point = launched.peer.has_value();
  const std::string name = Describe(call);
  const std::string within = absl::FormatDuration(call.deadline);
  const char* verb = !point_to_point    ? "did not arrive"
                     : launched.sending ? "did not receive"
                                        : "did not send";
  auto missing_error = [&](absl::Span<const int64_t> ranks) {
    return absl::DeadlineExceededError(absl::StrCat(
        name, ": ranks ", RanksText(ranks), " ", verb, " within ", within));
  };
  if (!point_to_point) {
    failures_.arrival().Enter(call.sequence, ArrivalDelay(call.deadline));
  }
  absl::Status status;
  absl::Duration pause = kFirstPoll;
  absl::Time next_check = absl::Now() + kPeerCheck;
  while (true) {
    const cudaError_t query = cudaEventQuery(done);
    if (query == cudaSuccess) break;
    if (query != cudaErrorNotReady) {
      status = Break(absl::InternalError(
                         absl::StrCat(name, ": ", cudaGetErrorString(query))),
                     true, point_to_point);
      break;
    }
    status = Broken();
    if (!status.ok()) break;
    absl::Status nccl = launched.channel->AsyncError();
    if (!nccl.ok()) {
      status = Break(
          absl::UnavailableError(absl::StrCat(name, ": ", nccl.message())),
          true, point_to_point);
      break;
    }
    if (absl::Now() >= next_check) {
      if (std::optional<GroupFailures::Posted> cause =
              failures_.PeerFailure()) {
        // A peer's send or recv that timed out is reported from this side.
        status =
            point_to_point && cause->point_to_point &&
                    cause->status.code() == absl::StatusCode::kDeadlineExceeded
                ? Break(missing_error({group_ranks()[*launched.peer]}), false,
                        true)
                : Break(cause->status, false, point_to_point);
        break;
      }
      std::vector<int64_t> exited = failures_.ExitedPeers();
      if (point_to_point) {
        const int64_t peer = group_ranks()[*launched.peer];
        exited.erase(std::remove_if(exited.begin(), exited.end(),
                                    [peer](int64_t r) { return r != peer; }),
                     exited.end());
      }
      if (!exited.empty()) {
        status = Break(absl::UnavailableError(absl::StrCat(
                           name, ": ranks ", RanksText(exited), " exited")),
                       true, point_to_point);
        break;
      }
      next_check = absl::Now() + kPeerCheck;
    }
    if (absl::Now() >= launched.deadline) {
      const std::vector<int64_t> missing =
          point_to_point ? std::vector<int64_t>{group_ranks()[*launched.peer]}
                         : failures_.PeersNotArrived(call.sequence);
      status =
          Break(missing.empty() ? absl::DeadlineExceededError(absl::StrCat(
                                      name, ": did not finish within ", within,
                                      " although every rank arrived"))
                                : missing_error(missing),
                true, point_to_point);
      break;
    }
    absl::SleepFor(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
  if (!point_to_point) failures_.arrival().Leave();
  return status;
}

absl::Status NcclCommunicator::CheckCallsAgree(const CallInfo& call,
                                               const CallTraffic& traffic,
                                               absl::Time deadline) {
  const int64_t n = size();
  const std::vector<int64_t> record =
      EncodeCallRecord(*call.signature, traffic, n);
  std::vector<std::string> keys;
  for (int64_t member = 0; member < n; ++member) {
    keys.push_back(
        absl::StrCat(key_prefix_, "call/", call.sequence, "/", member));
  }
  StoreClient& client = runtime_->session->client();
  DT_RETURN_IF_ERROR(client.Set(
      keys[rank()], EncodeCheck(record, EncodeSignatureText(*call.signature))));
  absl::StatusOr<std::vector<std::string>> posts =
      client.WaitAndGet(keys, deadline - absl::Now());
  if (!posts.ok()) {
    return Break(absl::DeadlineExceededError(absl::StrCat(
                     Describe(call), ": not every rank arrived within ",
                     absl::FormatDuration(call.deadline), " (",
                     posts.status().message(), ")")),
                 true, false);
  }
  const size_t record_bytes = record.size() * 8;
  std::vector<int64_t> records;
  std::string texts;
  for (const std::string& post : *posts) {
    if (post.size() < record_bytes) {
      return absl::DataLossError(
          absl::StrCat(Describe(call), ": malformed debug check"));
    }
    for (size_t i = 0; i < record.size(); ++i) {
      uint64_t bits = 0;
      for (int byte = 0; byte < 8; ++byte) {
        bits |= static_cast<uint64_t>(static_cast<uint8_t>(post[i * 8 + byte]))
                << (8 * byte);
      }
      records.push_back(static_cast<int64_t>(bits));
    }
    texts += post.substr(record_bytes);
  }
  if (!SignaturesDiffer(records, n)) {
    return CheckTraffic(records, group_ranks(), Describe(call));
  }
  DT_ASSIGN_OR_RETURN(
      std::vector<CallSignature> calls,
      DecodeSignatureTexts(texts, SignatureTextLengths(records, n)));
  return CheckSameCall(calls, group_ranks());
}

absl::StatusOr<NcclChannel*> NcclCommunicator::PointToPointChannel(
    int64_t src, int64_t dst, absl::Time deadline) {
  absl::MutexLock lock(&channels_mu_);
  std::unique_ptr<NcclChannel>& channel = point_to_point_[{src, dst}];
  if (channel != nullptr) return channel.get();
  // The sender makes the id; both join as ranks 0 (src) and 1 (dst).
  const std::string key = absl::StrCat(key_prefix_, "p2p/", src, "-", dst);
  StoreClient& client = runtime_->session->client();
  ncclUniqueId id;
  if (src == rank()) {
    DT_RETURN_IF_ERROR(FromNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    DT_RETURN_IF_ERROR(client.Set(
        key,
        absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    DT_ASSIGN_OR_RETURN(std::vector<std::string> posted,
                        client.WaitAndGet({key}, deadline - absl::Now()));
    if (posted[0].size() != sizeof(id)) {
      return absl::DataLossError("malformed NCCL id in the store");
    }
    std::memcpy(&id, posted[0].data(), sizeof(id));
  }
  DT_ASSIGN_OR_RETURN(
      channel, NcclChannel::Join(runtime_->device, 2, src == rank() ? 0 : 1, id,
                                 deadline));
  return channel.get();
}

absl::Status NcclCommunicator::Broken() {
  absl::MutexLock lock(&mu_);
  return broken_;
}

absl::Status NcclCommunicator::Break(absl::Status status, bool post,
                                     bool point_to_point) {
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    broken_ = status;
  }
  if (post) failures_.Post(status, point_to_point);
  channel_->Abort();
  absl::MutexLock lock(&channels_mu_);
  for (auto& [direction, channel] : point_to_point_) {
    if (channel != nullptr) channel->Abort();
  }
  return status;
}

// ---- The operations ----

std::shared_ptr<Work> NcclCommunicator::StartAllReduce(const Tensor& tensor,
                                                       ReduceOp op,
                                                       const CallInfo& call) {
  absl::StatusOr<Tensor> buffer = ContiguousBuffer(tensor);
  if (!buffer.ok()) return CompletedWork(Break(buffer.status(), true, false));
  const Tensor staged = *buffer;
  return LaunchCollective(
      call, {}, {tensor, staged},
      [tensor, staged, op](ncclComm_t comm,
                           cudaStream_t stream) -> absl::Status {
        if (tensor.numel() == 0) return absl::OkStatus();
        const bool copied = !Same(staged, tensor);
        if (copied)
          DT_RETURN_IF_ERROR(CopyViewOnDevice(staged, tensor, stream));
        DT_RETURN_IF_ERROR(
            FromNccl(ncclAllReduce(Ptr(staged), Ptr(staged), staged.numel(),
                                   NcclType(tensor.dtype()),
                                   NcclOp(op, tensor.dtype()), comm, stream),
                     "ncclAllReduce"));
        if (copied)
          DT_RETURN_IF_ERROR(CopyViewOnDevice(tensor, staged, stream));
        return absl::OkStatus();
      });
}

std::shared_ptr<Work> NcclCommunicator::StartAllGather(
    const Tensor& input, const Tensor& output, int64_t dim,
    std::vector<int64_t> sizes, const CallInfo& call) {
  absl::StatusOr<Tensor> in = ContiguousBuffer(input);
  absl::StatusOr<Tensor> packed =
      in.ok() ? PackedBuffer(output, dim) : in.status();
  if (!packed.ok()) return CompletedWork(Break(packed.status(), true, false));
  const std::vector<int64_t> bytes =
      PieceBytes(output.shape(), dim, sizes, output.dtype());
  const int64_t me = rank();
  return LaunchCollective(
      call, {}, {input, output, *in, *packed},
      [input, output, dim, sizes, bytes, me, in = *in, packed = *packed](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (SumOf(bytes) == 0) return absl::OkStatus();
        if (!Same(in, input)) {
          DT_RETURN_IF_ERROR(CopyViewOnDevice(in, input, stream));
        }
        if (AllEqual(bytes)) {
          DT_RETURN_IF_ERROR(
              FromNccl(ncclAllGather(Ptr(in), Ptr(packed), bytes[0], ncclUint8,
                                     comm, stream),
                       "ncclAllGather"));
        } else {
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
        return Unpack(packed, output, dim, sizes, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartReduceScatter(
    const Tensor& input, const Tensor& output, int64_t dim, ReduceOp op,
    std::vector<int64_t> sizes, const CallInfo& call) {
  absl::StatusOr<Tensor> packed = PackedBuffer(input, dim);
  absl::StatusOr<Tensor> out =
      packed.ok() ? ContiguousBuffer(output) : packed.status();
  if (!out.ok()) return CompletedWork(Break(out.status(), true, false));
  const int64_t per_index = ElementsPerIndex(input.shape(), dim);
  const int64_t me = rank();
  return LaunchCollective(
      call, {}, {input, output, *packed, *out},
      [input, output, dim, op, sizes, per_index, me, packed = *packed,
       out = *out](ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (input.numel() == 0) return absl::OkStatus();
        DT_RETURN_IF_ERROR(Pack(packed, input, dim, sizes, stream));
        const ncclDataType_t type = NcclType(input.dtype());
        const ncclRedOp_t reduce = NcclOp(op, input.dtype());
        if (AllEqual(sizes)) {
          DT_RETURN_IF_ERROR(FromNccl(
              ncclReduceScatter(Ptr(packed), Ptr(out), sizes[me] * per_index,
                                type, reduce, comm, stream),
              "ncclReduceScatter"));
        } else {
          // Uneven pieces: NCCL has no reduce-scatter-v; one reduce per
          // piece, to its owner, in one group.
          const int64_t element = ElementSize(input.dtype());
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
        if (Same(out, output)) return absl::OkStatus();
        return CopyViewOnDevice(output, out, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartAllToAll(
    const Tensor& input, const Tensor& output, int64_t split_dim,
    int64_t concat_dim, std::vector<int64_t> send_sizes,
    std::vector<int64_t> recv_sizes, const CallInfo& call) {
  absl::StatusOr<Tensor> packed = PackedBuffer(input, split_dim);
  absl::StatusOr<Tensor> received =
      packed.ok() ? PackedBuffer(output, concat_dim) : packed.status();
  if (!received.ok()) {
    return CompletedWork(Break(received.status(), true, false));
  }
  const std::vector<int64_t> sends =
      PieceBytes(input.shape(), split_dim, send_sizes, input.dtype());
  const std::vector<int64_t> receives =
      PieceBytes(output.shape(), concat_dim, recv_sizes, output.dtype());
  CallTraffic traffic;
  if (options().debug) traffic = {sends, receives};
  const int64_t me = rank();
  return LaunchCollective(
      call, std::move(traffic), {input, output, *packed, *received},
      [input, output, split_dim, concat_dim, send_sizes, recv_sizes, sends,
       receives, me, packed = *packed, received = *received](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        DT_RETURN_IF_ERROR(Pack(packed, input, split_dim, send_sizes, stream));
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
        return Unpack(received, output, concat_dim, recv_sizes, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartBroadcast(const Tensor& tensor,
                                                       int64_t root,
                                                       const CallInfo& call) {
  absl::StatusOr<Tensor> buffer = ContiguousBuffer(tensor);
  if (!buffer.ok()) return CompletedWork(Break(buffer.status(), true, false));
  const bool is_root = rank() == root;
  return LaunchCollective(
      call, {}, {tensor, *buffer},
      [tensor, root, is_root, staged = *buffer](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (tensor.numel() == 0) return absl::OkStatus();
        const bool copied = !Same(staged, tensor);
        if (copied && is_root) {
          DT_RETURN_IF_ERROR(CopyViewOnDevice(staged, tensor, stream));
        }
        DT_RETURN_IF_ERROR(FromNccl(
            ncclBroadcast(Ptr(staged), Ptr(staged), staged.nbytes(), ncclUint8,
                          static_cast<int>(root), comm, stream),
            "ncclBroadcast"));
        if (copied && !is_root) {
          DT_RETURN_IF_ERROR(CopyViewOnDevice(tensor, staged, stream));
        }
        return absl::OkStatus();
      });
}

std::shared_ptr<Work> NcclCommunicator::StartScatter(const Tensor& input,
                                                     const Tensor& output,
                                                     int64_t dim, int64_t root,
                                                     std::vector<int64_t> sizes,
                                                     const CallInfo& call) {
  const bool is_root = rank() == root;
  absl::StatusOr<Tensor> out = ContiguousBuffer(output);
  absl::StatusOr<Tensor> packed = Tensor();
  if (is_root && out.ok()) packed = PackedBuffer(input, dim);
  if (!out.ok() || !packed.ok()) {
    return CompletedWork(
        Break(out.ok() ? packed.status() : out.status(), true, false));
  }
  const std::vector<int64_t> bytes =
      PieceBytes(output.shape(), dim, sizes, output.dtype());
  CallTraffic traffic;
  if (options().debug) {
    traffic.send_bytes.assign(size(), 0);
    traffic.recv_bytes.assign(size(), 0);
    if (is_root) traffic.send_bytes = bytes;
    traffic.recv_bytes[root] = output.nbytes();
  }
  const int64_t me = rank();
  return LaunchCollective(
      call, std::move(traffic), {input, output, *out, *packed},
      [input, output, dim, root, sizes, bytes, me, is_root, out = *out,
       packed = *packed](ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (is_root)
          DT_RETURN_IF_ERROR(Pack(packed, input, dim, sizes, stream));
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
        if (is_root) {
          for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()); ++r) {
            if (r == me || bytes[r] == 0) continue;
            ncclSend(Ptr(packed) + OffsetOf(bytes, r), bytes[r], ncclUint8,
                     static_cast<int>(r), comm, stream);
          }
        } else if (bytes[me] > 0) {
          ncclRecv(Ptr(out), bytes[me], ncclUint8, static_cast<int>(root), comm,
                   stream);
        }
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "scatter"));
        if (is_root) {
          DT_RETURN_IF_ERROR(DeviceCopy(
              Ptr(out), Ptr(packed) + OffsetOf(bytes, me), bytes[me], stream));
        }
        if (Same(out, output)) return absl::OkStatus();
        return CopyViewOnDevice(output, out, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartGather(const Tensor& input,
                                                    const Tensor& output,
                                                    int64_t dim, int64_t root,
                                                    std::vector<int64_t> sizes,
                                                    const CallInfo& call) {
  const bool is_root = rank() == root;
  absl::StatusOr<Tensor> in = ContiguousBuffer(input);
  absl::StatusOr<Tensor> packed = Tensor();
  if (is_root && in.ok()) packed = PackedBuffer(output, dim);
  if (!in.ok() || !packed.ok()) {
    return CompletedWork(
        Break(in.ok() ? packed.status() : in.status(), true, false));
  }
  const std::vector<int64_t> bytes =
      PieceBytes(input.shape(), dim, sizes, input.dtype());
  CallTraffic traffic;
  if (options().debug) {
    traffic.send_bytes.assign(size(), 0);
    traffic.recv_bytes.assign(size(), 0);
    traffic.send_bytes[root] = input.nbytes();
    if (is_root) traffic.recv_bytes = bytes;
  }
  const int64_t me = rank();
  return LaunchCollective(
      call, std::move(traffic), {input, output, *in, *packed},
      [input, output, dim, root, sizes, bytes, me, is_root, in = *in,
       packed = *packed](ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (!Same(in, input)) {
          DT_RETURN_IF_ERROR(CopyViewOnDevice(in, input, stream));
        }
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
        if (is_root) {
          for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()); ++r) {
            if (r == me || bytes[r] == 0) continue;
            ncclRecv(Ptr(packed) + OffsetOf(bytes, r), bytes[r], ncclUint8,
                     static_cast<int>(r), comm, stream);
          }
        } else if (bytes[me] > 0) {
          ncclSend(Ptr(in), bytes[me], ncclUint8, static_cast<int>(root), comm,
                   stream);
        }
        DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "gather"));
        if (!is_root) return absl::OkStatus();
        DT_RETURN_IF_ERROR(DeviceCopy(Ptr(packed) + OffsetOf(bytes, me),
                                      Ptr(in), bytes[me], stream));
        return Unpack(packed, output, dim, sizes, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartPermute(
    const Tensor& input, const Tensor& output, std::vector<PermutePair> pairs,
    const CallInfo& call) {
  std::optional<int64_t> to;
  std::optional<int64_t> from;
  for (const PermutePair& pair : pairs) {
    if (pair.src == rank()) to = pair.dst;
    if (pair.dst == rank()) from = pair.src;
  }
  absl::StatusOr<Tensor> in =
      to.has_value() ? ContiguousBuffer(input) : Tensor();
  absl::StatusOr<Tensor> out =
      in.ok() && from.has_value() ? ContiguousBuffer(output) : Tensor();
  if (!in.ok() || !out.ok()) {
    return CompletedWork(
        Break(in.ok() ? out.status() : in.status(), true, false));
  }
  CallTraffic traffic;
  if (options().debug) {
    traffic.send_bytes.assign(size(), 0);
    traffic.recv_bytes.assign(size(), 0);
    if (to.has_value()) traffic.send_bytes[*to] = input.nbytes();
    if (from.has_value()) traffic.recv_bytes[*from] = output.nbytes();
  }
  const int64_t me = rank();
  return LaunchCollective(
      call, std::move(traffic), {input, output, *in, *out},
      [input, output, to, from, me, in = *in, out = *out](
          ncclComm_t comm, cudaStream_t stream) -> absl::Status {
        if (to.has_value() && !Same(in, input)) {
          DT_RETURN_IF_ERROR(CopyViewOnDevice(in, input, stream));
        }
        if (to == me) {
          DT_RETURN_IF_ERROR(
              DeviceCopy(Ptr(out), Ptr(in), input.nbytes(), stream));
        } else {
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
          if (to.has_value() && input.nbytes() > 0) {
            ncclSend(Ptr(in), input.nbytes(), ncclUint8, static_cast<int>(*to),
                     comm, stream);
          }
          if (from.has_value() && output.nbytes() > 0) {
            ncclRecv(Ptr(out), output.nbytes(), ncclUint8,
                     static_cast<int>(*from), comm, stream);
          }
          DT_RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "permute"));
        }
        if (!from.has_value() || Same(out, output)) return absl::OkStatus();
        return CopyViewOnDevice(output, out, stream);
      });
}

std::shared_ptr<Work> NcclCommunicator::StartBarrier(const CallInfo& call) {
  absl::StatusOr<Tensor> token = Tensor::Empty({1}, DType::kI32, device());
  if (!token.ok()) return CompletedWork(Break(token.status(), true, false));
  return LaunchCollective(
      call, {}, {*token},
      [token = *token](ncclComm_t comm, cudaStream_t stream) {
        return FromNccl(ncclAllReduce(Ptr(token), Ptr(token), 1, ncclInt32,
                                      ncclSum, comm, stream),
                        "barrier");
      });
}

absl::Status NcclCommunicator::RunPointToPoint(const CallInfo& call,
                                               const Tensor& tensor,
                                               int64_t peer, bool sending) {
  const absl::Time deadline = absl::Now() + call.deadline;
  const int64_t src = sending ? rank() : peer;
  const int64_t dst = sending ? peer : rank();
  absl::StatusOr<NcclChannel*> channel =
      PointToPointChannel(src, dst, deadline);
  if (!channel.ok()) {
    if (channel.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(call), ": ranks [", group_ranks()[peer], "] ",
                       sending ? "did not receive" : "did not send", " within ",
                       absl::FormatDuration(call.deadline)));
    }
    return absl::Status(
        channel.status().code(),
        absl::StrCat(Describe(call), ": ", channel.status().message()));
  }
  absl::StatusOr<Tensor> buffer = ContiguousBuffer(tensor);
  if (!buffer.ok()) return buffer.status();
  const Tensor staged = *buffer;
  // The channel's ranks: 0 sends, 1 receives.
  std::shared_ptr<Work> work = Launch(
      Launched{call, deadline, *channel, peer, sending}, {tensor, staged},
      [tensor, staged, sending](ncclComm_t comm,
                                cudaStream_t stream) -> absl::Status {
        if (staged.nbytes() == 0) return absl::OkStatus();
        const bool copied = !Same(staged, tensor);
        if (sending) {
          if (copied) {
            DT_RETURN_IF_ERROR(CopyViewOnDevice(staged, tensor, stream));
          }
          return FromNccl(ncclSend(Ptr(staged), staged.nbytes(), ncclUint8, 1,
                                   comm, stream),
                          "ncclSend");
        }
        DT_RETURN_IF_ERROR(FromNccl(
            ncclRecv(Ptr(staged), staged.nbytes(), ncclUint8, 0, comm, stream),
            "ncclRecv"));
        if (!copied) return absl::OkStatus();
        return CopyViewOnDevice(tensor, staged, stream);
      });
  return work->Wait();
}

std::shared_ptr<Work> NcclCommunicator::SubmitPointToPoint(const CallInfo& call,
                                                           const Tensor& tensor,
                                                           int64_t peer,
                                                           bool sending) {
  std::unique_ptr<OpQueue>& queue =
      (sending ? send_queues_ : recv_queues_)[peer];
  if (queue == nullptr) queue = std::make_unique<OpQueue>();
  auto run = [this, call, tensor, peer, sending] {
    return RunPointToPoint(call, tensor, peer, sending);
  };
  if (call.blocking && queue->Idle()) return CompletedWork(run());
  return queue->Submit(std::move(run));
}

std::shared_ptr<Work> NcclCommunicator::StartSend(const Tensor& tensor,
                                                  int64_t dst,
                                                  const CallInfo& call) {
  return SubmitPointToPoint(call, tensor, dst, true);
}

std::shared_ptr<Work> NcclCommunicator::StartRecv(const Tensor& tensor,
                                                  int64_t src,
                                                  const CallInfo& call) {
  return SubmitPointToPoint(call, tensor, src, false);
}

}  // namespace dtensor
