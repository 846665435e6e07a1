#include "dtensor/parallel/fsdp.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/work.h"
#include "dtensor/comm_counter.h"
#include "dtensor/comm_owner.h"
#include "dtensor/dtensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/checkpoint.h"
#include "dtensor/nn/function.h"
#include "dtensor/ops/cast_ops.h"
#include "dtensor/parallel/flat_buffer.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/shard_geometry.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace parallel {
namespace {

// The backward of a group's gather: each gathered parameter's gradient as
// it is, typically Partial on dp (the sharding propagation gave it). The
// sharded parameter is a source of the tape, which reduce-scatters it as
// soon as it is final, or hands it to GradientBuckets, which reduce-scatters
// a bucket of them with one asynchronous collective.
absl::StatusOr<std::vector<DTensor>> GatherBackward(const BackwardCall& call) {
  std::vector<DTensor> grads(call.grad_outputs.begin(),
                             call.grad_outputs.end());
  // Mixed precision gathered a cast: the gradient goes back to the master's
  // dtype (a widening cast keeps it Partial, so no reduction happens here).
  for (size_t k = 0; k < grads.size(); ++k) {
    if (grads[k].defined() && grads[k].dtype() != call.inputs[k].dtype()) {
      DT_ASSIGN_OR_RETURN(grads[k], ops::To(grads[k], call.inputs[k].dtype()));
    }
  }
  return grads;
}

const nn::Function& GatherFunction() {
  static const nn::Function function{"fsdp_all_gather", GatherBackward,
                                     /*backward_reads_specs_only=*/true};
  return function;
}

// One flat all-gather over the dp mesh dim of parameters of one dtype: each
// rank's blocks back to back in one buffer, the ranks' buffers (of uneven
// sizes where the blocks are) concatenated by one collective, then each
// parameter's gathered block copied out of it.
class FlatGather {
 public:
  // Starts the gather of `sharded` (one dtype; each sharded on `dp` as the
  // innermost split of dim 0). Errors: a sharding where the dp blocks do not
  // tile the gathered block along dim 0, the collective's start.
  static absl::StatusOr<std::unique_ptr<FlatGather>> Start(
      std::vector<DTensor> sharded, int64_t dp, absl::string_view label);

  // Waits for the collective; the gathered parameters (Replicate on dp), in
  // the order given to Start. Errors: the collective's, naming the label.
  absl::StatusOr<std::vector<DTensor>> Finish();
  // Waits for the collective and drops its result.
  void Drop();

  // A collective in flight owns its buffers until it ends.
  ~FlatGather() { Drop(); }
  FlatGather(const FlatGather&) = delete;
  FlatGather& operator=(const FlatGather&) = delete;

 private:
  FlatGather() = default;
  absl::Status Plan(int64_t dp);
  void Count(int64_t dp) const;
  absl::Status Launch(int64_t dp);

  std::string label_;
  std::vector<DTensor> sharded_;
  // Per parameter: the gathered spec, the shape of this rank's block of it,
  // and the rows of that block each dp coordinate holds.
  std::vector<std::shared_ptr<const DTensorSpec>> specs_;
  std::vector<std::vector<int64_t>> gathered_shapes_;
  std::vector<RowChunks> rows_;
  // Per parameter, the elements of one row of its block.
  std::vector<int64_t> row_elements_;
  // This rank's elements and dp coordinate.
  int64_t my_size_ = 0;
  int64_t me_ = 0;
  Tensor input_;
  Tensor output_;
  std::shared_ptr<Work> work_;
};

absl::StatusOr<std::unique_ptr<FlatGather>> FlatGather::Start(
    std::vector<DTensor> sharded, int64_t dp, absl::string_view label) {
  std::unique_ptr<FlatGather> gather(new FlatGather());
  gather->label_ = std::string(label);
  gather->sharded_ = std::move(sharded);
  DT_RETURN_IF_ERROR(gather->Plan(dp));
  gather->Count(dp);
  if (!gather->sharded_.front().runtime()->metadata_only()) {
    DT_RETURN_IF_ERROR(gather->Launch(dp));
  }
  return gather;
}

// Elements in one row (dim-0 slice) of `block`.
int64_t RowElements(const ShardBlock& block) {
  return block.shape[0] == 0 ? 0 : block.numel() / block.shape[0];
}

absl::Status FlatGather::Plan(int64_t dp) {
  const DTensor& first = sharded_.front();
  const DeviceMesh& mesh = first.mesh();
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> coord,
                      mesh.CoordinateOf(first.runtime()->rank()));
  me_ = coord[dp];
  my_size_ = 0;
  for (const DTensor& param : sharded_) {
    absl::StatusOr<InnermostRowSplit> split = InnermostRowSplitAt(
        param.sharding(), mesh.shape(), param.shape(), coord, dp);
    if (!split.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label_, ": ", split.status().message()));
    }
    const int64_t row = RowElements(split->whole);
    my_size_ += split->rows.of(me_).size * row;
    row_elements_.push_back(row);
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(mesh, param.sharding().WithReplicated({dp}),
                            param.shape(), param.dtype()));
    specs_.push_back(std::make_shared<const DTensorSpec>(std::move(spec)));
    gathered_shapes_.push_back(std::move(split->whole.shape));
    rows_.push_back(split->rows);
  }
  return absl::OkStatus();
}

