#ifndef DTENSOR_COLLECTIVES_WORK_H_
#define DTENSOR_COLLECTIVES_WORK_H_

#include "absl/status/status.h"

namespace dtensor {

// The handle of an asynchronous call. Until Wait() returns, the call may still
// read its inputs and write its outputs: leave them alone until then.
class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the call has finished and returns its status. The call
  // finishes within its deadline, so this never blocks forever. Later calls
  // return the same status at once.
  virtual absl::Status Wait() = 0;

  // Whether the call has finished (Wait() would not block).
  virtual bool IsCompleted() const = 0;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_WORK_H_
