#ifndef DTENSOR_NN_AUTOGRAD_H_
#define DTENSOR_NN_AUTOGRAD_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/function.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace nn {

// Whether autograd gives `x` a gradient: `x` is defined and of a floating
// dtype. Integer and bool DTensors (indices, masks) are constants to
// GradientTape and to CheckGradients alike.
bool IsDifferentiable(const DTensor& x);

// Options of GradientTape::Gradient.
struct GradientOptions {
  // The gradient of the target (its shape; any sharding). Undefined: 1.
  // Errors: undefined with a target of more than one element (not a scalar
  // loss).
  DTensor output_gradient;
  // false: each gradient is redistributed to its source's sharding, a Partial
  // one completed there (Replicate source: all-reduce; Shard: reduce-scatter;
  // a Partial source's gradient comes as Replicate). true: gradients keep
  // the shardings propagation gave them (a data-parallel weight's gradient
  // stays Partial), so that accumulating several steps' gradients
  // (AccumulateGradients) and the optimizer's redistribution communicate
  // once.
  bool keep_propagated_shardings = false;
  // If set, called once per source (by index) with its gradient, in the
  // sharding propagation gave it, as soon as that gradient is final: right
  // after the backward of the earliest record that holds the source, while
  // the pass goes on (sources no record holds, and those without a gradient,
  // with zeros, at the end). It lets a caller start a gradient's
  // communication during the backward pass
  // (dtensor/parallel/gradient_buckets.h); such a caller sets
  // keep_propagated_shardings too. It runs under the CommOwner of the call that
  // last contributed to the gradient (the module that used the source), so that
  // communication it records is attributed to that owner. Its error stops the
  // pass and is Gradient()'s.
  std::function<absl::Status(size_t source, const DTensor& grad)>
      on_gradient_ready;
  // If set, called after each point of the pass where on_gradient_ready was
  // handed one or more gradients (the sources that became final together,
  // such as an FSDP group's parameters), under the CommOwner of the last
  // one: a caller that groups gradients can start the group's communication
  // there. Its error stops the pass and is Gradient()'s.
  std::function<absl::Status()> after_gradients_ready;
  // With on_gradient_ready: the pass drops its reference to each gradient it
  // handed over (Gradient() returns those undefined), so that the caller's
  // copy is the only one and its memory goes when the caller is done with it
  // (an FSDP parameter's gradient, full on dp, once reduce-scattered).
  bool release_handed_over = false;
};

// Reverse-mode autograd over DTensor ops, like TensorFlow's GradientTape.
// While a Scope of the tape is alive, every op dispatched on the thread
// (dtensor/ops/dispatch.h: every ops:: call) and every DTensor::Redistribute
// that changes a sharding is recorded with its inputs, arguments and outputs;
// Gradient() then runs the ops' backward definitions (OpDef::backward, written
// with ops, so gradients are sharded and propagated like any other call) in
// reverse order.
//
//   GradientTape tape;
//   DTensor loss;
//   {
//     GradientTape::Scope scope(tape);
//     DT_ASSIGN_OR_RETURN(DTensor logits, model(tokens));
//     DT_ASSIGN_OR_RETURN(loss, ops::CrossEntropy(logits, targets));
//   }
//   DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
//                       tape.Gradient(loss, params));
//
// Sources may be any DTensors: parameters, inputs, or intermediates of the
// recorded computation (their gradient is that of the loss with respect to
// them). DTensors are told apart by DTensor::id(): copies share it. A source
// the target does not depend on gets zeros. Only floating DTensors get
// gradients; integer and bool ones (indices, masks) are constants.
//
// The tape keeps every recorded input and output alive until it is
// destroyed or cleared, except tensors declared RecomputeInBackward. A tape
// belongs to one thread (each rank records its own). Ops that the backward
// definitions run are not recorded (no higher-order gradients).
// Requires: a Scope does not outlive its tape; a recorded tensor's local data
// is not updated in place (optimizer steps) before the gradients are taken.
class GradientTape {
 public:
  // Records on the calling thread while alive. Scopes nest, of one tape or
  // of several (every tape with an active scope records, each op once).
  class Scope {
   public:
    explicit Scope(GradientTape& tape);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GradientTape* tape_;
  };

  // The recording state of a thread (dtensor/nn/autograd_recording.cc).
  struct ThreadRecording;

