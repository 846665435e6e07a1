#include "dtensor/ops/propagation.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/sharding_override.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/redistribute/planner.h"

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
  // Copies of a mesh share their rank list: compared by address first.
  return &a == &b ||
         ((&a.rank_list() == &b.rank_list() ||
           a.rank_list() == b.rank_list()) &&
          a.dim_names() == b.dim_names() && a.layout() == b.layout());
}

namespace {

// The planner's rule for Partial targets: from Replicate or the same Partial.
bool Reachable(const Sharding& from, const Sharding& to) {
  for (int64_t m = 0; m < to.mesh_ndim(); ++m) {
    const Placement& dst = to.placement(m);
    const Placement& src = from.placement(m);
    if (dst.is_partial() && src != dst && !src.is_replicate()) return false;
  }
  return true;
}

// Whether a sharding fits a tensor of `rank` on a mesh of `mesh_ndim` dims.
bool Fits(const Sharding& s, int64_t mesh_ndim, int64_t rank) {
  return s.mesh_ndim() == mesh_ndim && s.tensor_rank() == rank;
}

// How good a strategy is; smaller is better. `cost_us` is what the call
// spends (redistributions and the kernel's collectives); `completion_us` what
// reading its outputs whole would add on the mesh dims where it redistributes
// an input with a collective, and reading its Partial outputs where every
// input is Replicate (docs/ops.md, "The cost rule").
struct Score {
  double cost_us = 0;
  // Reading the Partial outputs whole on rule (a)'s and (b)'s mesh dims.
  double completion_us = 0;
  // That, plus gathering the Shard outputs on rule (a)'s dims: what the
  // scores compare when some strategy of the call is charged for a Partial
  // under rule (a), so that its rivals' outputs are read whole too.
  double whole_completion_us = 0;
  // Whether rule (a) charged a Partial output of this strategy.
  bool charged_partial = false;
  // Whether to compare whole_completion_us (set for every score of a call).
  bool like_with_like = false;
  int partial_outputs = 0;
  int changed_inputs = 0;
  int64_t steps = 0;

  double total_us() const {
    return cost_us + (like_with_like ? whole_completion_us : completion_us);
  }

  bool BetterThan(const Score& other) const {
    const double a = total_us();
    const double b = other.total_us();
    const double tolerance =
        1e-9 * std::max(1.0, std::max(std::abs(a), std::abs(b)));
    if (a < b - tolerance) return true;
    if (a > b + tolerance) return false;
    // Equal when read whole: the one that spends less now, since its
    // completion may never be paid (a linear consumer reads a P(sum) as it
    // is): all-reducing one factor of a P(sum) product rather than both.
    if (like_with_like && cost_us < other.cost_us - tolerance) return true;
    if (like_with_like && cost_us > other.cost_us + tolerance) return false;
    if (partial_outputs != other.partial_outputs) {
      return partial_outputs < other.partial_outputs;
    }
    if (changed_inputs != other.changed_inputs) {
      return changed_inputs < other.changed_inputs;
    }
    return steps < other.steps;
  }
};

// The mesh dims (a bit each) on which `plan` runs a collective. Local steps
// do not count: slicing a value into shards or handing the op a Partial term
// (P(sum) + R -> P(sum)) spends nothing. Where some input is already Shard or
// Partial, a Partial output follows from the caller's shardings (a
// data-parallel weight gradient stays one all-reduce); where none is,
// MeshDimsAllReplicate charges it.
uint64_t MeshDimsRedistributed(const RedistributePlan& plan) {
  uint64_t dims = 0;
  for (const RedistributeStep& step : plan.steps) {
    if (step.kind == CommKind::kLocal) continue;
    for (int64_t m : step.mesh_dims) dims |= uint64_t{1} << m;
  }
  return dims;
}

// The mesh dims (a bit each) on which every given input is Replicate. A
// Partial output there is not implied by the caller's shardings: only a
// strategy that slices the replicated inputs makes it, for free, and reading
// it costs a collective that the complete alternative never needs (loss
// parallel's summed loss over rows replicated on dp).
uint64_t MeshDimsAllReplicate(absl::Span<const DTensorSpec* const> inputs,
                              int64_t mesh_ndim) {
  uint64_t dims = 0;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const bool replicate = absl::c_all_of(inputs, [m](const DTensorSpec* in) {
      return in == nullptr || in->sharding().placement(m).is_replicate();
    });
    if (replicate) dims |= uint64_t{1} << m;
  }
  return dims;
}

