#include "dtensor/redistribute/cost_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dtensor/base/enum_names.h"

namespace dtensor {

constexpr EnumNames<CommKind, CommKind::kLocal> kCommKindNames(
    "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "permute",
    "local");

absl::string_view CommKindName(CommKind kind) {
  return kCommKindNames.Name(kind);
}

absl::StatusOr<CostModel> CostModel::Create(std::vector<MeshDimLink> links,
                                            double launch_us) {
  if (!(launch_us >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch latency ", launch_us, " us is negative"));
  }
  for (size_t m = 0; m < links.size(); ++m) {
    if (!(links[m].bandwidth_gbps > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bandwidth ", links[m].bandwidth_gbps,
                       " GB/s of mesh dim ", m, " is not positive"));
    }
    if (!(links[m].hop_latency_us >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hop latency ", links[m].hop_latency_us,
                       " us of mesh dim ", m, " is negative"));
    }
  }
  return CostModel(std::move(links), launch_us);
}

double CostModel::ReceivedBytes(CommKind kind, int64_t group_size,
                                double local_bytes) {
  const double n = static_cast<double>(group_size);
  switch (kind) {
    case CommKind::kAllGather:
      return (n - 1) * local_bytes;
    case CommKind::kReduceScatter:
    case CommKind::kAllToAll:
      return (n - 1) / n * local_bytes;
    case CommKind::kAllReduce:
      return 2 * (n - 1) / n * local_bytes;
    case CommKind::kPermute:
      return local_bytes;
    case CommKind::kLocal:
      return 0;
  }
  return 0;
}

namespace {

int64_t Hops(CommKind kind, int64_t group_size) {
  switch (kind) {
    case CommKind::kAllGather:
    case CommKind::kReduceScatter:
    case CommKind::kAllToAll:
      return group_size - 1;
    case CommKind::kAllReduce:
      return 2 * (group_size - 1);
    case CommKind::kPermute:
      return 1;
    case CommKind::kLocal:
      return 0;
  }
  return 0;
}

}  // namespace

double CostModel::StepCostUs(CommKind kind, absl::Span<const int64_t> mesh_dims,
                             absl::Span<const int64_t> mesh_shape,
                             double local_bytes) const {
  if (kind == CommKind::kLocal) return 0;
  int64_t group_size = 1;
  double bandwidth_gbps = 0;
  double hop_us = 0;
  for (int64_t m : mesh_dims) {
    group_size *= mesh_shape[m];
    const MeshDimLink& link = links_[m];
    bandwidth_gbps = bandwidth_gbps == 0
                         ? link.bandwidth_gbps
                         : std::min(bandwidth_gbps, link.bandwidth_gbps);
    hop_us = std::max(hop_us, link.hop_latency_us);
  }
  const double received = ReceivedBytes(kind, group_size, local_bytes);
  // GB/s = 1e9 bytes per 1e6 us, so bytes / (GB/s) / 1e3 is in us.
  return launch_us_ + Hops(kind, group_size) * hop_us +
         received / (bandwidth_gbps * 1e3);
}

bool operator==(const CostModel& a, const CostModel& b) {
  if (a.launch_us_ != b.launch_us_ || a.links_.size() != b.links_.size()) {
    return false;
  }
  for (size_t m = 0; m < a.links_.size(); ++m) {
    if (a.links_[m].bandwidth_gbps != b.links_[m].bandwidth_gbps ||
        a.links_[m].hop_latency_us != b.links_[m].hop_latency_us) {
      return false;
    }
  }
  return true;
}

}  // namespace dtensor
