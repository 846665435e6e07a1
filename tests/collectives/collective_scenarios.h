#ifndef DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_SCENARIOS_H_
#define DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_SCENARIOS_H_

// Backend-neutral scenarios of the collectives tests: every rank of a job
// runs one against references computed from every rank's inputs
// (collective_test_util.h). collective_worker runs them as processes over
// Gloo and NCCL; host_staging_test as in-process ranks on a GPU. Tensors
// live on the communicator's device. Each returns the first mismatch.

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/tensor/tensor.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::testing {

// Every collective of the interface on the world, over random shapes,
// dtypes, strided views and uneven pieces, synchronous and asynchronous.
absl::Status Collectives(ProcessGroups& groups);
// The same cases on subgroups: the world reversed, pairs of neighbours and
// strided pairs.
absl::Status Subgroups(ProcessGroups& groups);

// An Internal error saying `what`.
absl::Status Fail(absl::string_view what);
// `actual` matches `expected` (testing::Matches); the error names `what`.
absl::Status ExpectMatch(const Tensor& actual, const HostTensor& expected,
                         absl::string_view what);
// `status` has `code` and its message contains every one of `parts`.
absl::Status ExpectError(const absl::Status& status, absl::StatusCode code,
                         std::initializer_list<absl::string_view> parts,
                         absl::string_view what);

}  // namespace dtensor::testing

#endif  // DTENSOR_TESTS_COLLECTIVES_COLLECTIVE_SCENARIOS_H_
