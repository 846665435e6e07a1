#include "dtensor/sharding.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// Normalises every Shard dim against `tensor_rank`; an error names the mesh
// dim and its placement.
absl::StatusOr<std::vector<Placement>> NormalizeAll(
    absl::Span<const Placement> placements, int64_t tensor_rank) {
  std::vector<Placement> normalized;
  normalized.reserve(placements.size());
  for (size_t m = 0; m < placements.size(); ++m) {
    absl::StatusOr<Placement> p =
        NormalizePlacement(placements[m], tensor_rank);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement ", placements[m].ToString(), " of mesh dim ",
                       m, ": ", p.status().message()));
    }
    normalized.push_back(*p);
  }
  return normalized;
}

// Splits "S(0)[1]" into the placement text and the position text ("1");
// `position` is left empty when there is no "[k]" suffix.
void SplitPosition(absl::string_view item, absl::string_view* placement,
                   absl::string_view* position) {
  *placement = item;
  *position = absl::string_view();
  const size_t open = item.rfind('[');
  if (item.empty() || item.back() != ']' || open == absl::string_view::npos) {
    return;
  }
  *placement = absl::StripAsciiWhitespace(item.substr(0, open));
  *position = item.substr(open + 1, item.size() - open - 2);
}

}  // namespace

absl::StatusOr<Sharding> Sharding::FromPlacements(
    absl::Span<const Placement> placements, int64_t tensor_rank,
    const ShardOrder& order) {
  if (tensor_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative tensor rank ", tensor_rank));
  }
  DT_ASSIGN_OR_RETURN(std::vector<Placement> normalized,
                      NormalizeAll(placements, tensor_rank));
  const int64_t mesh_ndim = static_cast<int64_t>(normalized.size());
  std::vector<int64_t> positions(normalized.size(), -1);
  if (!order.empty() && static_cast<int64_t>(order.size()) != tensor_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard order has ", order.size(),
                     " entries for a tensor of rank ", tensor_rank));
  }
  for (int64_t d = 0; d < static_cast<int64_t>(order.size()); ++d) {
    const std::vector<int64_t>& mesh_dims = order[d];
    auto where = [&] {
      return absl::StrCat("shard order [", absl::StrJoin(mesh_dims, ", "),
                          "] of tensor dim ", d);
    };
    for (size_t i = 0; i < mesh_dims.size(); ++i) {
      const int64_t m = mesh_dims[i];
      if (m < 0 || m >= mesh_ndim) {
        return absl::InvalidArgumentError(
            absl::StrCat("mesh dim ", m, " in ", where(),
                         " is out of range for ", mesh_ndim, " mesh dims"));
      }
      if (normalized[m] != Placement::Shard(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat("mesh dim ", m, " in ", where(), " has placement ",
                         normalized[m].ToString(), ", not S(", d, ")"));
      }
      if (positions[m] >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("mesh dim ", m, " is listed twice in ", where()));
      }
      positions[m] = static_cast<int64_t>(i);
    }
  }
  if (!order.empty()) {
    for (int64_t m = 0; m < mesh_ndim; ++m) {
      if (normalized[m].is_shard() && positions[m] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh dim ", m, " shards tensor dim ", normalized[m].dim(),
            " but is missing from its shard order [",
            absl::StrJoin(order[normalized[m].dim()], ", "), "]"));
      }
    }
  }
  return Build(std::move(normalized), tensor_rank, std::move(positions));
}

absl::StatusOr<Sharding> Sharding::Parse(std::string_view text,
                                         int64_t tensor_rank) {
  if (tensor_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative tensor rank ", tensor_rank));
  }
  std::vector<Placement> placements;
  std::vector<int64_t> positions;
  for (absl::string_view raw :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    absl::string_view placement_text, position_text;
    SplitPosition(item, &placement_text, &position_text);
    DT_ASSIGN_OR_RETURN(Placement placement,
                        ParsePlacement(std::string_view(
                            placement_text.data(), placement_text.size())));
    int64_t position = -1;
    if (!position_text.empty() || item != placement_text) {
      if (!placement.is_shard()) {
        return absl::InvalidArgumentError(
            absl::StrCat("nesting position on '", item, "' (mesh dim ",
                         placements.size(), "): only S(dim) takes [k]"));
      }
      if (!absl::SimpleAtoi(position_text, &position) || position < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "malformed nesting position in '", item, "' (mesh dim ",
            placements.size(), "): expected a non-negative integer"));
      }
    }
    placements.push_back(placement);
    positions.push_back(position);
  }
  DT_ASSIGN_OR_RETURN(std::vector<Placement> normalized,
                      NormalizeAll(placements, tensor_rank));
  return Build(std::move(normalized), tensor_rank, std::move(positions));
}