// `s` with its Partial mesh dims among `partial_dims` and its Shard mesh
// dims among `shard_dims` (a bit each) made Replicate; `s` itself when there
// are none.
Sharding CompletedOn(const Sharding& s, uint64_t partial_dims,
                     uint64_t shard_dims = 0) {
  std::vector<int64_t> incomplete;
  for (int64_t m = 0; m < s.mesh_ndim(); ++m) {
    const Placement& p = s.placement(m);
    if ((p.is_partial() && (partial_dims >> m & 1) != 0) ||
        (p.is_shard() && (shard_dims >> m & 1) != 0)) {
      incomplete.push_back(m);
    }
  }
  return incomplete.empty() ? s : s.WithReplicated(incomplete);
}

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
        // Costed, but no data of it moves (OpDef::spec_only_inputs).
        if (absl::c_linear_search(op.spec_only_inputs, static_cast<int>(i))) {
          in.plan = nullptr;
        }
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
    CommCounter::Event event = CommCounter::Estimated(
        model, comm.kind, comm.mesh_dims, ctx.mesh_shape, comm.local_bytes,
        absl::StrCat(op.name, " kernel"));
    result->cost_us += event.estimated_us;
    result->kernel_events.push_back(std::move(event));
  }
  result->strategy = std::move(strategy);
  return std::shared_ptr<const Propagation>(std::move(result));
}

// The planner's cost of completing an output laid out as `partial` (to
// `complete`); 0 where it finds no plan (then nothing can complete it).
double CompletionCostUs(const Sharding& partial, const Sharding& complete,
                        const TensorMeta& meta, const StrategyContext& ctx,
                        const CostModel& model,
                        const RedistributePlanner& planner) {
  absl::StatusOr<std::shared_ptr<const RedistributePlan>> plan = planner.Plan(
      partial, complete, ctx.mesh_shape, meta.shape, meta.dtype, model);
  return plan.ok() ? (*plan)->total_cost_us : 0;
}

// The outputs `op` infers for `inputs` and `args`, after checking `args`
// against its schema. Errors: the schema's, the op's, a wrong output count.
absl::StatusOr<std::vector<TensorMeta>> InferOutputs(
    const OpDef& op, absl::Span<const DTensorSpec* const> inputs,
    const OpArgs& args) {
  DT_RETURN_IF_ERROR(CheckOpArgs(op.name, op.args, args));
  DT_ASSIGN_OR_RETURN(std::vector<TensorMeta> outputs, op.infer(inputs, args));
  if (outputs.size() != static_cast<size_t>(op.num_outputs)) {
    return absl::InternalError(absl::StrCat(op.name, " inferred ",
                                            outputs.size(), " outputs, not ",
                                            op.num_outputs));
  }
  return outputs;
}

// Scores the strategies of one call (see "The cost rule" in docs/ops.md),
// planning each input's redistribution to a target sharding once however many
// strategies share it.
class StrategyScorer {
 public:
  StrategyScorer(const OpDef& op, const StrategyContext& ctx,
                 const Runtime& runtime)
      : op_(op),
        ctx_(ctx),
        model_(runtime.CostModelFor(ctx.mesh)),
        planner_(runtime.planner()),
        memo_(ctx.inputs.size()),
        // Partial outputs on these mesh dims are charged whatever the
        // strategy does to the inputs there (MeshDimsAllReplicate).
        all_replicate_(MeshDimsAllReplicate(
            ctx.inputs, static_cast<int64_t>(ctx.mesh_shape.size()))) {}

  const CostModel& model() const { return model_; }

  // The plan of input i to `target` (null: unreachable), memoized.
  std::shared_ptr<const RedistributePlan> PlanFor(size_t i,
                                                  const Sharding& target) {
    auto [it, inserted] = memo_[i].try_emplace(target, nullptr);
    if (inserted) {
      const DTensorSpec& spec = *ctx_.inputs[i];
      absl::StatusOr<std::shared_ptr<const RedistributePlan>> plan =
          planner_.Plan(spec.sharding(), target, ctx_.mesh_shape, spec.shape(),
                        spec.dtype(), model_);
      if (plan.ok()) it->second = *std::move(plan);
    }
    return it->second;
  }

  // The score of `s`; nullopt when it is invalid (an unreachable input
  // sharding, a Partial a dtype cannot reduce).
  std::optional<Score> ScoreOf(const OpStrategy& s) {
    for (size_t j = 0; j < ctx_.outputs.size(); ++j) {
      if (!PartialsAllowed(s.outputs[j], ctx_.outputs[j].dtype)) {
        return std::nullopt;
      }
    }
    Score score;
    // Rule (a)'s mesh dims: an input is redistributed there with a
    // collective.
    uint64_t redistributed = 0;
    for (size_t i = 0; i < ctx_.inputs.size(); ++i) {
      const DTensorSpec* input = ctx_.inputs[i];
      if (input == nullptr || s.inputs[i] == input->sharding()) continue;
      if (!Reachable(input->sharding(), s.inputs[i]) ||
          !PartialsAllowed(s.inputs[i], input->dtype())) {
        return std::nullopt;
      }
      const std::shared_ptr<const RedistributePlan> plan =
          PlanFor(i, s.inputs[i]);
      if (plan == nullptr) return std::nullopt;
      score.cost_us += plan->total_cost_us;
      score.changed_inputs += 1;
      score.steps += static_cast<int64_t>(plan->steps.size());
      redistributed |= MeshDimsRedistributed(*plan);
    }
    for (const KernelComm& comm : s.kernel_comms) {
      score.cost_us += model_.StepCostUs(comm.kind, comm.mesh_dims,
                                         ctx_.mesh_shape, comm.local_bytes);
    }
    AddCompletions(s, redistributed, score);
    return score;
  }