void FlatGather::Count(int64_t dp) const {
  const DTensor& first = sharded_.front();
  CommCounter::RecordOnThread(CommCounter::Estimated(
      first.runtime()->CostModelFor(first.mesh()), CommKind::kAllGather, {dp},
      first.mesh().shape(),
      static_cast<double>(my_size_ * ElementSize(first.dtype())), label_));
}

absl::Status FlatGather::Launch(int64_t dp) {
  const DTensor& first = sharded_.front();
  const Device device = first.ToLocal().device();
  // Elements per dp rank (O(dp), only for a collective that runs).
  std::vector<int64_t> sizes(first.mesh().shape()[dp], 0);
  for (size_t p = 0; p < rows_.size(); ++p) {
    for (size_t r = 0; r < sizes.size(); ++r) {
      sizes[r] += rows_[p].of(static_cast<int64_t>(r)).size * row_elements_[p];
    }
  }
  int64_t total = 0;
  for (int64_t size : sizes) total += size;
  DT_ASSIGN_OR_RETURN(input_, Tensor::Empty({my_size_}, first.dtype(), device));
  DT_ASSIGN_OR_RETURN(output_, Tensor::Empty({total}, first.dtype(), device));
  std::vector<Tensor> locals;
  for (const DTensor& param : sharded_) locals.push_back(param.ToLocal());
  DT_RETURN_IF_ERROR(PackInOrder(locals, input_));
  DT_ASSIGN_OR_RETURN(
      std::shared_ptr<Communicator> comm,
      first.runtime()->groups()->ForMeshDims(first.mesh(), {dp}));
  work_ = comm->AllGatherAsync(input_, output_, 0, sizes);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DTensor>> FlatGather::Finish() {
  std::vector<DTensor> gathered;
  const std::shared_ptr<Runtime>& runtime = sharded_.front().runtime();
  if (work_ == nullptr) {  // metadata-only
    for (const auto& spec : specs_) {
      gathered.push_back(DTensor::WrapUnchecked(runtime, spec, Tensor()));
    }
    return gathered;
  }
  const absl::Status done = std::exchange(work_, nullptr)->Wait();
  input_ = Tensor();
  if (!done.ok()) {
    return absl::Status(done.code(),
                        absl::StrCat(label_, ": ", done.message()));
  }
  // The ranks' buffers, concatenated: each holds its rows of every
  // parameter, in order.
  std::vector<Tensor> locals;
  for (size_t p = 0; p < sharded_.size(); ++p) {
    DT_ASSIGN_OR_RETURN(Tensor local,
                        Tensor::Empty(gathered_shapes_[p], sharded_[p].dtype(),
                                      output_.device()));
    locals.push_back(std::move(local));
  }
  std::vector<std::vector<ChunkRange>> rows;
  for (const RowChunks& chunks : rows_) rows.push_back(chunks.All());
  DT_RETURN_IF_ERROR(UnpackRowsByRank(output_, rows, locals));
  output_ = Tensor();
  for (size_t p = 0; p < sharded_.size(); ++p) {
    gathered.push_back(
        DTensor::WrapUnchecked(runtime, specs_[p], std::move(locals[p])));
  }
  return gathered;
}

void FlatGather::Drop() {
  if (work_ != nullptr) std::exchange(work_, nullptr)->Wait().IgnoreError();
  input_ = Tensor();
  output_ = Tensor();
}

class Schedule;

// A parameter slot that a group gathers.
struct ParamSlot {
  nn::Module* module;
  size_t index;
};

// One group's state: its parameter slots, a gather in flight (prefetched
// or started on demand), the sharded parameters while its forward runs, and
// the parameters rebuilt for backward not yet handed to the tape.
class GroupState {
 public:
  GroupState(FsdpGroup group, std::vector<ParamSlot> params, Schedule* schedule,
             size_t index)
      : group_(std::move(group)),
        params_(std::move(params)),
        schedule_(schedule),
        index_(index) {}

  nn::Module* module() const { return group_.module; }

  // Starts the group's gathers unless they are in flight.
  absl::Status StartGather();
  // Waits for and drops a gather in flight (its data may be stale).
  void DropPending();
  // The input hook: gathers (or takes the prefetched gather), prefetches the
  // next group, records the gather, and puts the gathered copies in the
  // slots.
  absl::Status Enter();
  // Enter in a checkpointed module's recompute (nn::IsRecomputing): the
  // gather is backward's for the group (taking one prefetched), with no
  // prefetch, and the recompute's tape keeps the copies until it has taken
  // its gradients.
  absl::Status EnterRecompute();
  // The exit hook: the slots get their sharded parameters back.
  void Exit();
  // For the tape: parameter k gathered again (the whole group gathered on
  // the first call of a pass; the previous group prefetched).
  absl::StatusOr<DTensor> Rebuild(size_t k);
  // Frees the parameters rebuilt but not yet taken.
  void ReleaseRebuilt() { rebuilt_.clear(); }
  // Whether parameters rebuilt for this backward are not yet taken: the
  // group needs no gather before they are.
  bool HoldsRebuilt() const {
    return std::any_of(rebuilt_.begin(), rebuilt_.end(),
                       [](const DTensor& x) { return x.defined(); });
  }

 private:
  const FsdpOptions& options() const;
  std::vector<DTensor> Sharded() const;
  // `sharded` cast to options().param_dtype where set (floating ones).
  absl::StatusOr<std::vector<DTensor>> InParamDType(
      std::vector<DTensor> sharded) const;
  // Records the gather of `sharded` (giving `gathered`) on the tapes.
  void RecordGather(const std::vector<DTensor>& sharded,
                    const std::vector<DTensor>& gathered);
  // Puts `gathered` in the slots until Exit.
  void Install(const std::vector<DTensor>& sharded,
               std::vector<DTensor> gathered);
  absl::StatusOr<std::vector<DTensor>> TakeGathered();

  FsdpGroup group_;
  std::vector<ParamSlot> params_;
  Schedule* schedule_;
  size_t index_;
  // In flight: one gather per dtype, and each parameter's (gather, position).
  std::vector<std::unique_ptr<FlatGather>> pending_;
  std::vector<std::pair<size_t, size_t>> pending_place_;
  std::vector<DTensor> saved_sharded_;
  std::vector<DTensor> rebuilt_;
};

// The groups, the phase of the step and the order the groups ran in, shared
// by the hooks and by the tapes' rebuild functions. Prefetch follows the
// order observed, not the modules': forward prefetches the group that came
// next in the previous forward (none in the first), backward the group that
// came before in this step's forward.
class Schedule : public std::enable_shared_from_this<Schedule> {
 public:
  enum class Phase { kForward, kBackward };

  explicit Schedule(const FsdpOptions& options) : options_(options) {}

  void Add(FsdpGroup group, std::vector<ParamSlot> params) {
    groups_.push_back(std::make_unique<GroupState>(
        std::move(group), std::move(params), this, groups_.size()));
  }
  GroupState& group(size_t index) { return *groups_[index]; }
  size_t size() const { return groups_.size(); }
  const FsdpOptions& options() const { return options_; }

  // Entering the other phase drops every gather in flight: a prefetch that
  // no group took belongs to the step that ended. A new forward keeps the
  // order of the last one.
  void EnterPhase(Phase phase) {
    if (phase == phase_) return;
    phase_ = phase;
    for (auto& group : groups_) {
      group->DropPending();
      group->ReleaseRebuilt();
    }
    if (phase == Phase::kForward) last_order_ = std::exchange(order_, {});
  }
  // Group `index` runs its forward now. A group that already ran in this
  // forward starts the next one (forwards without a backward between, as in
  // evaluation): the order restarts and gathers in flight are dropped, as
  // the parameters may have changed since. (A group called twice in one
  // forward, as tied weights are, costs a prefetch, never a wrong value.)
  void Entered(size_t index) {
    if (std::find(order_.begin(), order_.end(), index) != order_.end()) {
      for (auto& group : groups_) group->DropPending();
      last_order_ = std::exchange(order_, {});
    }
    order_.push_back(index);
  }
  // The group after `index`'s first run in the last forward, and the one
  // before its last run in this forward; nullopt where none.
  std::optional<size_t> NextInForward(size_t index) const {
    auto it = std::find(last_order_.begin(), last_order_.end(), index);
    if (it == last_order_.end() || ++it == last_order_.end()) {
      return std::nullopt;
    }
    return *it;
  }
  std::optional<size_t> PreviousInForward(size_t index) const {
    auto it = std::find(order_.rbegin(), order_.rend(), index);
    if (it == order_.rend() || ++it == order_.rend()) return std::nullopt;
    return *it;
  }
  // Starts group `index`'s gather ahead of its use, under its module's
  // name in the counters. No-op for none, without prefetch, or for a group
  // that still holds parameters rebuilt for this backward (an enclosing
  // group of nested ones).
  absl::Status Prefetch(std::optional<size_t> index) {
    if (!options_.prefetch || !index.has_value() ||
        groups_[*index]->HoldsRebuilt()) {
      return absl::OkStatus();
    }
    GroupState& next = *groups_[*index];
    CommOwner::Scope owner(next.module());
    return next.StartGather();
  }

 private:
  FsdpOptions options_;
  std::vector<std::unique_ptr<GroupState>> groups_;
  Phase phase_ = Phase::kForward;
  // Group indices in the order their forwards ran: this step's, the last.
  std::vector<size_t> order_;
  std::vector<size_t> last_order_;
};

const FsdpOptions& GroupState::options() const { return schedule_->options(); }

absl::StatusOr<std::vector<DTensor>> GroupState::InParamDType(
    std::vector<DTensor> sharded) const {
  const std::optional<DType> dtype = options().param_dtype;
  if (!dtype.has_value()) return sharded;
  for (DTensor& param : sharded) {
    if (IsFloatingPoint(param.dtype()) && param.dtype() != *dtype) {
      DT_ASSIGN_OR_RETURN(param, ops::To(param, *dtype));
    }
  }
  return sharded;
}

std::vector<DTensor> GroupState::Sharded() const {
  std::vector<DTensor> sharded;
  for (const ParamSlot& slot : params_) {
    sharded.push_back(slot.module->slots()[slot.index].value);
  }
  return sharded;
}

absl::Status GroupState::StartGather() {
  if (!pending_.empty() || params_.empty()) return absl::OkStatus();
  std::vector<DTensor> sharded;
  {
    // Under mixed precision the casts only feed the collective: Enter
    // records the gather from the masters.
    nn::NoGrad not_recorded;
    DT_ASSIGN_OR_RETURN(sharded, InParamDType(Sharded()));
  }
  absl::flat_hash_map<DType, size_t> gather_of;
  std::vector<std::vector<DTensor>> by_dtype;
  pending_place_.clear();
  for (const DTensor& param : sharded) {
    auto [it, added] = gather_of.try_emplace(param.dtype(), by_dtype.size());
    if (added) by_dtype.emplace_back();
    pending_place_.emplace_back(it->second, by_dtype[it->second].size());
    by_dtype[it->second].push_back(param);
  }
  for (std::vector<DTensor>& params : by_dtype) {
    const std::string label = absl::StrCat(
        "fsdp all_gather of ", group_.name, " (", params.size(), " ",
        std::string(DTypeName(params.front().dtype())), " parameters)");
    absl::StatusOr<std::unique_ptr<FlatGather>> gather =
        FlatGather::Start(std::move(params), options().dp_dim, label);
    if (!gather.ok()) {
      DropPending();
      return gather.status();
    }
    pending_.push_back(*std::move(gather));
  }
  return absl::OkStatus();
}

void GroupState::DropPending() { pending_.clear(); }

absl::StatusOr<std::vector<DTensor>> GroupState::TakeGathered() {
  DT_RETURN_IF_ERROR(StartGather());
  std::vector<std::unique_ptr<FlatGather>> gathers = std::move(pending_);
  pending_.clear();
  // Every gather is finished before the first error returns.
  std::vector<std::vector<DTensor>> by_dtype;
  absl::Status status;
  for (auto& gather : gathers) {
    absl::StatusOr<std::vector<DTensor>> gathered = gather->Finish();
    status.Update(gathered.status());
    by_dtype.push_back(gathered.ok() ? *std::move(gathered)
                                     : std::vector<DTensor>());
  }
  DT_RETURN_IF_ERROR(status);
  std::vector<DTensor> gathered;
  for (const auto& [g, position] : pending_place_) {
    gathered.push_back(std::move(by_dtype[g][position]));
  }
  return gathered;
}

absl::Status GroupState::Enter() {
  if (nn::IsRecomputing()) return EnterRecompute();
  schedule_->EnterPhase(Schedule::Phase::kForward);
  schedule_->Entered(index_);
  const std::vector<DTensor> sharded = Sharded();
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> gathered, TakeGathered());
  DT_RETURN_IF_ERROR(schedule_->Prefetch(schedule_->NextInForward(index_)));
  RecordGather(sharded, gathered);
  std::shared_ptr<Schedule> schedule = schedule_->shared_from_this();
  for (size_t k = 0; k < gathered.size(); ++k) {
    auto rebuild = [schedule, index = index_, k]() {
      return schedule->group(index).Rebuild(k);
    };
    DT_RETURN_IF_ERROR(nn::GradientTape::RecomputeInBackward(
        gathered[k], sharded[k], std::move(rebuild), this));
  }
  Install(sharded, std::move(gathered));
  return absl::OkStatus();
}

