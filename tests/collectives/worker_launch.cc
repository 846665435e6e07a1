#include "tests/collectives/worker_launch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tools/dtrun_launcher.h"

namespace dtensor::testing {

constexpr char kWorker[] = "tests/collectives/collective_worker";

WorkerOutcome RunWorkers(const WorkerLaunch& launch) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/worker_output_XXXXXX");
  const int fd = ::mkstemp(path.data());
  EXPECT_GE(fd, 0) << path;
  LaunchOptions options;
  options.nproc = launch.nproc;
  options.command = {kWorker, launch.backend, launch.scenario};
  options.terminate_on_failure = launch.terminate_on_failure;
  if (launch.store_port.has_value()) {
    options.host_store = false;
    options.master_port = *launch.store_port;
  }
  options.timeout = absl::Seconds(90);
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result = Launch(options, fd, fd);
  WorkerOutcome outcome;
  outcome.took = absl::Now() - start;
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) outcome.exit_codes = result->exit_codes;
  ::lseek(fd, 0, SEEK_SET);
  char buffer[4096];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;) {
    outcome.output.append(buffer, got);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return outcome;
}

::testing::AssertionResult AllSucceeded(const WorkerOutcome& outcome,
                                        int64_t nproc) {
  if (outcome.exit_codes == std::vector<int>(nproc, 0)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "exit codes [" << absl::StrJoin(outcome.exit_codes, ", ")
         << "]; output:\n"
         << outcome.output;
}

}  // namespace dtensor::testing
