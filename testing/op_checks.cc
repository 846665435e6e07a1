#include "dtensor/testing/op_checks.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/ops/propagation.h"
#include "dtensor/ops/registry.h"
#include "dtensor/ops/strategy.h"

namespace dtensor {
namespace testing_util {

namespace {

// Runs `check` on calls drawn from `make`: `meshes` random mesh shapes
// (RandomMeshShape), `calls_per_mesh` calls on each, all drawn from `seed`
// in that order (check may draw more from the generator it gets). Stops at
// the first error.
absl::Status ForRandomCalls(
    uint32_t seed, int meshes, int calls_per_mesh, const OpCallMaker& make,
    const std::function<absl::Status(const std::vector<int64_t>& mesh_shape,
                                     const OpCall& call, std::mt19937& rng)>&
        check) {
  std::mt19937 rng(seed);
  for (int m = 0; m < meshes; ++m) {
    const std::vector<int64_t> mesh_shape = RandomMeshShape(rng);
    for (int k = 0; k < calls_per_mesh; ++k) {
      DT_RETURN_IF_ERROR(check(mesh_shape, make(rng), rng));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOnRandomShardings(uint32_t seed, int rounds,
                                    int calls_per_mesh, const OpCallMaker& make,
                                    double rtol, double atol) {
  return ForRandomCalls(seed, rounds, calls_per_mesh, make,
                        [&](const std::vector<int64_t>& mesh_shape,
                            const OpCall& call, std::mt19937& rng) {
                          const int64_t mesh_ndim =
                              static_cast<int64_t>(mesh_shape.size());
                          OpCase c;
                          c.description = call.description;
                          for (const Tensor& full : call.inputs) {
                            c.shardings.push_back(RandomSharding(
                                mesh_ndim, full.defined() ? full.dim() : 0,
                                full.defined() ? PartialOpsFor(full.dtype())
                                               : std::vector<ReduceOp>{},
                                rng));
                            c.inputs.push_back(full);
                          }
                          return CheckCases(mesh_shape, {c}, call.call,
                                            call.reference, rtol, atol);
                        });
}

absl::Status CheckRandomStrategies(uint32_t seed, int calls, int max_strategies,
                                   const OpCallMaker& make, double rtol,
                                   double atol) {
  return ForRandomCalls(
      seed, calls, /*calls_per_mesh=*/1, make,
      [&](const std::vector<int64_t>& mesh_shape, const OpCall& call,
          std::mt19937& rng) -> absl::Status {
        DT_ASSIGN_OR_RETURN(const OpDef* op,
                            OpRegistry::Builtin().Find(call.op));
        StrategyCase c{op, call.inputs, call.args, call.reference,
                       call.description};
        return CheckEveryStrategy(mesh_shape, c, max_strategies, rng(), rtol,
                                  atol);
      });
}

absl::Status CheckOpProperties(uint32_t seed, const OpCallMaker& typed,
                               double tol, const OpPropertyCounts& counts,
                               const OpCallMaker& registry) {
  const absl::Status shardings = CheckOnRandomShardings(
      seed, counts.sharding_rounds, counts.calls_per_mesh, typed, tol, tol);
  const absl::Status strategies = CheckRandomStrategies(
      seed + 1000, counts.strategy_calls, counts.max_strategies,
      registry ? registry : typed, tol, tol);
  if (shardings.ok() && strategies.ok()) return absl::OkStatus();
  std::vector<std::string> failures;
  if (!shardings.ok()) {
    failures.push_back(
        absl::StrCat("CheckOnRandomShardings: ", shardings.message()));
  }
  if (!strategies.ok()) {
    failures.push_back(
        absl::StrCat("CheckRandomStrategies: ", strategies.message()));
  }
  return absl::Status(shardings.ok() ? strategies.code() : shardings.code(),
                      absl::StrJoin(failures, "; "));
}

namespace {

// The strategies of the call worth running: Partials the dtypes allow, at
// most `max_strategies` of them.
absl::StatusOr<std::vector<OpStrategy>> StrategiesToRun(
    const StrategyCase& c, const DeviceMesh& mesh,
    const std::vector<DTensorSpec>& specs,
    const std::vector<TensorMeta>& outputs, int max_strategies, uint32_t seed) {
  std::vector<const DTensorSpec*> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(c.inputs[i].defined() ? &specs[i] : nullptr);
  }
  const StrategyContext ctx{inputs, c.args, outputs, mesh, mesh.shape()};
  DT_ASSIGN_OR_RETURN(std::vector<OpStrategy> all, c.op->strategies(ctx));
  std::vector<OpStrategy> valid;
  for (OpStrategy& s : all) {
    bool ok = true;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      ok &= !c.inputs[i].defined() ||
            PartialsAllowed(s.inputs[i], c.inputs[i].dtype());
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      ok &= PartialsAllowed(s.outputs[j], outputs[j].dtype);
    }
    if (ok) valid.push_back(std::move(s));
  }
  if (static_cast<int>(valid.size()) > max_strategies) {
    std::mt19937 rng(seed);
    std::shuffle(valid.begin(), valid.end(), rng);
    valid.resize(max_strategies);
  }
  return valid;
}

// The op's kernel on this rank under strategy `s`: its outputs as DTensors.
absl::StatusOr<std::vector<DTensor>> RunStrategy(
    const StrategyCase& c, const OpStrategy& s, const DeviceMesh& mesh,
    const std::vector<TensorMeta>& outputs,
    const std::shared_ptr<Runtime>& runtime) {
  Propagation propagation;
  propagation.op = c.op;
  propagation.strategy = s;
  std::vector<Tensor> locals(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    InputRedistribution in;
    if (c.inputs[i].defined()) {
      const TestSharding sharding{s.inputs[i].placements(),
                                  s.inputs[i].shard_order()};
      DT_ASSIGN_OR_RETURN(
          DTensor x, DistributeWithTerms(runtime, c.inputs[i], mesh, sharding));
      locals[i] = x.ToLocal();
      in.from = std::make_shared<const DTensorSpec>(x.spec());
      in.to = in.from;
    }
    propagation.inputs.push_back(std::move(in));
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(mesh, s.outputs[j], outputs[j].shape,
                            outputs[j].dtype));
    propagation.outputs.push_back(
        std::make_shared<const DTensorSpec>(std::move(spec)));
  }
  const KernelContext ctx(c.args, propagation, *runtime);
  DT_ASSIGN_OR_RETURN(OpLocals results, c.op->kernel(ctx, locals));
  std::vector<DTensor> wrapped;
  for (size_t j = 0; j < results.size() && j < outputs.size(); ++j) {
    wrapped.push_back(DTensor::WrapUnchecked(runtime, propagation.outputs[j],
                                             std::move(results[j])));
  }
  return wrapped;
}

}  // namespace

absl::Status CheckEveryStrategy(const std::vector<int64_t>& mesh_shape,
                                const StrategyCase& c, int max_strategies,
                                uint32_t seed, double rtol, double atol) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, DeviceMesh::Create(mesh_shape));
  // Absent trailing inputs included, as the engine passes them.
  StrategyCase padded = c;
  if (padded.inputs.size() < static_cast<size_t>(c.op->num_inputs)) {
    padded.inputs.resize(c.op->num_inputs);
  }
  std::vector<DTensorSpec> specs;
  std::vector<const DTensorSpec*> given;
  for (const Tensor& t : padded.inputs) {
    const Tensor shape_of = t.defined() ? t : Tensor::Scalar(0);
    DT_ASSIGN_OR_RETURN(
        DTensorSpec spec,
        DTensorSpec::Create(
            mesh, std::vector<Placement>(mesh.ndim(), Placement::Replicate()),
            shape_of.shape(), shape_of.dtype()));
    specs.push_back(std::move(spec));
  }
  for (size_t i = 0; i < padded.inputs.size(); ++i) {
    given.push_back(padded.inputs[i].defined() ? &specs[i] : nullptr);
  }
  DT_ASSIGN_OR_RETURN(std::vector<TensorMeta> outputs,
                      c.op->infer(given, c.args));
  DT_ASSIGN_OR_RETURN(
      std::vector<OpStrategy> strategies,
      StrategiesToRun(padded, mesh, specs, outputs, max_strategies, seed));
  DT_ASSIGN_OR_RETURN(std::vector<Tensor> expected, c.reference(c.inputs));
  for (Tensor& t : expected) {
    DT_ASSIGN_OR_RETURN(t, t.To(DType::kF64));
  }
  DT_ASSIGN_OR_RETURN(const Device device, CheckDevice());
  LocalCluster cluster(mesh.size(), CommunicatorOptions(), device);
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    for (const OpStrategy& s : strategies) {
      const auto fail = [&](absl::string_view what) {
        return absl::InternalError(absl::StrCat(
            "mesh ", absl::StrJoin(mesh_shape, "x"), ", ", c.description,
            ", strategy ", s.ToString(), ": ", what));
      };
      absl::StatusOr<std::vector<DTensor>> out =
          RunStrategy(padded, s, mesh, outputs, runtime);
      if (!out.ok()) return fail(out.status().ToString());
      for (size_t j = 0; j < out->size(); ++j) {
        const DTensor& d = (*out)[j];
        DT_ASSIGN_OR_RETURN(ShardBlock block, d.LocalBlock());
        if (d.ToLocal().shape() != block.shape) {
          return fail(absl::StrCat("output ", j, " has local shape ",
                                   ShapeToString(d.ToLocal().shape()),
                                   ", its layout gives ",
                                   ShapeToString(block.shape)));
        }
        DT_ASSIGN_OR_RETURN(Tensor full, d.FullTensor());
        DT_ASSIGN_OR_RETURN(full, full.To(Device::CPU()));
        DT_ASSIGN_OR_RETURN(Tensor got, full.To(DType::kF64));
        if (got.shape() != expected[j].shape() ||
            !AllClose(got, expected[j], rtol, atol)) {
          return fail(absl::StrCat("output ", j, " is\n", got.ToString(),
                                   "\nexpected\n", expected[j].ToString()));
        }
      }
    }
    return absl::OkStatus();
  });
}