absl::Status GroupState::EnterRecompute() {
  schedule_->EnterPhase(Schedule::Phase::kBackward);
  const std::vector<DTensor> sharded = Sharded();
  DT_ASSIGN_OR_RETURN(std::vector<DTensor> gathered, TakeGathered());
  RecordGather(sharded, gathered);
  Install(sharded, std::move(gathered));
  return absl::OkStatus();
}

void GroupState::RecordGather(const std::vector<DTensor>& sharded,
                              const std::vector<DTensor>& gathered) {
  std::vector<const DTensor*> inputs;
  for (const DTensor& param : sharded) inputs.push_back(&param);
  nn::GradientTape::RecordFunction(GatherFunction(), inputs, OpArgs(),
                                   gathered);
}

void GroupState::Install(const std::vector<DTensor>& sharded,
                         std::vector<DTensor> gathered) {
  saved_sharded_ = sharded;
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k].module->slots()[params_[k].index].value = std::move(gathered[k]);
  }
}

void GroupState::Exit() {
  for (size_t k = 0; k < saved_sharded_.size(); ++k) {
    params_[k].module->slots()[params_[k].index].value =
        std::move(saved_sharded_[k]);
  }
  saved_sharded_.clear();
}

absl::StatusOr<DTensor> GroupState::Rebuild(size_t k) {
  schedule_->EnterPhase(Schedule::Phase::kBackward);
  // Each parameter is handed to the tape once (it shares it between the
  // records that hold it); asked again (a redistribution of it recorded in
  // forward), the group is gathered again.
  if (k >= rebuilt_.size() || !rebuilt_[k].defined()) {
    {
      CommOwner::Scope owner(group_.module);
      DT_ASSIGN_OR_RETURN(rebuilt_, TakeGathered());
    }
    DT_RETURN_IF_ERROR(
        schedule_->Prefetch(schedule_->PreviousInForward(index_)));
  }
  return std::exchange(rebuilt_[k], DTensor());
}

