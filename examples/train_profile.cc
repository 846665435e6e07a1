#include "examples/train_profile.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profile_trace.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

absl::StatusOr<RankProfile> FinishRankProfile(
    ProcessGroups& groups, std::unique_ptr<Profiler> profiler) {
  DT_RETURN_IF_ERROR(profiler->Resolve());
  const RankWait own = RankWaitOf(Summarize(*profiler));
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, groups.World());
  DT_ASSIGN_OR_RETURN(Tensor host, Tensor::FromVector(
                                       std::vector<double>{own.wait_us_per_step},
                                       {1}));
  DT_ASSIGN_OR_RETURN(Tensor input, host.To(world->device()));
  DT_ASSIGN_OR_RETURN(Tensor output, Tensor::Empty({world->size()}, DType::kF64,
                                                   world->device()));
  DT_RETURN_IF_ERROR(world->AllGather(input, output, 0));
  DT_ASSIGN_OR_RETURN(Tensor gathered, output.To(Device::CPU()));
  RankProfile result;
  result.profiler = std::move(profiler);
  for (int64_t i = 0; i < world->size(); ++i) {
    result.waits.push_back(
        {world->group_ranks()[i], gathered.data<double>()[i]});
  }
  return result;
}

absl::Status ReportProfiles(const std::map<int64_t, RankProfile>& profiles,
                            const std::string& trace_path) {
  if (profiles.empty()) return absl::OkStatus();
  const auto& [lowest, first] = *profiles.begin();
  if (lowest == 0) {
    std::printf("\n%s%s",
                FormatProfileTable(Summarize(*first.profiler)).c_str(),
                FormatRankWaits(first.waits).c_str());
  }
  if (trace_path.empty()) return absl::OkStatus();
  std::vector<const Profiler*> ranks;
  for (const auto& [rank, profile] : profiles) {
    ranks.push_back(profile.profiler.get());
  }
  const std::string path =
      lowest == 0 ? trace_path : absl::StrCat(trace_path, ".rank", lowest);
  DT_RETURN_IF_ERROR(WriteProfileTrace(path, ranks));
  std::printf("wrote the profile trace of %zu rank(s) to %s\n", ranks.size(),
              path.c_str());
  return absl::OkStatus();
}

}  // namespace dtensor
