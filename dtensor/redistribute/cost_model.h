#ifndef DTENSOR_DTENSOR_COST_MODEL_H_
#define DTENSOR_DTENSOR_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dtensor {

// What one redistribution step does. Local steps move no data between ranks.
enum class CommKind : uint8_t {
  kAllGather,
  kAllReduce,
  kReduceScatter,
  kAllToAll,
  kPermute,
  kLocal,
};

// "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "permute",
// "local".
absl::string_view CommKindName(CommKind kind);

// The network of one mesh dim: link bandwidth and per-hop latency.
struct MeshDimLink {
  // 1 GB = 1e9 bytes.
  double bandwidth_gbps = 87.7;
  double hop_latency_us = 0.6;
};

// The alpha-beta cost of collectives (PyTorch's default constants):
//
//   cost(step over a group of n ranks) = launch + hops * hop + received / bw
//
// with hops = n-1 for all-gather, reduce-scatter and all-to-all, 2(n-1) for
// all-reduce, 1 for a permute; and the bytes each rank receives, for B bytes
// held locally before the step (padded to the full chunk for uneven shards):
// all-gather (n-1)·B, reduce-scatter (n-1)/n·B, all-reduce 2(n-1)/n·B,
// all-to-all (n-1)/n·B, permute B. A step over several mesh dims runs on their
// flattened group: n is the product of their sizes, bw the slowest of their
// bandwidths and hop the largest of their hop latencies. Local steps cost 0.
class CostModel {
 public:
  static constexpr double kDefaultLaunchUs = 6.6;

  // Default links for every dim of a mesh with `mesh_ndim` dims.
  explicit CostModel(int64_t mesh_ndim)
      : links_(static_cast<size_t>(mesh_ndim)) {}
  // Errors: InvalidArgument naming a non-positive bandwidth or a negative
  //   latency.
  static absl::StatusOr<CostModel> Create(std::vector<MeshDimLink> links,
                                          double launch_us = kDefaultLaunchUs);

  int64_t mesh_ndim() const { return static_cast<int64_t>(links_.size()); }
  const std::vector<MeshDimLink>& links() const { return links_; }
  double launch_us() const { return launch_us_; }

  // Bytes each rank receives in a `kind` step over `group_size` ranks when it
  // holds `local_bytes` before the step.
  static double ReceivedBytes(CommKind kind, int64_t group_size,
                              double local_bytes);
  // Microseconds of a `kind` step over `mesh_dims` of a mesh of `mesh_shape`,
  // with `local_bytes` held by each rank before it.
  double StepCostUs(CommKind kind, absl::Span<const int64_t> mesh_dims,
                    absl::Span<const int64_t> mesh_shape,
                    double local_bytes) const;

  friend bool operator==(const CostModel& a, const CostModel& b);
  template <typename H>
  friend H AbslHashValue(H h, const CostModel& model) {
    h = H::combine(std::move(h), model.launch_us_);
    for (const MeshDimLink& link : model.links_) {
      h = H::combine(std::move(h), link.bandwidth_gbps, link.hop_latency_us);
    }
    return h;
  }

 private:
  CostModel(std::vector<MeshDimLink> links, double launch_us)
      : links_(std::move(links)), launch_us_(launch_us) {}

  std::vector<MeshDimLink> links_;
  double launch_us_ = kDefaultLaunchUs;
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_COST_MODEL_H_