  // Records on `tape` alone while alive: the tapes with an active scope on
  // this thread, and NoGrad, are set aside until it ends (activation
  // checkpointing records a module's forward, and recomputes it inside a
  // backward pass, on a tape of its own: dtensor/nn/checkpoint.h).
  // Requires: scopes opened inside it end before it.
  class IsolatedScope {
   public:
    explicit IsolatedScope(GradientTape& tape);
    ~IsolatedScope();
    IsolatedScope(const IsolatedScope&) = delete;
    IsolatedScope& operator=(const IsolatedScope&) = delete;

   private:
    std::unique_ptr<ThreadRecording> outer_;
    std::unique_ptr<Scope> scope_;
  };

  GradientTape() = default;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // d target / d source for each source, in order; see GradientOptions for
  // the shardings. Every rank of the mesh must call it (SPMD). Errors: an
  // undefined or non-floating target or an undefined source (naming its
  // index); a target of several elements without output_gradient, or an
  // output_gradient of another shape; a recorded op on the path from a
  // source to the target without a backward definition (naming it); a
  // backward's error, prefixed with its op's name.
  absl::StatusOr<std::vector<DTensor>> Gradient(
      const DTensor& target, absl::Span<const DTensor> sources,
      const GradientOptions& options = {}) const;

  // The calls recorded so far.
  size_t num_records() const { return records_.size(); }
  // The distinct tensors the records hold (inputs and outputs), in record
  // order, for memory estimates: those whose storage the tape keeps alive,
  // and the data-less stand-ins of tensors declared RecomputeInBackward
  // (`recomputed`, rebuilt in backward).
  struct HeldTensor {
    DTensor tensor;
    bool recomputed = false;
    // For a recomputed tensor rebuilt with others at once (an FSDP group's
    // parameters): the rebuild's group key (RecomputeInBackward); null
    // otherwise.
    const void* rebuild_group = nullptr;
  };
  std::vector<HeldTensor> HeldTensors() const;
  // The outputs of the recorded op calls (dispatched ops, not functions or
  // redistributions) whose op name `wanted` accepts, in record order, each
  // call's outputs in order (stand-ins of recomputed tensors as held).
  std::vector<DTensor> OpOutputsWhere(
      const std::function<bool(absl::string_view op)>& wanted) const;
  // Forgets every recorded call (and the tensors it kept alive) and every
  // RecomputeInBackward declaration.
  void Clear() {
    records_.clear();
    recomputed_.clear();
  }

  // Records a call of a differentiable function computed outside op
  // dispatch (one that moves a tensor to another mesh, for instance) on every
  // tape recording on this thread, like ops that Dispatch records: one input
  // per entry of `inputs` (nulls for absent inputs). Nothing happens when no
  // tape records.
  // Requires: `function` outlives the tapes (a static).
  static void RecordFunction(const Function& function,
                             absl::Span<const DTensor* const> inputs,
                             const OpArgs& args,
                             absl::Span<const DTensor> outputs);

  // Recompute in backward ("activation checkpointing" of one tensor):
  // declares, to every tape with an active scope on this thread (recording
  // or paused by NoGrad), that `value` can be rebuilt by redistributing
  // `source` to value's sharding. Those tapes then keep, wherever a record
  // holds `value` (as an input or an output: the record that made it, and
  // every later one), a stand-in with its id and spec but no data, so that the
  // tapes no longer keep value's storage alive (a later recorded
  // redistribution of `value`, possibly a view of it, is recomputed from
  // `source` likewise); Gradient() rebuilds `value`
  // (one redistribution of `source`, with the same communication as in
  // forward) when, walking backward, it first runs the backward of a record
  // that holds it (recorded redistributions excepted: their backward reads
  // only shardings), shares the rebuilt tensor with the earlier records that
  // hold it and drops it after the earliest. FSDP gathers parameters this way
  // (dtensor/parallel/parallelize.h): the gathered copy is freed after the
  // module's forward and gathered again in backward.
  //
  // Contract: `value` is source.Redistribute(value.sharding()) (or equal to
  // it), and neither source's data nor the meaning of value changes before
  // the gradients are taken (the rule for every recorded tensor). Views of
  // `value` that ops made are recorded as they are and keep its storage.
  // A value that is the source itself (same id) is a no-op.
  // Errors: an undefined tensor, or a source of another mesh, global shape or
  // dtype (InvalidArgument naming both specs; nothing declared).
  static absl::Status RecomputeInBackward(const DTensor& value,
                                          const DTensor& source);
  // The same, rebuilt by `rebuild` instead of a redistribution of `source`
  // (which stays the tensor `value` derives from: its sharding, mesh and
  // gradient path; its dtype may differ, for a rebuild that casts): FSDP
  // rebuilds a group's parameters with one flat all-gather (of their casts
  // to the compute dtype under mixed precision) and prefetches the next
  // group's. `group` keys the tensors rebuilt together
  // (HeldTensor::rebuild_group; may be null).
  // Requires: `rebuild` returns a tensor equal to value (spec and data),
  // under the same collective rules (every rank calls it at the same point).
  // The tape calls it once per pass for `value` (sharing the result between
  // the records that hold it), and again for each later recorded
  // redistribution of `value` it rebuilds, possibly while an earlier result is
  // alive.
  using RebuildFn = std::function<absl::StatusOr<DTensor>()>;
  static absl::Status RecomputeInBackward(const DTensor& value,
                                          const DTensor& source,
                                          RebuildFn rebuild, const void* group);

