#ifndef DTENSOR_NN_AUTOGRAD_H_
#define DTENSOR_NN_AUTOGRAD_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/dtensor.h"
#include "ops/op_args.h"
#include "ops/op_def.h"

namespace dtensor {
namespace nn {

// Options of GradientTape::Gradient.
struct GradientOptions {
  // The gradient of the target (its shape; any layout). Undefined: 1, which
  // requires a target of one element (a scalar loss).
  DTensor output_gradient;
  // false: each gradient is redistributed to its source's layout, a Partial
  // one completed there (Replicate source: all-reduce; Shard: reduce-scatter;
  // a Partial source's gradient comes as Replicate). true: gradients keep
  // the layouts propagation gave them (a data-parallel weight's gradient
  // stays Partial), so that accumulating several steps' gradients
  // (AccumulateGradients) and the optimizer's redistribution communicate
  // once.
  bool keep_propagated_layouts = false;
};

// Reverse-mode autograd over DTensor ops, like TensorFlow's GradientTape.
// While a Scope of the tape is alive, every op dispatched on the thread
// (ops/dispatch.h: every ops:: call) and every DTensor::Redistribute that
// changes a layout is recorded with its inputs, arguments and outputs;
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
// destroyed or cleared. A tape belongs to one thread (each rank records its
// own); a Scope must not outlive its tape. Ops that the backward definitions
// run are not recorded (no higher-order gradients). Do not update a recorded
// tensor's local data in place (optimizer steps) before the gradients are
// taken.
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

  GradientTape() = default;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // d target / d source for each source, in order; see GradientOptions for
  // the layouts. Every rank of the mesh must call it (SPMD). Errors: an
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
  // Forgets every recorded call (and the tensors it kept alive).
  void Clear() { records_.clear(); }

 private:
  struct Record {
    const OpDef* op;
    // One per op input; undefined where an optional one was absent.
    std::vector<DTensor> inputs;
    OpArgs args;
    std::vector<DTensor> outputs;
  };

  // The observers installed while a scope is active (ops/dispatch.h,
  // dtensor/dtensor.h).
  static void ObserveDispatch(const OpDef& op,
                              absl::Span<const DTensor* const> inputs,
                              const OpArgs& args,
                              absl::Span<const DTensor> outputs);
  static void ObserveRedistribute(const DTensor& input, const DTensor& output);
  // Appends the call to every tape recording on this thread.
  static void RecordOnThread(const OpDef& op,
                             absl::Span<const DTensor* const> inputs,
                             const OpArgs& args,
                             absl::Span<const DTensor> outputs);

  std::vector<Record> records_;
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
