#include "ops/propagation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "dtensor/cost_model.h"
#include "dtensor/redistribute_planner.h"

namespace dtensor {

const OpStrategy& KernelContext::strategy() const {
  return propagation_.strategy;
}

const DTensorSpec* KernelContext::input(size_t i) const {
  return propagation_.inputs[i].to.get();
}

const DTensorSpec& KernelContext::output(size_t j) const {
  return *propagation_.outputs[j];
}

int64_t Propagation::num_collectives() const {
  int64_t n = 0;
  for (const InputRedistribution& in : inputs) {
    if (in.plan != nullptr) n += in.plan->num_collectives();
  }
  for (const CommCounter::Event& e : kernel_events) {
    n += e.kind != CommKind::kLocal;
  }
  return n;
}

std::string Propagation::ToString() const {
  std::string text = absl::StrCat(op->name, ": ", strategy.ToString(), "\n");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputRedistribution& in = inputs[i];
    if (in.from == nullptr) {
      absl::StrAppend(&text, "input ", i, ": absent\n");
    } else if (in.plan == nullptr) {
      absl::StrAppend(&text, "input ", i, ": ", in.from->sharding().ToString(),
                      " kept\n");
    } else {
      absl::StrAppend(&text, "input ", i, ": ", in.plan->ToString(), "\n");
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    absl::StrAppend(&text, "output ", j, ": ", outputs[j]->ToString(), "\n");
  }
  absl::StrAppend(&text, "cost ", cost_us, " us, ", num_collectives(),
                  " collective(s)");
  return text;
}

bool SameMesh(const DeviceMesh& a, const DeviceMesh& b) {
  return &a == &b ||
         (a.rank_list() == b.rank_list() && a.dim_names() == b.dim_names() &&
          a.layout() == b.layout());
}

namespace {

// Whether every Partial of `sharding` can reduce `dtype`.
bool PartialsAllowed(const Sharding& sharding, DType dtype) {
  for (int64_t m = 0; m < sharding.mesh_ndim(); ++m) {
    const Placement& p = sharding.placement(m);
    if (p.is_partial() && !PartialAllowed(p.reduce_op(), dtype)) return false;
  }
  return true;
}

// The planner's rule for Partial targets: from Replicate or the same Partial.
bool Reachable(const Sharding& from, const Sharding& to) {
  for (int64_t m = 0; m < to.mesh_ndim(); ++m) {
    const Placement& dst = to.placement(m);
    const Placement& src = from.placement(m);
    if (dst.is_partial() && src != dst && !src.is_replicate()) return false;
  }
  return true;
}

// Whether a layout fits a tensor of `rank` on a mesh of `mesh_ndim` dims.
bool Fits(const Sharding& s, int64_t mesh_ndim, int64_t rank) {
  return s.mesh_ndim() == mesh_ndim && s.tensor_rank() == rank;
}

// How good a strategy is; smaller is better.
struct Score {
  double cost_us = 0;
  int changed_inputs = 0;
  int64_t steps = 0;

  bool BetterThan(const Score& other) const {
    const double tolerance =
        1e-9 *
        std::max(1.0, std::max(std::abs(cost_us), std::abs(other.cost_us)));
    if (cost_us < other.cost_us - tolerance) return true;
    if (cost_us > other.cost_us + tolerance) return false;
    if (changed_inputs != other.changed_inputs) {
      return changed_inputs < other.changed_inputs;
    }
    return steps < other.steps;
  }
};

// The inputs padded with absent ones to the op's input count; errors for a
// wrong count or a missing required input.
absl::StatusOr<std::vector<const DTensorSpec*>> PadInputs(
    const OpDef& op, absl::Span<const DTensorSpec* const> given) {
  const size_t required = op.num_inputs - op.num_optional_inputs;
  if (given.size() > static_cast<size_t>(op.num_inputs) ||
      given.size() < required) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, " takes ",
                     op.num_optional_inputs == 0
                         ? absl::StrCat(op.num_inputs)
                         : absl::StrCat(required, " to ", op.num_inputs),
                     " tensor input(s), got ", given.size()));
  }
  std::vector<const DTensorSpec*> inputs(given.begin(), given.end());
  inputs.resize(op.num_inputs, nullptr);
  for (size_t i = 0; i < required; ++i) {
    if (inputs[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(op.name, ": input ", i, " is required"));
    }
  }
  return inputs;
}

// The mesh of the inputs; an error when they are on different meshes.
absl::StatusOr<const DeviceMesh*> CommonMesh(
    const OpDef& op, absl::Span<const DTensorSpec* const> inputs) {
  const DeviceMesh* mesh = nullptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    if (mesh == nullptr) {
      mesh = &inputs[i]->mesh();
    } else if (!SameMesh(*mesh, inputs[i]->mesh()) &&
               *mesh != inputs[i]->mesh()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op.name, ": input ", i, " is on another mesh (",
                       inputs[i]->mesh().ToString(), ") than the first input (",
                       mesh->ToString(), ")"));
    }
  }
  if (mesh == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, ": no input given"));
  }
  return mesh;
}

