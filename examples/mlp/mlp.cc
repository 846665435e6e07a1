// The MLP of docs/parallel.md, "Your own model": the whole user program.
#include "examples/mlp/mlp.h"

#include <cmath>
#include <memory>
#include <utility>

#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/nn/activations.h"
#include "dtensor/nn/init.h"
#include "dtensor/nn/linear.h"
#include "dtensor/nn/losses.h"
#include "dtensor/nn/module_list.h"
#include "dtensor/parallel/trainer.h"

namespace dtensor {
namespace examples {
namespace {

// A deterministic [rows, cols] batch: sin(0.37 i + phase).
Tensor Wave(int64_t rows, int64_t cols, double phase) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows * cols; ++i) {
    values.push_back(static_cast<float>(std::sin(0.37 * i + phase)));
  }
  return *Tensor::FromVector(values, {rows, cols});
}

}  // namespace

parallel::Plan MlpPlan() {
  return parallel::Plan::Of(
      {{"0", parallel::ColwiseParallel()}, {"2", parallel::RowwiseParallel()}},
      parallel::DataParallel::kReplicate);
}

absl::StatusOr<MlpRun> TrainMlp(const DeviceMesh& mesh,
                                const parallel::Plan& plan,
                                const MlpOptions& options) {
  MlpRun run;
  LocalCluster cluster(mesh.size());
  DT_RETURN_IF_ERROR(cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_ASSIGN_OR_RETURN(
        std::unique_ptr<nn::Sequential> model,
        nn::Sequential::Of(nn::Linear::Create(16, options.hidden),
                           std::make_unique<nn::ReLU>(),
                           nn::Linear::Create(options.hidden, 16)));
    DT_RETURN_IF_ERROR(nn::Initialize(*model, runtime, mesh));
    nn::AdamWOptions adamw;
    adamw.learning_rate = 0.01;
    DT_ASSIGN_OR_RETURN(std::unique_ptr<parallel::Trainer> trainer,
                        parallel::Trainer::Create(
                            runtime, std::move(model), mesh, plan,
                            nn::MSELoss(), parallel::AdamWFactory(adamw)));
    // Every rank holds the whole batch; ShardBatch keeps its dp block.
    DT_ASSIGN_OR_RETURN(DTensor x,
                        trainer->ShardBatch(Wave(options.batch, 16, 0.1)));
    DT_ASSIGN_OR_RETURN(DTensor y,
                        trainer->ShardBatch(Wave(options.batch, 16, 1.3)));
    MlpRun mine;
    for (int step = 0; step < options.steps; ++step) {
      parallel::Trainer::PhaseComms comms;
      DT_ASSIGN_OR_RETURN(DTensor loss, trainer->StepCounted(x, y, comms));
      DT_ASSIGN_OR_RETURN(double value, loss.Item());
      mine.losses.push_back(value);
      mine.forward = std::move(comms.forward);
      mine.backward = std::move(comms.backward);
      mine.update = std::move(comms.update);
    }
    for (const nn::NamedSlot& named : trainer->model().NamedParameters()) {
      DT_ASSIGN_OR_RETURN(mine.parameters[named.name],
                          named.slot->value.FullTensor());
    }
    if (groups.rank() == 0) run = std::move(mine);
    return absl::OkStatus();
  }));
  return run;
}

}  // namespace examples
}  // namespace dtensor
