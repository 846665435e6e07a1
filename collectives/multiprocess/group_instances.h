#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_INSTANCES_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_INSTANCES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "dtensor/base/mutex.h"

namespace dtensor {

// Numbers the communicators a process makes per rank list, so that each
// pairs with its peers' same-numbered one: every member makes a group's
// communicators in the same order. Thread-safe.
class GroupInstances {
 public:
  // `kind` starts every prefix ("group", "nccl").
  explicit GroupInstances(std::string kind) : kind_(std::move(kind)) {}

  // The store key prefix of the next communicator of `ranks`:
  // "<kind>[0, 1]#<n>/" for its n-th (from 0).
  std::string NextPrefix(const std::vector<int64_t>& ranks);

 private:
  const std::string kind_;
  Mutex mu_;
  std::map<std::vector<int64_t>, int64_t> made_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_GROUP_INSTANCES_H_
