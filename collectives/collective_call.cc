#include "dtensor/collectives/collective_call.h"

namespace dtensor {
namespace {

// The names in variant order.
constexpr absl::string_view kOpNames[] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
    "scatter",    "gather",     "permute",        "barrier",    "send",
    "recv"};
static_assert(std::size(kOpNames) == std::variant_size_v<CollectiveArgs>,
              "one name per collective");

}  // namespace

absl::string_view CollectiveOpName(const CollectiveArgs& args) {
  return kOpNames[args.index()];
}

bool IsPointToPoint(const CollectiveArgs& args) {
  return std::holds_alternative<SendArgs>(args) ||
         std::holds_alternative<RecvArgs>(args);
}

PermutePeers PermutePeersOf(const std::vector<PermutePair>& pairs,
                            int64_t rank) {
  PermutePeers peers;
  for (const PermutePair& pair : pairs) {
    if (pair.src == rank) peers.to = pair.dst;
    if (pair.dst == rank) peers.from = pair.src;
  }
  return peers;
}

}  // namespace dtensor
