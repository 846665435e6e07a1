#ifndef DTENSOR_EXAMPLES_STEP_TIMES_H_
#define DTENSOR_EXAMPLES_STEP_TIMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/tensor/device.h"

namespace dtensor {

// The wall time of each training step, for the line train_llama prints at
// the end: the progress bar's tokens/s are cumulative from the first step,
// warm-up included, so a figure of the steady state needs each step's own
// time. A step's time is taken after its loss was read (the device finished
// the step).
class StepTimes {
 public:
  // Requires: seconds >= 0.
  void Add(double seconds) { seconds_.push_back(seconds); }

  // "steady state, steps K-N: M ms a step (median), T tokens/s" over the
  // steps after the first `warmup` (all when fewer were run), with the
  // device's peak allocated and reserved memory on a GPU (of every rank this
  // process runs on it); empty when no step was timed. `first_step` numbers
  // the first added step.
  std::string Summary(int64_t first_step, int64_t warmup,
                      int64_t tokens_per_step, const Device& device) const;

 private:
  std::vector<double> seconds_;
};

}  // namespace dtensor

#endif  // DTENSOR_EXAMPLES_STEP_TIMES_H_
