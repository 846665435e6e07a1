#include "dtensor/collectives/multiprocess/call_records.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dtensor/collectives/multiprocess/piece_geometry.h"

namespace dtensor {
namespace {

// Record layout: [hash, text length, send bytes x n, recv bytes x n].
constexpr int64_t kHash = 0;
constexpr int64_t kTextLength = 1;
constexpr int64_t kTraffic = 2;

// FNV-1a: the same on every process (std::hash and absl::Hash are not).
int64_t StableHash(absl::string_view op, absl::string_view key) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](absl::string_view text) {
    for (char c : text) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 1099511628211ull;
    }
  };
  mix(op);
  mix(absl::string_view("\0", 1));
  mix(key);
  return static_cast<int64_t>(hash);
}

int64_t Field(absl::Span<const int64_t> records, int64_t group_size,
              int64_t rank, int64_t index) {
  return records[rank * CallRecordSize(group_size) + index];
}

}  // namespace

int64_t CallRecordSize(int64_t group_size) { return kTraffic + 2 * group_size; }

std::vector<int64_t> EncodeCallRecord(const CallSignature& signature,
                                      const CallTraffic& traffic,
                                      int64_t group_size) {
  std::vector<int64_t> record(CallRecordSize(group_size), 0);
  record[kHash] = StableHash(signature.op, signature.key);
  record[kTextLength] =
      static_cast<int64_t>(EncodeSignatureText(signature).size());
  for (size_t i = 0; i < traffic.send_bytes.size(); ++i) {
    record[kTraffic + i] = traffic.send_bytes[i];
  }
  for (size_t i = 0; i < traffic.recv_bytes.size(); ++i) {
    record[kTraffic + group_size + i] = traffic.recv_bytes[i];
  }
  return record;
}

bool SignaturesDiffer(absl::Span<const int64_t> records, int64_t group_size) {
  for (int64_t rank = 1; rank < group_size; ++rank) {
    if (Field(records, group_size, rank, kHash) !=
        Field(records, group_size, 0, kHash)) {
      return true;
    }
  }
  return false;
}

std::string EncodeSignatureText(const CallSignature& signature) {
  return absl::StrCat(signature.op, absl::string_view("\0", 1), signature.key,
                      absl::string_view("\0", 1), signature.text);
}

std::vector<int64_t> SignatureTextLengths(absl::Span<const int64_t> records,
                                          int64_t group_size) {
  std::vector<int64_t> lengths;
  for (int64_t rank = 0; rank < group_size; ++rank) {
    lengths.push_back(Field(records, group_size, rank, kTextLength));
  }
  return lengths;
}

absl::StatusOr<std::vector<CallSignature>> DecodeSignatureTexts(
    absl::string_view texts, absl::Span<const int64_t> lengths) {
  std::vector<CallSignature> signatures;
  for (int64_t length : lengths) {
    if (length < 0 || static_cast<size_t>(length) > texts.size()) {
      return absl::DataLossError("debug check: truncated call signatures");
    }
    std::vector<std::string> parts =
        absl::StrSplit(texts.substr(0, length), absl::MaxSplits('\0', 2));
    texts.remove_prefix(length);
    if (parts.size() != 3) {
      return absl::DataLossError("debug check: malformed call signature");
    }
    signatures.push_back(CallSignature{parts[0], parts[1], parts[2]});
  }
  return signatures;
}

absl::Status CheckTraffic(absl::Span<const int64_t> records,
                          absl::Span<const int64_t> group_ranks,
                          absl::string_view call_name) {
  const int64_t n = static_cast<int64_t>(group_ranks.size());
  for (int64_t src = 0; src < n; ++src) {
    for (int64_t dst = 0; dst < n; ++dst) {
      const int64_t sent = Field(records, n, src, kTraffic + dst);
      const int64_t expected = Field(records, n, dst, kTraffic + n + src);
      if (sent == expected) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          call_name, ": rank ", group_ranks[src], " sends ", sent,
          " bytes to rank ", group_ranks[dst], ", which expects ", expected));
    }
  }
  return absl::OkStatus();
}

namespace {

// The traffic of each op that has one.
struct TrafficOfArgs {
  int64_t rank;
  int64_t size;

  CallTraffic operator()(const AllToAllArgs& a) const {
    return {PieceBytes(a.input, a.split_dim, a.send_sizes),
            PieceBytes(a.output, a.concat_dim, a.recv_sizes)};
  }
  CallTraffic operator()(const ScatterArgs& a) const {
    CallTraffic traffic = Nothing();
    if (rank == a.root) {
      traffic.send_bytes = PieceBytes(a.output, a.dim, a.sizes);
    }
    traffic.recv_bytes[a.root] = a.output.nbytes();
    return traffic;
  }
  CallTraffic operator()(const GatherArgs& a) const {
    CallTraffic traffic = Nothing();
    traffic.send_bytes[a.root] = a.input.nbytes();
    if (rank == a.root) {
      traffic.recv_bytes = PieceBytes(a.input, a.dim, a.sizes);
    }
    return traffic;
  }
  CallTraffic operator()(const PermuteArgs& a) const {
    CallTraffic traffic = Nothing();
    const PermutePeers peers = PermutePeersOf(a.pairs, rank);
    if (peers.to.has_value()) traffic.send_bytes[*peers.to] = a.input.nbytes();
    if (peers.from.has_value()) {
      traffic.recv_bytes[*peers.from] = a.output.nbytes();
    }
    return traffic;
  }
  template <typename Args>
  CallTraffic operator()(const Args&) const {
    return {};
  }

  // No bytes to or from anyone.
  CallTraffic Nothing() const {
    return {std::vector<int64_t>(size, 0), std::vector<int64_t>(size, 0)};
  }
};

}  // namespace

CallTraffic TrafficOf(const CollectiveArgs& args, int64_t rank, int64_t size) {
  return std::visit(TrafficOfArgs{rank, size}, args);
}

}  // namespace dtensor
