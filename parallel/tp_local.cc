#include "dtensor/parallel/tp_local.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/function.h"
#include "dtensor/ops/backward_helpers.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/sharding.h"

namespace dtensor {
namespace parallel {
namespace {

absl::Status CheckTpDim(const DeviceMesh& mesh, int64_t tp) {
  if (tp < 0 || tp >= mesh.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tp-local: tp dim ", tp, " is not a dim of ", mesh.ToString()));
  }
  return absl::OkStatus();
}

// The DTensor whose local data on this rank is `local`, laid out on `mesh` by
// `sharding` with global `shape`; no communication (no data under a
// metadata-only runtime).
absl::StatusOr<DTensor> Wrap(const std::shared_ptr<Runtime>& runtime,
                             const Tensor& local, const DeviceMesh& mesh,
                             const Sharding& sharding, const Shape& shape,
                             DType dtype) {
  if (runtime->metadata_only()) {
    DT_ASSIGN_OR_RETURN(DTensorSpec spec,
                        DTensorSpec::Create(mesh, sharding, shape, dtype));
    return DTensor::FromSpec(runtime, std::move(spec));
  }
  FromLocalOptions options;
  options.global_shape = shape;
  options.order = sharding.shard_order();
  return DTensor::FromLocal(runtime, local, mesh, sharding.placements(),
                            options);
}

// A gradient `grad` of a tensor on one mesh, brought to `sharding` there, then
// wrapped as the gradient of the tensor `to` (on the other mesh).
absl::StatusOr<DTensor> MoveGradient(DTensor grad, const Sharding& sharding,
                                     const DTensor& to) {
  if (grad.sharding() != sharding) {
    DT_ASSIGN_OR_RETURN(grad, grad.Redistribute(sharding));
  }
  return Wrap(grad.runtime(), grad.ToLocal(), to.mesh(),
              to.sharding().WithoutPartials(), to.shape(), to.dtype());
}

// The backward of either conversion is the other one.
absl::StatusOr<std::vector<DTensor>> ConversionBackward(
    const BackwardCall& call) {
  DT_ASSIGN_OR_RETURN(DTensor grad,
                      MoveGradient(call.grad_outputs[0],
                                   call.outputs[0].sharding().WithoutPartials(),
                                   call.inputs[0]));
  return std::vector<DTensor>{std::move(grad)};
}

// A conversion as the tape records it: one input, one output.
const nn::Function& ConversionFunction(bool to_local) {
  static const nn::Function to{"to_tp_local", ConversionBackward};
  static const nn::Function from{"from_tp_local", ConversionBackward};
  return to_local ? to : from;
}

void Record(bool to_local, const DTensor& input, const DTensor& output) {
  const DTensor* inputs[] = {&input};
  nn::GradientTape::RecordFunction(ConversionFunction(to_local), inputs,
                                   OpArgs(), absl::MakeConstSpan(&output, 1));
}

}  // namespace

absl::StatusOr<DeviceMesh> TpLocalMesh(const DeviceMesh& mesh, int64_t tp,
                                       int64_t rank) {
  DT_RETURN_IF_ERROR(CheckTpDim(mesh, tp));
  return mesh.PinnedAt(tp, rank);
}

bool IsTpLocal(const DTensor& x, const DeviceMesh& mesh, int64_t tp) {
  if (!x.defined() || x.mesh() == mesh) return false;
  absl::StatusOr<DeviceMesh> local = TpLocalMesh(mesh, tp, x.runtime()->rank());
  return local.ok() && x.mesh() == *local;
}

absl::StatusOr<DTensor> ToTpLocal(const DTensor& x, int64_t tp) {
  DT_RETURN_IF_ERROR(CheckTpDim(x.mesh(), tp));
  const Placement& placement = x.sharding().placement(tp);
  if (placement.is_partial()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "use_local_output: the output ", x.spec().ToString(),
        " is Partial on the tp dim; give output_layouts R or S(d)"));
  }
  Shape shape = x.shape();
  if (placement.is_shard()) {
    const int64_t d = placement.dim();
    if (x.sharding().MeshDimsSharding(d).size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "use_local_output: tensor dim ", d, " of ", x.spec().ToString(),
          " is sharded by the tp dim and another mesh dim"));
    }
    DT_ASSIGN_OR_RETURN(ShardBlock block, x.LocalBlock());
    shape[d] = block.shape[d];
  }
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh,
                      TpLocalMesh(x.mesh(), tp, x.runtime()->rank()));
  DT_ASSIGN_OR_RETURN(
      DTensor local, Wrap(x.runtime(), x.ToLocal(), mesh,
                          x.sharding().WithReplicated({tp}), shape, x.dtype()));
  Record(/*to_local=*/true, x, local);
  return local;
}

absl::StatusOr<DTensor> FromTpLocal(const DTensor& local,
                                    const DeviceMesh& mesh, int64_t tp,
                                    const Placement& placement) {
  DT_RETURN_IF_ERROR(CheckTpDim(mesh, tp));
  if (!IsTpLocal(local, mesh, tp)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tp-local input ",
        local.defined() ? local.spec().ToString() : "(undefined)",
        " is not on the tp-local mesh of its rank for ", mesh.ToString()));
  }
  const Sharding& from = local.sharding();
  Sharding sharding = from;
  Shape shape = local.shape();
  if (placement.is_shard()) {
    int64_t d = placement.dim();
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (d < 0) d += rank;
    if (d < 0 || d >= rank || !from.MeshDimsSharding(d).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tp-local input ", local.spec().ToString(), ": cannot shard dim ",
          placement.dim(), " on the tp dim (out of range or sharded already)"));
    }
    sharding = from.WithShardsAppended({tp}, d);
    shape[d] *= mesh.size(tp);
  } else if (placement.is_partial()) {
    sharding = from.WithPartial(tp, placement.reduce_op());
  }
  DT_ASSIGN_OR_RETURN(DTensor full, Wrap(local.runtime(), local.ToLocal(), mesh,
                                         sharding, shape, local.dtype()));
  Record(/*to_local=*/false, local, full);
  return full;
}

}  // namespace parallel
}  // namespace dtensor
