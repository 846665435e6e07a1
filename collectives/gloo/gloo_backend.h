#ifndef DTENSOR_COLLECTIVES_GLOO_GLOO_BACKEND_H_
#define DTENSOR_COLLECTIVES_GLOO_GLOO_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/backend.h"
#include "dtensor/collectives/collective_options.h"
#include "dtensor/collectives/gloo/gloo_runtime.h"
#include "dtensor/collectives/multiprocess/group_instances.h"
#include "dtensor/collectives/multiprocess/multiprocess_options.h"

namespace dtensor {

// The environment variables GlooOptionsFromEnv reads besides the launcher's
// (launch_env.h): the address this rank's Gloo connections listen on, or
// the network interface to take it from.
inline constexpr char kGlooHostnameEnv[] = "DTENSOR_GLOO_HOSTNAME";
inline constexpr char kGlooIfaceEnv[] = "DTENSOR_GLOO_IFACE";

// The job, the store and the communicators' options (MultiprocessOptions),
// and Gloo's own.
struct GlooBackendOptions : MultiprocessOptions {
  // The address Gloo listens on and advertises to its peers: by default the
  // local address of this host's route to master_addr (route_address.h;
  // loopback when the store is on loopback); creating the backend fails,
  // naming DTENSOR_GLOO_IFACE, where that is loopback while the store is
  // not. `iface` ("eth0") takes the address of that interface instead.
  std::string hostname;
  std::string iface;
};

// The Gloo backend of one process (rank) of a multi-process job: one process
// per rank, on one or several hosts, connected over TCP. Ranks meet through
// the rendezvous store; each communicator has its own Gloo context.
//
//   DT_ASSIGN_OR_RETURN(GlooBackendOptions options, GlooOptionsFromEnv());
//   DT_ASSIGN_OR_RETURN(std::shared_ptr<GlooBackend> backend,
//                       GlooBackend::Create(std::move(options)));
//   ProcessGroups groups(backend);
//   DT_ASSIGN_OR_RETURN(auto world, groups.World());
//   DT_RETURN_IF_ERROR(world->AllReduce(tensor, ReduceOp::kSum));
//
// Run the processes with `dtrun --nproc 4 -- program args`; programs with a
// --backend flag make it through BackendRegistry
// (dtensor/collectives/backend_registry.h).
class GlooBackend final : public Backend {
 public:
  // Joins the job: hosts the store if asked to, connects to it (waiting up
  // to the default deadline for it to come up) and starts Gloo's transport.
  // Ignores SIGPIPE in the process (a closed peer socket then fails the call
  // instead of killing the process).
  static absl::StatusOr<std::shared_ptr<GlooBackend>> Create(
      GlooBackendOptions options);

  int64_t rank() const override { return runtime_->rank; }
  int64_t world_size() const override { return runtime_->world_size; }

  // Connects the members (waiting up to the default deadline for all of
  // them).
  // Errors: DeadlineExceeded naming the members that did not come;
  // Unavailable naming those that exited.
  absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(
      std::vector<int64_t> ranks) override;

 private:
  explicit GlooBackend(std::shared_ptr<GlooRuntime> runtime);

  // Why connecting the group failed with Gloo's `what`.
  absl::Status JoinFailure(const std::vector<int64_t>& ranks,
                           const std::string& prefix, absl::Duration timeout,
                           absl::string_view what);

  const std::shared_ptr<GlooRuntime> runtime_;
  GroupInstances instances_;
};

// Options for this process from the launcher's environment (launch_env.h):
// rank 0 hosts the store unless DTENSOR_AGENT_STORE=1 says the launcher
// does; DTENSOR_GLOO_HOSTNAME and DTENSOR_GLOO_IFACE set the listen address.
absl::StatusOr<GlooBackendOptions> GlooOptionsFromEnv(
    CommunicatorOptions communicator = CommunicatorOptions());

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_GLOO_GLOO_BACKEND_H_