 private:
  // What a record's backward runs: an op's or a function's name and
  // backward (empty: none).
  struct Recorded {
    absl::string_view name;
    const BackwardFn* backward;
    // A redistribution: its backward reads only its input's sharding, and its
    // output is recomputed when its input is (see RecomputeInBackward).
    bool is_redistribution;
    // Its backward reads no tensor data (redistributions, and functions
    // that say so): recomputed tensors are not rebuilt for it.
    bool reads_specs_only;
    // A dispatched op (not a function or a redistribution).
    bool is_op = false;
  };
  struct Record {
    Recorded recorded;
    // One per op input; undefined where an optional one was absent. A
    // recomputed tensor is held as its stand-in (see RecomputeInBackward).
    std::vector<DTensor> inputs;
    OpArgs args;
    std::vector<DTensor> outputs;
    // The ids of the inputs and outputs (a stand-in's id is not its
    // tensor's).
    std::vector<uint64_t> input_ids;
    std::vector<uint64_t> output_ids;
    // CommOwner::Current() when recorded: the owner of the backward's
    // collectives.
    const void* comm_owner = nullptr;
  };
  // How to rebuild a tensor recomputed in backward, and the data-less
  // stand-in the records hold instead.
  struct Recompute {
    DTensor source;
    DTensor stand_in;
    // Builds the tensor source derives (empty: source itself), which is then
    // redistributed to stand_in's sharding where that differs.
    RebuildFn rebuild;
    const void* group = nullptr;
  };
  // Puts the stand-ins of recomputed tensors into a new record; the output
  // of a redistribution of a recomputed tensor becomes recomputed too.
  void UseStandIns(Record& record);
  // Replaces `value` by its stand-in in the records, from the last back to
  // the one that made it.
  void UseStandIn(uint64_t id, const DTensor& stand_in);
  // The state and steps of one Gradient() call
  // (dtensor/nn/autograd_backward.cc).
  class BackwardPass;

  // The observers installed while a scope is active (dtensor/ops/dispatch.h,
  // dtensor/dtensor.h).
  static void ObserveDispatch(const OpDef& op,
                              absl::Span<const DTensor* const> inputs,
                              const OpArgs& args,
                              absl::Span<const DTensor> outputs);
  static void ObserveRedistribute(const DTensor& input, const DTensor& output);
  // Appends the call to every tape recording on this thread, its inputs
  // padded to `num_inputs`.
  static void RecordOnThread(const Recorded& recorded, size_t num_inputs,
                             absl::Span<const DTensor* const> inputs,
                             const OpArgs& args,
                             absl::Span<const DTensor> outputs);

  std::vector<Record> records_;
  // By the recomputed tensor's id.
  absl::flat_hash_map<uint64_t, Recompute> recomputed_;
};

// Pauses recording on this thread while alive (every tape): for updates,
// metrics and other computation that must not be differentiated. Nests.
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
};

// Whether an op dispatched now on this thread would be recorded: a tape's
// scope is active and no NoGrad.
bool IsRecording();

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_AUTOGRAD_H_
