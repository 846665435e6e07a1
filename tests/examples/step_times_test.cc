// train_llama's steady-state line from given step times: the median after
// the warm-up, tokens/s from it, the step numbers.
#include "examples/step_times.h"

#include <string>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(StepTimesTest, NoStepsNoLine) {
  EXPECT_EQ(StepTimes().Summary(1, 2, 100, Device::CPU()), "");
}

TEST(StepTimesTest, MedianOfTheStepsAfterTheWarmUp) {
  StepTimes times;
  // Two slow warm-up steps, then 0.3, 0.1, 0.2 s: median 0.2 s.
  for (double seconds : {9.0, 5.0, 0.3, 0.1, 0.2}) times.Add(seconds);
  EXPECT_EQ(times.Summary(/*first_step=*/1, /*warmup=*/2,
                          /*tokens_per_step=*/1000, Device::CPU()),
            "steady state, steps 3-5: 200.0 ms a step (median), 5000 "
            "tokens/s\n");
}

TEST(StepTimesTest, EvenCountTakesTheMeanOfTheMiddleTwo) {
  StepTimes times;
  for (double seconds : {1.0, 0.1, 0.4, 0.2, 0.3}) times.Add(seconds);
  // After one warm-up step: 0.1 0.2 0.3 0.4, median 0.25 s.
  EXPECT_EQ(times.Summary(/*first_step=*/7, /*warmup=*/1,
                          /*tokens_per_step=*/50, Device::CPU()),
            "steady state, steps 8-11: 250.0 ms a step (median), 200 "
            "tokens/s\n");
}

TEST(StepTimesTest, FewerStepsThanTheWarmUpAreAllTimed) {
  StepTimes times;
  times.Add(0.5);
  times.Add(1.5);
  EXPECT_EQ(times.Summary(/*first_step=*/3, /*warmup=*/2,
                          /*tokens_per_step=*/10, Device::CPU()),
            "steady state, steps 3-4: 1000.0 ms a step (median), 10 "
            "tokens/s\n");
}

}  // namespace
}  // namespace dtensor
