// AdamW's state as DTensors (AdamW::State, MaterializeState): keys, layouts,
// shared storage, and that a run resumed from a copy of the state continues
// exactly as the uninterrupted run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/optim.h"
#include "dtensor/nn/optim_adamw.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using State = absl::btree_map<std::string, DTensor>;

absl::Status Check(bool condition, const std::string& what) {
  return condition ? absl::OkStatus() : absl::InternalError(what);
}

absl::StatusOr<DTensor> Pattern(std::shared_ptr<Runtime> runtime,
                                const DeviceMesh& mesh, Placement placement,
                                double scale) {
  std::vector<double> values(12);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = scale * (static_cast<double>(i % 5) - 1.5);
  }
  DT_ASSIGN_OR_RETURN(Tensor full, Tensor::FromVector(values, {6, 2}));
  return DTensor::Distribute(runtime, full, mesh, {placement});
}

void RunOnTwoRanks(
    const std::function<absl::Status(std::shared_ptr<Runtime>)>& fn) {
  const absl::Status status = LocalCluster(2).Run(
      [&](ProcessGroups& groups) { return fn(Runtime::ForRank(groups)); });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(AdamWStateTest, StateIsKeyedLaidOutAndShared) {
  RunOnTwoRanks([](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2}));
    DT_ASSIGN_OR_RETURN(DTensor p,
                        Pattern(runtime, mesh, Placement::Shard(0), 1));
    DT_ASSIGN_OR_RETURN(DTensor q,
                        Pattern(runtime, mesh, Placement::Replicate(), 1));
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::AdamW> adam,
                        nn::AdamW::Create({p, q}, {}));
    DT_ASSIGN_OR_RETURN(State state, adam->State({"w", "b"}));
    std::vector<std::string> keys;
    for (const auto& [key, tensor] : state) keys.push_back(key);
    DT_RETURN_IF_ERROR(Check(
        keys == std::vector<std::string>{"b.exp_avg", "b.exp_avg_sq", "b.step",
                                         "w.exp_avg", "w.exp_avg_sq", "w.step"},
        "keys"));
    for (const char* name : {"w.exp_avg", "w.exp_avg_sq"}) {
      const DTensor& moment = state.at(name);
      DT_RETURN_IF_ERROR(Check(moment.spec() == p.spec(), name));
      const std::vector<double> host_values =
          moment.ToLocal().ToVector<double>().value();
      for (double v : host_values) {
        DT_RETURN_IF_ERROR(Check(v == 0, absl::StrCat(name, " not zero")));
      }
    }
    const DTensor& step = state.at("b.step");
    DT_RETURN_IF_ERROR(
        Check(step.dtype() == DType::kI64 && step.shape().empty() &&
                  step.placements()[0].is_replicate() && step.mesh() == mesh,
              step.spec().ToString()));
    // Writing the state's shards sets the optimizer's state.
    DT_ASSIGN_OR_RETURN(
        Tensor sevens,
        Tensor::Full(state.at("w.exp_avg").ToLocal().shape(), 7, DType::kF64));
    DT_RETURN_IF_ERROR(nn::Assign(state.at("w.exp_avg").ToLocal(), sevens));
    DT_RETURN_IF_ERROR(nn::Assign(state.at("b.step").ToLocal(),
                                  Tensor::Scalar(5, DType::kI64)));
    DT_RETURN_IF_ERROR(Check(adam->steps() == std::vector<int64_t>{0, 5},
                             "steps after assigning"));
    const std::vector<double> host_values =
        adam->exp_avg()[0].ToLocal().ToVector<double>().value();
    for (double v : host_values) {
      DT_RETURN_IF_ERROR(Check(v == 7, "exp_avg after assigning"));
    }
    // A step counts from the assigned step.
    DT_RETURN_IF_ERROR(adam->Step({p, q}));
    return Check(adam->steps() == std::vector<int64_t>{1, 6}, "steps");
  });
}

TEST(AdamWStateTest, ResumingFromACopiedStateContinuesExactly) {
  RunOnTwoRanks([](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2}));
    nn::AdamWOptions options;
    options.learning_rate = 0.1;
    DT_ASSIGN_OR_RETURN(DTensor p,
                        Pattern(runtime, mesh, Placement::Shard(0), 1));
    DT_ASSIGN_OR_RETURN(DTensor g1,
                        Pattern(runtime, mesh, Placement::Shard(0), 0.3));
    DT_ASSIGN_OR_RETURN(DTensor g2,
                        Pattern(runtime, mesh, Placement::Replicate(), -0.7));
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::AdamW> first,
                        nn::AdamW::Create({p}, options));
    DT_RETURN_IF_ERROR(first->Step({g1}));
    // A second optimizer on a copy of the parameter, given a copy of the
    // state after one step.
    DT_ASSIGN_OR_RETURN(DTensor copy,
                        Pattern(runtime, mesh, Placement::Shard(0), 9));
    DT_RETURN_IF_ERROR(nn::Assign(copy.ToLocal(), p.ToLocal()));
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::AdamW> second,
                        nn::AdamW::Create({copy}, options));
    DT_ASSIGN_OR_RETURN(State from, first->State({"p"}));
    DT_ASSIGN_OR_RETURN(State to, second->State({"p"}));
    for (const auto& [key, tensor] : from) {
      DT_RETURN_IF_ERROR(nn::Assign(to.at(key).ToLocal(), tensor.ToLocal()));
    }
    DT_RETURN_IF_ERROR(first->Step({g2}));
    DT_RETURN_IF_ERROR(second->Step({g2}));
    DT_RETURN_IF_ERROR(
        Check(second->steps() == std::vector<int64_t>{2}, "resumed steps"));
    return Check(copy.ToLocal().ToVector<double>().value() ==
                     p.ToLocal().ToVector<double>().value(),
                 "resumed parameter differs from the uninterrupted run");
  });
}

TEST(AdamWStateTest, BadNamesAreErrors) {
  RunOnTwoRanks([](std::shared_ptr<Runtime> runtime) -> absl::Status {
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create({2}));
    DT_ASSIGN_OR_RETURN(DTensor p,
                        Pattern(runtime, mesh, Placement::Shard(0), 1));
    DT_ASSIGN_OR_RETURN(std::unique_ptr<nn::AdamW> adam,
                        nn::AdamW::Create({p, p}, {}));
    const absl::Status count = adam->State({"a"}).status();
    DT_RETURN_IF_ERROR(Check(
        absl::StrContains(count.message(), "1 names for 2"), count.ToString()));
    const absl::Status repeat = adam->State({"a", "a"}).status();
    return Check(absl::StrContains(repeat.message(), "\"a.exp_avg\" repeats"),
                 repeat.ToString());
  });
}

}  // namespace
}  // namespace dtensor
