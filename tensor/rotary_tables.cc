#include "dtensor/tensor/rotary_tables.h"

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/constant_cache.h"

namespace dtensor {
namespace {

// The host tables of `positions`, sin scaled by `sin_sign` (+1 or -1).
absl::StatusOr<RotaryTables> HostTables(absl::Span<const int64_t> positions,
                                        int64_t half, double theta,
                                        double sin_sign) {
  const int64_t seq = static_cast<int64_t>(positions.size());
  std::vector<double> cos_table(seq * half);
  std::vector<double> sin_table(seq * half);
  for (int64_t i = 0; i < half; ++i) {
    const double inverse_freq = std::pow(theta, -2.0 * i / (2 * half));
    for (int64_t s = 0; s < seq; ++s) {
      const double angle = positions[s] * inverse_freq;
      cos_table[s * half + i] = std::cos(angle);
      sin_table[s * half + i] = sin_sign * std::sin(angle);
    }
  }
  RotaryTables tables;
  DT_ASSIGN_OR_RETURN(tables.cos,
                      Tensor::FromVector<double>(cos_table, {seq, half}));
  DT_ASSIGN_OR_RETURN(tables.sin,
                      Tensor::FromVector<double>(sin_table, {seq, half}));
  return tables;
}

absl::StatusOr<RotaryTables> ToDevice(RotaryTables tables, Device device) {
  DT_ASSIGN_OR_RETURN(tables.cos, tables.cos.To(device));
  DT_ASSIGN_OR_RETURN(tables.sin, tables.sin.To(device));
  return tables;
}

// Positions first, first + 1, ..., first + length - 1.
struct PositionRun {
  int64_t first = 0;
  int64_t length = 0;
};

// `positions` split into runs, each ascending by one from a position >= 0 (a
// run starts wherever the previous one cannot go on). Stops at
// kMaxCachedRotaryRuns + 1 runs (more than that are not worth joining) and
// returns no runs for a negative position (the cached tables start at 0).
std::vector<PositionRun> RunsOf(absl::Span<const int64_t> positions) {
  std::vector<PositionRun> runs;
  for (const int64_t p : positions) {
    if (p < 0) return {};
    if (!runs.empty()) {
      PositionRun& last = runs.back();
      if (p == last.first + last.length) {
        ++last.length;
        continue;
      }
      if (runs.size() == kMaxCachedRotaryRuns) {
        runs.emplace_back();
        return runs;
      }
    }
    runs.push_back(PositionRun{p, 1});
  }
  return runs;
}

// (device type, device index, length, half, theta, inverse).
using TableKey = std::tuple<int, int, int64_t, int64_t, double, bool>;

}  // namespace

absl::StatusOr<RotaryTables> RotaryTablesOf(absl::Span<const int64_t> positions,
                                            int64_t half, double theta,
                                            bool inverse, Device device) {
  const std::vector<PositionRun> runs = RunsOf(positions);
  if (runs.empty() || runs.size() > kMaxCachedRotaryRuns) {
    DT_ASSIGN_OR_RETURN(RotaryTables tables, HostTables(positions, half, theta,
                                                        inverse ? -1.0 : 1.0));
    return ToDevice(std::move(tables), device);
  }
  std::vector<Tensor> cos_rows;
  std::vector<Tensor> sin_rows;
  for (const PositionRun& run : runs) {
    DT_ASSIGN_OR_RETURN(RotaryTables rows,
                        CachedRotaryTables(run.first, run.length, half, theta,
                                           inverse, device));
    cos_rows.push_back(std::move(rows.cos));
    sin_rows.push_back(std::move(rows.sin));
  }
  if (runs.size() == 1) return RotaryTables{cos_rows[0], sin_rows[0]};
  RotaryTables tables;
  DT_ASSIGN_OR_RETURN(tables.cos, Cat(cos_rows, 0));
  DT_ASSIGN_OR_RETURN(tables.sin, Cat(sin_rows, 0));
  return tables;
}

absl::StatusOr<RotaryTables> CachedRotaryTables(int64_t first, int64_t seq,
                                                int64_t half, double theta,
                                                bool inverse, Device device) {
  static auto* const cache = new ConstantCache<TableKey, RotaryTables>();
  const int64_t length = first + seq;
  const TableKey key{static_cast<int>(device.type),
                     device.index,
                     length,
                     half,
                     theta,
                     inverse};
  DT_ASSIGN_OR_RETURN(RotaryTables whole,
                      cache->Get(key, [&]() -> absl::StatusOr<RotaryTables> {
                        std::vector<int64_t> positions(length);
                        for (int64_t s = 0; s < length; ++s) positions[s] = s;
                        DT_ASSIGN_OR_RETURN(RotaryTables tables,
                                            HostTables(positions, half, theta,
                                                       inverse ? -1.0 : 1.0));
                        return ToDevice(std::move(tables), device);
                      }));
  RotaryTables rows;
  DT_ASSIGN_OR_RETURN(rows.cos, whole.cos.Narrow(0, first, seq));
  DT_ASSIGN_OR_RETURN(rows.sin, whole.sin.Narrow(0, first, seq));
  return rows;
}

}  // namespace dtensor