absl::Status CheckStrategyShape(const OpDef& op, const OpStrategy& s,
                                const StrategyContext& ctx) {
  const int64_t mesh_ndim = static_cast<int64_t>(ctx.mesh_shape.size());
  bool ok = s.inputs.size() == static_cast<size_t>(op.num_inputs) &&
            s.outputs.size() == static_cast<size_t>(op.num_outputs);
  for (size_t i = 0; ok && i < s.inputs.size(); ++i) {
    ok = ctx.inputs[i] == nullptr ||
         Fits(s.inputs[i], mesh_ndim, ctx.inputs[i]->ndim());
  }
  for (size_t j = 0; ok && j < s.outputs.size(); ++j) {
    ok = Fits(s.outputs[j], mesh_ndim,
              static_cast<int64_t>(ctx.outputs[j].shape.size()));
  }
  for (const KernelComm& comm : s.kernel_comms) {
    for (int64_t m : comm.mesh_dims) ok &= m >= 0 && m < mesh_ndim;
  }
  if (ok) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(op.name, ": strategy ", s.ToString(),
                   " does not fit the call's inputs, outputs or mesh"));
}

// Builds the result for the chosen strategy.
absl::StatusOr<std::shared_ptr<const Propagation>> Build(
    const OpDef& op, const StrategyContext& ctx,
    absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners,
    OpStrategy strategy,
    std::vector<std::shared_ptr<const RedistributePlan>> plans,
    const CostModel& model, int64_t num_strategies, int64_t num_valid) {
  auto result = std::make_shared<Propagation>();
  result->op = &op;
  result->num_strategies = num_strategies;
  result->num_valid_strategies = num_valid;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    InputRedistribution in;
    if (ctx.inputs[i] != nullptr) {
      const DTensorSpec& spec = *ctx.inputs[i];
      const bool owned = i < owners.size() && owners[i] != nullptr &&
                         owners[i]->get() == &spec;
      in.from = owned ? *owners[i] : std::make_shared<const DTensorSpec>(spec);
      in.to = in.from;
      in.plan = std::move(plans[i]);
      if (in.plan != nullptr) {
        DT_ASSIGN_OR_RETURN(DTensorSpec to,
                            DTensorSpec::Create(ctx.mesh, strategy.inputs[i],
                                                spec.shape(), spec.dtype()));
        in.to = std::make_shared<const DTensorSpec>(std::move(to));
        result->cost_us += in.plan->total_cost_us;
      }
    }
    result->inputs.push_back(std::move(in));
  }
  for (size_t j = 0; j < ctx.outputs.size(); ++j) {
    DT_ASSIGN_OR_RETURN(
        DTensorSpec out,
        DTensorSpec::Create(ctx.mesh, strategy.outputs[j], ctx.outputs[j].shape,
                            ctx.outputs[j].dtype));
    result->outputs.push_back(
        std::make_shared<const DTensorSpec>(std::move(out)));
  }
  for (const KernelComm& comm : strategy.kernel_comms) {
    int64_t group = 1;
    for (int64_t m : comm.mesh_dims) group *= ctx.mesh_shape[m];
    CommCounter::Event event;
    event.kind = comm.kind;
    event.mesh_dims = comm.mesh_dims;
    event.bytes = CostModel::ReceivedBytes(comm.kind, group, comm.local_bytes);
    event.estimated_us = model.StepCostUs(comm.kind, comm.mesh_dims,
                                          ctx.mesh_shape, comm.local_bytes);
    event.label = absl::StrCat(op.name, " kernel");
    result->cost_us += event.estimated_us;
    result->kernel_events.push_back(std::move(event));
  }
  result->strategy = std::move(strategy);
  return std::shared_ptr<const Propagation>(std::move(result));
}

// Redistribution plans per input and target layout (null: unreachable), so
// that the many strategies sharing an input layout plan it once.
class InputPlans {
 public:
  InputPlans(absl::Span<const DTensorSpec* const> inputs,
             const StrategyContext& ctx, const RedistributePlanner& planner,
             const CostModel& model)
      : inputs_(inputs),
        ctx_(ctx),
        planner_(planner),
        model_(model),
        memo_(inputs.size()) {}

  std::shared_ptr<const RedistributePlan> For(size_t i,
                                              const Sharding& target) {
    auto [it, inserted] = memo_[i].try_emplace(target, nullptr);
    if (inserted) {
      const DTensorSpec& spec = *inputs_[i];
      absl::StatusOr<std::shared_ptr<const RedistributePlan>> plan =
          planner_.Plan(spec.sharding(), target, ctx_.mesh_shape, spec.shape(),
                        spec.dtype(), model_);
      if (plan.ok()) it->second = *std::move(plan);
    }
    return it->second;
  }

