#ifndef DTENSOR_COLLECTIVES_BACKEND_H_
#define DTENSOR_COLLECTIVES_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/collectives/communicator.h"

namespace dtensor {

// One rank's connection to all ranks of a job (its "world"): makes
// communicators over groups of global ranks. Implemented by each backend
// (in-process, Gloo, NCCL); ProcessGroups caches what it makes.
class Backend {
 public:
  virtual ~Backend() = default;

  // This rank, 0 to world_size() - 1.
  virtual int64_t rank() const = 0;
  virtual int64_t world_size() const = 0;

  // A new communicator over `ranks` (distinct global ranks in group order,
  // rank() among them; checked by CheckGroupMembers). Every member of the
  // group must create it: communicators over the same ranks pair up in the
  // order each rank creates them. Creation may wait for the other members
  // (within the default deadline).
  virtual absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) = 0;
};

// `ranks` is a valid group for `rank` in a world of `world_size`: non-empty,
// every rank in range and listed once, `rank` among them. The error names
// the bad rank.
absl::Status CheckGroupMembers(absl::Span<const int64_t> ranks, int64_t rank,
                               int64_t world_size);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_BACKEND_H_
