#include "dtensor/testing/training_soak.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/propagation_cache.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/large_buffer_cache.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/testing/token_batch.h"

namespace dtensor {
namespace testing {
namespace {

// The second field of /proc/self/statm (resident pages) in bytes; 0 where
// the file is missing or unreadable.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t total_pages = 0;
  int64_t resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

bool operator==(const ProcessFootprint& a, const ProcessFootprint& b) {
  return a.live_storages == b.live_storages &&
         a.live_storage_bytes == b.live_storage_bytes &&
         a.idle_large_buffer_bytes == b.idle_large_buffer_bytes &&
         a.propagation_entries == b.propagation_entries &&
         a.propagation_misses == b.propagation_misses &&
         a.planner_entries == b.planner_entries &&
         a.rank0_communicators == b.rank0_communicators &&
         a.rank0_counter_events == b.rank0_counter_events;
}

ProcessFootprint ProcessFootprintNow() {
  ProcessFootprint footprint;
  footprint.live_storages = Storage::LiveCount();
  footprint.live_storage_bytes = Storage::LiveBytes();
  footprint.idle_large_buffer_bytes =
      static_cast<int64_t>(LargeBufferCache::Shared().idle_bytes());
  footprint.propagation_entries = PropagationCache::Shared().size();
  footprint.propagation_misses = PropagationCache::Shared().misses();
  footprint.planner_entries =
      static_cast<int64_t>(RedistributePlanner::Shared().size());
  footprint.resident_bytes = ResidentBytes();
  return footprint;
}

absl::Status RunTrainingSoak(
    const SoakOptions& options,
    const std::function<void(int64_t step, const ProcessFootprint&)>& sample) {
  parallel::LlamaTrainerOptions trainer_options;
  trainer_options.config = options.config;
  trainer_options.seed = options.seed;
  LocalCluster cluster(options.mesh.size());
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    DT_ASSIGN_OR_RETURN(
        auto trainer,
        parallel::LlamaTrainer::Create(Runtime::ForRank(groups), options.mesh,
                                       options.plan, trainer_options));
    DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, groups.World());
    CommCounter comms(CommCounter::Keep::kTotals);
    for (int64_t step = 1; step <= options.steps; ++step) {
      {
        // Uniform tokens from (seed, step): the same batch on every rank.
        Generator generator(options.seed, static_cast<uint64_t>(step));
        DT_ASSIGN_OR_RETURN(
            TokenBatch data,
            UniformTokenBatch(generator, options.config.vocab_size,
                              options.batch, options.seq));
        DT_ASSIGN_OR_RETURN(parallel::LlamaTrainer::Batch batch,
                            trainer->MakeBatch(data.tokens, data.targets));
        CommCounter::Scope scope(comms);
        DT_RETURN_IF_ERROR(trainer->Step(batch).status());
      }  // The step's batch and loss are released here.
      if (std::find(options.sample_after.begin(), options.sample_after.end(),
                    step) == options.sample_after.end()) {
        continue;
      }
      DT_RETURN_IF_ERROR(world->Barrier());
      if (groups.rank() == 0) {
        ProcessFootprint footprint = ProcessFootprintNow();
        footprint.rank0_communicators = groups.num_cached();
        footprint.rank0_counter_events =
            static_cast<int64_t>(comms.events().size());
        footprint.rank0_collectives = comms.total_collectives();
        sample(step, footprint);
      }
      DT_RETURN_IF_ERROR(world->Barrier());
    }
    return absl::OkStatus();
  });
}

}  // namespace testing
}  // namespace dtensor