 private:
  // Counts s's Partial outputs and charges reading them (outputs kept only
  // for the backward excepted): their completion on the `redistributed`
  // and all-Replicate mesh dims, and, for like-with-like comparisons, the
  // gather of the Shard outputs on the `redistributed` ones too (a P(sum)
  // product is not charged an all-reduce that an S(1) one is spared a
  // gather for).
  void AddCompletions(const OpStrategy& s, uint64_t redistributed,
                      Score& score) const {
    const size_t read_outputs = ctx_.outputs.size() - op_.num_saved_outputs;
    for (size_t j = 0; j < read_outputs; ++j) {
      const Sharding& out = s.outputs[j];
      score.partial_outputs += CompletedOn(out, ~uint64_t{0}) != out;
      score.charged_partial |= CompletedOn(out, redistributed) != out;
      const Sharding complete =
          CompletedOn(out, redistributed | all_replicate_);
      const double partial_us =
          complete == out ? 0
                          : CompletionCostUs(out, complete, ctx_.outputs[j],
                                             ctx_, model_, planner_);
      score.completion_us += partial_us;
      const Sharding whole =
          CompletedOn(out, redistributed | all_replicate_, redistributed);
      score.whole_completion_us +=
          whole == complete ? partial_us
                            : CompletionCostUs(out, whole, ctx_.outputs[j],
                                               ctx_, model_, planner_);
    }
  }

  const OpDef& op_;
  const StrategyContext& ctx_;
  const CostModel model_;
  const RedistributePlanner& planner_;
  std::vector<
      absl::flat_hash_map<Sharding, std::shared_ptr<const RedistributePlan>>>
      memo_;
  const uint64_t all_replicate_;
};

absl::Status NoReachableStrategy(const OpDef& op,
                                 absl::Span<const DTensorSpec* const> inputs,
                                 size_t num_strategies) {
  std::vector<std::string> shardings;
  for (const DTensorSpec* in : inputs) {
    shardings.push_back(in == nullptr ? "-" : in->sharding().ToString());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op.name, ": none of its ", num_strategies,
                   " strategies can be reached from input layouts [",
                   absl::StrJoin(shardings, "] ["), "]"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Propagation>> Propagate(
    const OpDef& op, absl::Span<const DTensorSpec* const> given,
    const OpArgs& args, const Runtime& runtime,
    absl::Span<const std::shared_ptr<const DTensorSpec>* const> owners) {
  DT_ASSIGN_OR_RETURN(std::vector<const DTensorSpec*> inputs,
                      PadInputs(op, given));
  DT_ASSIGN_OR_RETURN(const DeviceMesh* mesh, CommonMesh(op, inputs));
  DT_ASSIGN_OR_RETURN(std::vector<TensorMeta> outputs,
                      InferOutputs(op, inputs, args));
  const StrategyContext ctx{inputs, args, outputs, *mesh, mesh->shape()};
  DT_ASSIGN_OR_RETURN(std::vector<OpStrategy> strategies,
                      StrategiesOf(op, ctx));
  StrategyScorer scorer(op, ctx, runtime);
  std::vector<std::optional<Score>> scores;
  bool like_with_like = false;
  for (size_t k = 0; k < strategies.size(); ++k) {
    DT_RETURN_IF_ERROR(CheckStrategyShape(op, strategies[k], ctx));
    scores.push_back(scorer.ScoreOf(strategies[k]));
    like_with_like |=
        scores.back().has_value() && scores.back()->charged_partial;
  }
  int64_t best = -1;
  int64_t num_valid = 0;
  Score best_score;
  for (size_t k = 0; k < scores.size(); ++k) {
    if (!scores[k].has_value()) continue;
    ++num_valid;
    scores[k]->like_with_like = like_with_like;
    if (best < 0 || scores[k]->BetterThan(best_score)) {
      best = static_cast<int64_t>(k);
      best_score = *scores[k];
    }
  }
  if (best < 0) return NoReachableStrategy(op, inputs, strategies.size());
  OpStrategy& chosen = strategies[best];
  std::vector<std::shared_ptr<const RedistributePlan>> plans(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr && chosen.inputs[i] != inputs[i]->sharding()) {
      plans[i] = scorer.PlanFor(i, chosen.inputs[i]);
    }
  }
  return Build(op, ctx, owners, std::move(chosen), std::move(plans),
               scorer.model(), static_cast<int64_t>(strategies.size()),
               num_valid);
}

}  // namespace dtensor