absl::StatusOr<Sharding> Sharding::Build(std::vector<Placement> placements,
                                         int64_t tensor_rank,
                                         std::vector<int64_t> positions) {
  for (int64_t d = 0; d < tensor_rank; ++d) {
    std::vector<int64_t> mesh_dims, given;
    for (size_t m = 0; m < placements.size(); ++m) {
      if (placements[m] != Placement::Shard(d)) continue;
      mesh_dims.push_back(static_cast<int64_t>(m));
      if (positions[m] >= 0) given.push_back(positions[m]);
    }
    if (given.empty()) {
      for (size_t i = 0; i < mesh_dims.size(); ++i) positions[mesh_dims[i]] = i;
      continue;
    }
    if (given.size() != mesh_dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh dims [", absl::StrJoin(mesh_dims, ", "), "] shard tensor dim ",
          d, " but only some have a nesting position [k]: give all or none"));
    }
    std::vector<int64_t> sorted = given;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] != static_cast<int64_t>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "nesting positions [", absl::StrJoin(given, ", "),
            "] of mesh dims [", absl::StrJoin(mesh_dims, ", "),
            "] on tensor dim ", d, " do not form 0..", sorted.size() - 1));
      }
    }
  }
  Sharding sharding;
  sharding.tensor_rank_ = tensor_rank;
  for (size_t m = 0; m < placements.size(); ++m) {
    const bool shard = placements[m].is_shard();
    sharding.entries_.push_back(
        Entry{placements[m], shard ? static_cast<int32_t>(positions[m]) : 0});
  }
  return sharding;
}

std::vector<Placement> Sharding::placements() const {
  std::vector<Placement> placements;
  placements.reserve(entries_.size());
  for (const Entry& entry : entries_) placements.push_back(entry.placement);
  return placements;
}

MeshDimList Sharding::MeshDimsSharding(int64_t tensor_dim) const {
  MeshDimList unordered;
  for (int64_t m = 0; m < mesh_ndim(); ++m) {
    if (entries_[m].placement == Placement::Shard(tensor_dim)) {
      unordered.push_back(m);
    }
  }
  MeshDimList ordered(unordered.size());
  for (int64_t m : unordered) ordered[entries_[m].position] = m;
  return ordered;
}

ShardOrder Sharding::shard_order() const {
  ShardOrder order;
  order.reserve(tensor_rank_);
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    const MeshDimList mesh_dims = MeshDimsSharding(d);
    order.emplace_back(mesh_dims.begin(), mesh_dims.end());
  }
  return order;
}

bool Sharding::HasDefaultOrder(int64_t tensor_dim) const {
  const MeshDimList mesh_dims = MeshDimsSharding(tensor_dim);
  return std::is_sorted(mesh_dims.begin(), mesh_dims.end());
}

std::vector<int64_t> Sharding::ReplicaMeshDims() const {
  std::vector<int64_t> mesh_dims;
  for (int64_t m = 0; m < mesh_ndim(); ++m) {
    if (!entries_[m].placement.is_shard()) mesh_dims.push_back(m);
  }
  return mesh_dims;
}

Sharding Sharding::WithReplicated(absl::Span<const int64_t> mesh_dims) const {
  for (int64_t m : mesh_dims) DT_DCHECK(m >= 0 && m < mesh_ndim());
  Sharding result = *this;
  for (int64_t m : mesh_dims) result.entries_[m] = Entry{Placement(), 0};
  result.CompactPositions();
  return result;
}

Sharding Sharding::WithoutPartials() const {
  std::vector<int64_t> partial;
  for (int64_t m = 0; m < mesh_ndim(); ++m) {
    if (entries_[m].placement.is_partial()) partial.push_back(m);
  }
  return partial.empty() ? *this : WithReplicated(partial);
}

Sharding Sharding::WithShardsAppended(absl::Span<const int64_t> mesh_dims,
                                      int64_t tensor_dim) const {
  DT_DCHECK(tensor_dim >= 0 && tensor_dim < tensor_rank());
  for (int64_t m : mesh_dims) {
    DT_DCHECK(m >= 0 && m < mesh_ndim());
    DT_DCHECK(entries_[m].placement != Placement::Shard(tensor_dim));
  }
  Sharding result = *this;
  int32_t next_position = 0;
  for (const Entry& entry : entries_) {
    if (entry.placement == Placement::Shard(tensor_dim)) ++next_position;
  }
  for (int64_t m : mesh_dims) {
    result.entries_[m] = Entry{Placement::Shard(tensor_dim), next_position++};
  }
  result.CompactPositions();
  return result;
}

Sharding Sharding::WithPartial(int64_t mesh_dim, ReduceOp op) const {
  DT_DCHECK(mesh_dim >= 0 && mesh_dim < mesh_ndim());
  Sharding result = *this;
  result.entries_[mesh_dim] = Entry{Placement::Partial(op), 0};
  result.CompactPositions();
  return result;
}

void Sharding::CompactPositions() {
  // New position of each sharding mesh dim: how many mesh dims sharding the
  // same tensor dim nest outside it.
  absl::InlinedVector<int32_t, 4> compacted(entries_.size(), 0);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].placement.is_shard()) continue;
    for (const Entry& other : entries_) {
      if (other.placement == entries_[i].placement &&
          other.position < entries_[i].position) {
        ++compacted[i];
      }
    }
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    entries_[i].position = compacted[i];
  }
}

std::string Sharding::ToString() const {
  std::vector<bool> default_order(tensor_rank_);
  for (int64_t d = 0; d < tensor_rank_; ++d) {
    default_order[d] = HasDefaultOrder(d);
  }
  std::vector<std::string> items;
  items.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    std::string item = entry.placement.ToString();
    if (entry.placement.is_shard() && !default_order[entry.placement.dim()]) {
      absl::StrAppend(&item, "[", entry.position, "]");
    }
    items.push_back(std::move(item));
  }
  return absl::StrJoin(items, ",");
}

std::ostream& operator<<(std::ostream& os, const Sharding& sharding) {
  return os << sharding.ToString();
}

}  // namespace dtensor
