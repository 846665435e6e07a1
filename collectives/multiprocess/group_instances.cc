#include "dtensor/collectives/multiprocess/group_instances.h"

#include "absl/strings/str_cat.h"
#include "dtensor/collectives/multiprocess/group_failures.h"

namespace dtensor {

std::string GroupInstances::NextPrefix(const std::vector<int64_t>& ranks) {
  int64_t instance = 0;
  {
    MutexLock lock(&mu_);
    instance = made_[ranks]++;
  }
  return absl::StrCat(kind_, RanksText(ranks), "#", instance, "/");
}

}  // namespace dtensor