// The slots of `members` that hold parameters sharded on mesh dim `dp`.
// Errors: a parameter whose mesh has no dim `dp`.
absl::StatusOr<std::vector<ParamSlot>> DpShardedSlots(const FsdpGroup& group,
                                                      int64_t dp) {
  std::vector<ParamSlot> params;
  for (nn::Module* member : group.members) {
    absl::Span<nn::TensorSlot> slots = member->slots();
    for (size_t i = 0; i < slots.size(); ++i) {
      const DTensor& value = slots[i].value;
      if (!slots[i].is_parameter || !value.defined()) continue;
      if (dp < 0 || dp >= value.mesh().ndim()) {
        return absl::InvalidArgumentError(
            absl::StrCat("FSDP group \"", group.name, "\": dp mesh dim ", dp,
                         " is not a dim of ", value.mesh().ToString()));
      }
      if (value.sharding().placement(dp).is_shard()) {
        params.push_back({member, i});
      }
    }
  }
  return params;
}

}  // namespace

absl::Status AddFsdpGroups(std::vector<FsdpGroup> groups,
                           const FsdpOptions& options) {
  auto schedule = std::make_shared<Schedule>(options);
  for (FsdpGroup& group : groups) {
    if (group.module == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("FSDP group \"", group.name, "\" has no module"));
    }
    DT_ASSIGN_OR_RETURN(std::vector<ParamSlot> params,
                        DpShardedSlots(group, options.dp_dim));
    if (params.empty()) continue;
    schedule->Add(std::move(group), std::move(params));
  }
  for (size_t i = 0; i < schedule->size(); ++i) {
    GroupState& state = schedule->group(i);
    state.module()->AddInputHook(
        [schedule, &state](const DTensor& x) -> absl::StatusOr<DTensor> {
          DT_RETURN_IF_ERROR(state.Enter());
          return x;
        });
    state.module()->AddExitHook([schedule, &state] { state.Exit(); });
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