 private:
  absl::Span<const DTensorSpec* const> inputs_;
  const StrategyContext& ctx_;
  const RedistributePlanner& planner_;
  const CostModel& model_;
  std::vector<
      absl::flat_hash_map<Sharding, std::shared_ptr<const RedistributePlan>>>
      memo_;
};

// The score of strategy `s` (its input redistributions and kernel
// collectives), or nullopt when the inputs cannot reach it or it puts a
// Partial on a dtype that cannot hold one.
std::optional<Score> ScoreStrategy(const OpStrategy& s,
                                   const StrategyContext& ctx,
                                   InputPlans& plans, const CostModel& model) {
  for (size_t j = 0; j < ctx.outputs.size(); ++j) {
    if (!PartialsAllowed(s.outputs[j], ctx.outputs[j].dtype)) {
      return std::nullopt;
    }
  }
  Score score;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const DTensorSpec* input = ctx.inputs[i];
    if (input == nullptr || s.inputs[i] == input->sharding()) continue;
    if (!Reachable(input->sharding(), s.inputs[i]) ||
        !PartialsAllowed(s.inputs[i], input->dtype())) {
      return std::nullopt;
    }
    const std::shared_ptr<const RedistributePlan> plan =
        plans.For(i, s.inputs[i]);
    if (plan == nullptr) return std::nullopt;
    score.cost_us += plan->total_cost_us;
    score.changed_inputs += 1;
    score.steps += static_cast<int64_t>(plan->steps.size());
  }
  for (const KernelComm& comm : s.kernel_comms) {
    score.cost_us += model.StepCostUs(comm.kind, comm.mesh_dims, ctx.mesh_shape,
                                      comm.local_bytes);
  }
  return score;
}

absl::Status NoReachableStrategyError(
    const OpDef& op, absl::Span<const DTensorSpec* const> inputs,
    size_t num_strategies) {
  std::vector<std::string> layouts;
  for (const DTensorSpec* in : inputs) {
    layouts.push_back(in == nullptr ? "-" : in->sharding().ToString());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op.name, ": none of its ", num_strategies,
                   " strategies can be reached from input layouts [",
                   absl::StrJoin(layouts, "] ["), "]"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Propagation>> Propagate(
    const OpDef& op, absl::Span<const DTensorSpec* const> given,
    const OpArgs& args, const Runtime& runtime,
    absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners) {
  DT_ASSIGN_OR_RETURN(std::vector<const DTensorSpec*> inputs,
                      PadInputs(op, given));
  DT_ASSIGN_OR_RETURN(const DeviceMesh* mesh, CommonMesh(op, inputs));
  DT_RETURN_IF_ERROR(CheckOpArgs(op.name, op.args, args));
  DT_ASSIGN_OR_RETURN(std::vector<TensorMeta> outputs, op.infer(inputs, args));
  if (outputs.size() != static_cast<size_t>(op.num_outputs)) {
    return absl::InternalError(absl::StrCat(op.name, " inferred ",
                                            outputs.size(), " outputs, not ",
                                            op.num_outputs));
  }
  const StrategyContext ctx{inputs, args, outputs, *mesh, mesh->shape()};
  DT_ASSIGN_OR_RETURN(std::vector<OpStrategy> strategies, op.strategies(ctx));

  const CostModel model = runtime.CostModelFor(*mesh);
  InputPlans plans(inputs, ctx, runtime.planner(), model);
  int64_t best = -1;
  int64_t num_valid = 0;
  Score best_score;
  for (size_t k = 0; k < strategies.size(); ++k) {
    DT_RETURN_IF_ERROR(CheckStrategyShape(op, strategies[k], ctx));
    const std::optional<Score> score =
        ScoreStrategy(strategies[k], ctx, plans, model);
    if (!score.has_value()) continue;
    ++num_valid;
    if (best < 0 || score->BetterThan(best_score)) {
      best = static_cast<int64_t>(k);
      best_score = *score;
    }
  }
  if (best < 0) {
    return NoReachableStrategyError(op, inputs, strategies.size());
  }
  OpStrategy& chosen = strategies[best];
  std::vector<std::shared_ptr<const RedistributePlan>> chosen_plans(
      inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr && chosen.inputs[i] != inputs[i]->sharding()) {
      chosen_plans[i] = plans.For(i, chosen.inputs[i]);
    }
  }
  return Build(op, ctx, owners, std::move(chosen), std::move(chosen_plans),
               model, static_cast<int64_t>(strategies.size()), num_valid);
}

}  // namespace dtensor
