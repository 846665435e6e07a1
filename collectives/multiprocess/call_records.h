#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_CALL_RECORDS_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_CALL_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/collectives/call_signature.h"
#include "dtensor/collectives/collective_call.h"

namespace dtensor {

// Debug mode across processes: before a collective, each rank encodes its
// call into a fixed-size record of int64s, the backend all-gathers the
// records (and, when the signatures differ, the signature texts), and every
// rank checks them the same way, so that all report the same error before
// any data moves.

// The bytes a call sends to and receives from each member of its group, for
// what the signature key leaves open (the peers' shapes in all_to_all,
// scatter, gather and permute). Empty vectors: nothing to compare.
struct CallTraffic {
  std::vector<int64_t> send_bytes;
  std::vector<int64_t> recv_bytes;
};

// The traffic of the checked call `args` on group rank `rank` of a group of
// `size`: all_to_all, scatter, gather and permute; empty for the others.
CallTraffic TrafficOf(const CollectiveArgs& args, int64_t rank, int64_t size);

// The number of int64s in one rank's record for a group of `group_size`.
int64_t CallRecordSize(int64_t group_size);

// This rank's record: a hash of the signature's op and key, the length of
// its text form, and the traffic (zeros where empty).
std::vector<int64_t> EncodeCallRecord(const CallSignature& signature,
                                      const CallTraffic& traffic,
                                      int64_t group_size);

// Whether the gathered `records` (group order) hold different signatures:
// then the texts are exchanged and compared with CheckSameCall.
bool SignaturesDiffer(absl::Span<const int64_t> records, int64_t group_size);

// The text form of a signature, and the byte length each rank's has
// according to `records`.
std::string EncodeSignatureText(const CallSignature& signature);
std::vector<int64_t> SignatureTextLengths(absl::Span<const int64_t> records,
                                          int64_t group_size);
// The signatures in the concatenated texts of every rank.
absl::StatusOr<std::vector<CallSignature>> DecodeSignatureTexts(
    absl::string_view texts, absl::Span<const int64_t> lengths);

// OK when every rank's sends to each rank match what that rank expects to
// receive; otherwise InvalidArgument "<call_name>: rank 0 sends 48 bytes to
// rank 2, which expects 32" (global ranks).
absl::Status CheckTraffic(absl::Span<const int64_t> records,
                          absl::Span<const int64_t> group_ranks,
                          absl::string_view call_name);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_CALL_RECORDS_H_