namespace {

// `call` as a call returning the vector of its one output.
template <typename T>
std::function<absl::StatusOr<std::vector<T>>(const std::vector<T>&)>
OneOutputOf(std::function<absl::StatusOr<T>(const std::vector<T>&)> call) {
  return [call = std::move(call)](
             const std::vector<T>& in) -> absl::StatusOr<std::vector<T>> {
    absl::StatusOr<T> out = call(in);
    if (!out.ok()) return out.status();
    return std::vector<T>{*std::move(out)};
  };
}

}  // namespace

DTensorCall OneOutput(
    std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)> call) {
  return OneOutputOf<DTensor>(std::move(call));
}

ReferenceCall OneReference(
    std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)> call) {
  return OneOutputOf<Tensor>(std::move(call));
}

MetaOutcome RunOnMeta(
    const std::vector<int64_t>& mesh_shape,
    const std::vector<MetaInput>& inputs,
    const std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)>&
        call) {
  MetaOutcome outcome;
  auto runtime = Runtime::MetadataOnly(0);
  absl::StatusOr<DeviceMesh> mesh = DeviceMesh::Create(mesh_shape);
  if (!mesh.ok()) {
    outcome.status = mesh.status();
    return outcome;
  }
  std::vector<DTensor> tensors;
  for (const MetaInput& in : inputs) {
    if (in.sharding == "-") {
      tensors.emplace_back();
      continue;
    }
    absl::StatusOr<DTensor> t =
        MetaTensor(runtime, *mesh, in.shape, in.sharding, in.dtype);
    if (!t.ok()) {
      outcome.status = t.status();
      return outcome;
    }
    tensors.push_back(*std::move(t));
  }
  absl::StatusOr<DTensor> out;
  {
    CommCounter::Scope scope(outcome.comms);
    out = call(tensors);
  }
  outcome.status = out.status();
  if (out.ok()) outcome.sharding = out->sharding().ToString();
  return outcome;
}

}  // namespace testing_util
}  // namespace dtensor
