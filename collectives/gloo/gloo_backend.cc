#include "dtensor/collectives/gloo/gloo_backend.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/gloo/gloo_communicator.h"
#include "dtensor/collectives/gloo/gloo_store.h"
#include "dtensor/collectives/gloo/route_address.h"
#include "dtensor/collectives/multiprocess/group_failures.h"
#include "dtensor/collectives/multiprocess/launch_env.h"
#include "dtensor/collectives/multiprocess/rank_hosts.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace dtensor {
namespace {

// The address the transport listens on and advertises: DTENSOR_GLOO_HOSTNAME
// or DTENSOR_GLOO_IFACE where set, else the local address of the route to
// the store (logged when the store is not on this host's loopback).
absl::StatusOr<gloo::transport::tcp::attr> TransportAttr(
    const GlooBackendOptions& options) {
  gloo::transport::tcp::attr attr;
  attr.iface = options.iface;
  attr.hostname = options.hostname;
  if (!attr.hostname.empty() || !attr.iface.empty()) return attr;
  DT_ASSIGN_OR_RETURN(
      LocalAddress local,
      RouteAddressToward(options.master_addr, options.master_port));
  attr.hostname = local.address;
  if (!local.loopback) {
    std::cerr << absl::StrCat(
        "dtensor: rank ", options.rank, ": Gloo listens on ", local.address,
        local.iface.empty() ? "" : absl::StrCat(" (", local.iface, ")"),
        ", this host's address toward MASTER_ADDR ", options.master_addr,
        " (DTENSOR_GLOO_IFACE chooses another)\n");
  }
  return attr;
}

}  // namespace

absl::StatusOr<std::shared_ptr<GlooBackend>> GlooBackend::Create(
    GlooBackendOptions options) {
  // Gloo writes to its peers' sockets without MSG_NOSIGNAL: a peer that exits
  // mid-call would kill this process with SIGPIPE instead of failing the call
  // with a status naming it. With SIGPIPE ignored the write fails (EPIPE) and
  // the failure path runs.
  ::signal(SIGPIPE, SIG_IGN);
  // The address first: a host its peers cannot reach fails before joining.
  DT_ASSIGN_OR_RETURN(const gloo::transport::tcp::attr attr,
                      TransportAttr(options));
  auto runtime = std::make_shared<GlooRuntime>();
  DT_RETURN_IF_ERROR(JoinJob(options, *runtime));
  try {
    runtime->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "GlooBackend: cannot start the TCP transport on ",
        attr.iface.empty() ? attr.hostname : attr.iface, ": ", e.what()));
  }
  return std::shared_ptr<GlooBackend>(new GlooBackend(std::move(runtime)));
}

GlooBackend::GlooBackend(std::shared_ptr<GlooRuntime> runtime)
    : runtime_(std::move(runtime)), instances_("group") {}

absl::StatusOr<std::shared_ptr<Communicator>> GlooBackend::CreateCommunicator(
    std::vector<int64_t> ranks) {
  DT_RETURN_IF_ERROR(CheckGroupMembers(ranks, rank(), world_size()));
  const std::string prefix = instances_.NextPrefix(ranks);
  const int64_t member =
      std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin();
  const absl::Duration timeout = runtime_->options.DeadlineOrDefault();
  const auto chrono_timeout = absl::ToChronoMilliseconds(timeout);
  auto context = std::make_shared<gloo::rendezvous::Context>(
      static_cast<int>(member), static_cast<int>(ranks.size()));
  context->setTimeout(chrono_timeout);
  GlooStore store(runtime_->session->client(), prefix + "mesh/",
                  chrono_timeout);
  try {
    context->connectFullMesh(store, runtime_->device);
  } catch (const std::exception& e) {
    return JoinFailure(ranks, prefix, timeout, e.what());
  }
  return std::make_shared<GlooCommunicator>(std::move(ranks), member,
                                            runtime_->options, runtime_,
                                            std::move(context), prefix);
}

absl::Status GlooBackend::JoinFailure(const std::vector<int64_t>& ranks,
                                      const std::string& prefix,
                                      absl::Duration timeout,
                                      absl::string_view what) {
  const std::string name =
      absl::StrCat("creating a communicator for group ", RanksText(ranks));
  absl::StatusOr<std::vector<int64_t>> exited =
      runtime_->session->client().ExitedRanks();
  std::vector<int64_t> gone;
  if (exited.ok()) {
    for (int64_t global : ranks) {
      if (std::find(exited->begin(), exited->end(), global) != exited->end()) {
        gone.push_back(global);
      }
    }
  }
  const std::map<int64_t, std::string> hosts =
      ReadRankHosts(runtime_->session->client(), ranks);
  if (!gone.empty()) {
    return absl::UnavailableError(absl::StrCat(name, ": ranks ",
                                               RanksText(gone), " exited",
                                               HostsOfRanks(gone, hosts)));
  }
  // Each member posts its addresses under its index in the group.
  std::vector<std::string> keys;
  for (size_t member = 0; member < ranks.size(); ++member) {
    keys.push_back(absl::StrCat(prefix, "mesh/", member));
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> posted =
      runtime_->session->client().MultiGet(keys);
  std::vector<int64_t> missing;
  if (posted.ok()) {
    for (size_t member = 0; member < ranks.size(); ++member) {
      if (!(*posted)[member].has_value()) missing.push_back(ranks[member]);
    }
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        name, ": ranks ", RanksText(missing), " did not join within ",
        absl::FormatDuration(timeout), HostsOfRanks(missing, hosts)));
  }
  return absl::UnavailableError(absl::StrCat(name, ": ", what));
}

absl::StatusOr<GlooBackendOptions> GlooOptionsFromEnv(
    CommunicatorOptions communicator) {
  DT_ASSIGN_OR_RETURN(LaunchEnv env, LaunchEnvFromEnvironment());
  GlooBackendOptions options;
  SetJobFromLaunchEnv(env, std::move(communicator), options);
  if (const char* hostname = std::getenv(kGlooHostnameEnv)) {
    options.hostname = hostname;
  }
  if (const char* iface = std::getenv(kGlooIfaceEnv)) options.iface = iface;
  return options;
}

}  // namespace dtensor
