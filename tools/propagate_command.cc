
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/json_text.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/redistribute/cost_model.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/propagation.h"
#include "dtensor/ops/registry.h"
#include "dtensor/runtime.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"
#include "nlohmann/json.hpp"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/mesh_flag.h"
#include "tools/step_json.h"
#include "tools/subcommand.h"

namespace dtensor {
namespace {

using nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: dtensor propagate --mesh 4 --op mm --in \"12x8:S(0)\" --in "
    "\"8x4:R\"\n"
    "                         [--arg name=value ...] [--dtype f32] [--json]\n"
    "       dtensor propagate --list\n"
    "  --mesh   mesh sizes: 4x2, or named: dp=4,tp=2\n"
    "  --op     the op (--list names them)\n"
    "  --in     one per input: SHAPE:LAYOUT[:DTYPE], e.g. 12x8:S(0),R:bf16\n"
    "           (sizes separated by 'x', empty for 0-d; one placement per "
    "mesh\n"
    "           dim: R, S(dim), S(dim)[k], P, P(sum|avg|max|min))\n"
    "  --arg    an argument of the op: dims=0,1  keepdim=true  other=2.5\n"
    "  --dtype  dtype of the inputs without one (default f32)\n"
    "  --json   print the propagation as one JSON object\n"
    "  --list   list the ops and their arguments\n";

constexpr FlagSpec kFlags[] = {
    {"mesh"},        {"op"},          {"dtype"},
    {"json", false}, {"list", false}, {"help", false},
};

// The command line with the repeatable flags (--in, --arg) taken out:
// ParseArgs accepts every flag once.
struct SplitArgs {
  std::vector<std::string> rest;
  std::vector<std::string> inputs;
  std::vector<std::string> op_args;
};

absl::StatusOr<SplitArgs> TakeRepeatedFlags(
    absl::Span<const std::string> args) {
  SplitArgs split;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      split.rest.insert(split.rest.end(), args.begin() + i, args.end());
      break;
    }
    bool taken = false;
    for (auto [name, values] :
         {std::pair<std::string, std::vector<std::string>*>{"--in",
                                                            &split.inputs},
          {"--arg", &split.op_args}}) {
      if (arg == name) {
        if (i + 1 == args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag ", name, " needs a value"));
        }
        values->push_back(args[++i]);
        taken = true;
      } else if (arg.rfind(name + "=", 0) == 0) {
        values->push_back(arg.substr(name.size() + 1));
        taken = true;
      }
    }
    if (!taken) split.rest.push_back(arg);
  }
  return split;
}

// One --in: "SHAPE:LAYOUT[:DTYPE]".
absl::StatusOr<DTensorSpec> ParseInput(const std::string& text,
                                       const DeviceMesh& mesh,
                                       DType default_dtype) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed --in '", text, "': expected SHAPE:LAYOUT[:DTYPE]"));
  }
  std::vector<int64_t> shape;
  if (!parts[0].empty()) {
    DT_ASSIGN_OR_RETURN(shape, ParseIntList(parts[0], 'x', "--in shape"));
  }
  DT_ASSIGN_OR_RETURN(
      Sharding sharding,
      Sharding::Parse(parts[1], static_cast<int64_t>(shape.size())));
  DType dtype = default_dtype;
  if (parts.size() == 3) {
    DT_ASSIGN_OR_RETURN(dtype, ParseDType(parts[2]));
  }
  return DTensorSpec::Create(mesh, sharding, std::move(shape), dtype);
}

// The --arg flags as a name -> value map.
absl::StatusOr<std::map<std::string, std::string, std::less<>>> NamedArgs(
    const std::vector<std::string>& texts) {
  std::map<std::string, std::string, std::less<>> named;
  for (const std::string& text : texts) {
    const size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed --arg '", text, "': expected name=value"));
    }
    if (!named.emplace(text.substr(0, equals), text.substr(equals + 1))
             .second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arg ", text.substr(0, equals), " given twice"));
    }
  }
  return named;
}

// What the command propagates.
struct Request {
  const OpDef* op;
  std::vector<DTensorSpec> inputs;
  OpArgs args;
};

absl::StatusOr<Request> RequestFromArgs(const ParsedArgs& parsed,
                                        const SplitArgs& split) {
  DT_RETURN_IF_ERROR(parsed.CheckNoPositional());
  DT_ASSIGN_OR_RETURN(std::string mesh_text, parsed.Required("mesh"));
  DT_ASSIGN_OR_RETURN(std::string op_name, parsed.Required("op"));
  if (split.inputs.empty()) return absl::InvalidArgumentError("missing --in");
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(mesh_text));
  DT_ASSIGN_OR_RETURN(DType dtype, ParseDType(parsed.ValueOr("dtype", "f32")));
  Request request;
  DT_ASSIGN_OR_RETURN(request.op, OpRegistry::Global().Find(op_name));
  for (const std::string& text : split.inputs) {
    DT_ASSIGN_OR_RETURN(DTensorSpec spec, ParseInput(text, mesh, dtype));
    request.inputs.push_back(std::move(spec));
  }
  DT_ASSIGN_OR_RETURN(auto named, NamedArgs(split.op_args));
  DT_ASSIGN_OR_RETURN(request.args,
                      ParseOpArgs(request.op->name, request.op->args, named));
  return request;
}

// Collectives of each kind (local steps excluded), redistributions and
// kernel together.
std::map<CommKind, int64_t> CountCollectives(const Propagation& p) {
  std::map<CommKind, int64_t> counts;
  for (const InputRedistribution& in : p.inputs) {
    if (in.plan == nullptr) continue;
    for (const RedistributeStep& step : in.plan->steps) {
      if (step.kind != CommKind::kLocal) ++counts[step.kind];
    }
  }
  for (const CommCounter::Event& e : p.kernel_events) {
    if (e.kind != CommKind::kLocal) ++counts[e.kind];
  }
  return counts;
}

constexpr CommKind kCountedKinds[] = {
    CommKind::kAllGather, CommKind::kAllReduce, CommKind::kReduceScatter,
    CommKind::kAllToAll, CommKind::kPermute};

ordered_json OutputJson(const DTensorSpec& spec) {
  return {{"shape", spec.shape()}, {"placements", spec.sharding().ToString()}};
}

ordered_json RedistributionJson(size_t index, const InputRedistribution& in) {
  ordered_json steps = ordered_json::array();
  if (in.plan != nullptr) {
    for (const RedistributeStep& step : in.plan->steps) {
      steps.push_back(StepJson(step));
    }
  }
  return {{"input", index},
          {"from", in.from->sharding().ToString()},
          {"to", in.to->sharding().ToString()},
          {"steps", std::move(steps)},
          {"cost_us", JsonNumber(in.cost_us())}};
}

ordered_json KernelEventJson(const CommCounter::Event& e) {
  return {{"kind", std::string(CommKindName(e.kind))},
          {"mesh_dims", e.mesh_dims},
          {"bytes_per_rank", JsonNumber(e.bytes)},
          {"cost_us", JsonNumber(e.estimated_us)}};
}

// The collectives of `p` by kind, every counted kind present.
ordered_json CollectiveCountsJson(const Propagation& p) {
  const std::map<CommKind, int64_t> counts = CountCollectives(p);
  ordered_json json = ordered_json::object();
  for (CommKind kind : kCountedKinds) {
    auto it = counts.find(kind);
    json[std::string(CommKindName(kind))] = it == counts.end() ? 0 : it->second;
  }
  return json;
}

std::string PropagationJson(const Propagation& p) {
  ordered_json json = {{"op", p.op->name},
                       {"output", OutputJson(*p.outputs[0])}};
  if (p.outputs.size() > 1) {
    ordered_json outputs = ordered_json::array();
    for (const auto& spec : p.outputs) outputs.push_back(OutputJson(*spec));
    json["outputs"] = std::move(outputs);
  }
  ordered_json redistributions = ordered_json::array();
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (p.inputs[i].from == nullptr) continue;
    redistributions.push_back(RedistributionJson(i, p.inputs[i]));
  }
  json["redistributions"] = std::move(redistributions);
  if (!p.kernel_events.empty()) {
    ordered_json kernel = ordered_json::array();
    for (const CommCounter::Event& e : p.kernel_events) {
      kernel.push_back(KernelEventJson(e));
    }
    json["kernel_collectives"] = std::move(kernel);
  }
  json["collectives"] = CollectiveCountsJson(p);
  json["cost_us"] = JsonNumber(p.cost_us);
  return DumpJson(json) + "\n";
}

std::string SpecText(const DTensorSpec& spec) {
  return absl::StrCat(ShapeToString(spec.shape()), " ",
                      std::string(DTypeName(spec.dtype())), " ",
                      spec.sharding().ToString());
}

std::string PropagationText(const DeviceMesh& mesh, const Propagation& p) {
  std::string text =
      absl::StrCat(p.op->name, " on mesh ", absl::StrJoin(mesh.shape(), "x"),
                   ": ", p.strategy.ToString(), "\n");
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const InputRedistribution& in = p.inputs[i];
    if (in.from == nullptr) {
      absl::StrAppend(&text, "input ", i, ": absent\n");
      continue;
    }
    absl::StrAppend(&text, "input ", i, ": ", SpecText(*in.from));
    if (in.plan == nullptr) {
      absl::StrAppend(&text, ", kept\n");
      continue;
    }
    absl::StrAppendFormat(&text, " -> %s: %d step(s), %.3f us\n",
                          in.to->sharding().ToString(), in.plan->steps.size(),
                          in.plan->total_cost_us);
    for (size_t k = 0; k < in.plan->steps.size(); ++k) {
      const RedistributeStep& step = in.plan->steps[k];
      absl::StrAppendFormat(
          &text, "  %d. %-14s mesh dims [%s]  -> %s  %s bytes/rank  %.3f us\n",
          k + 1, CommKindName(step.kind), absl::StrJoin(step.mesh_dims, ","),
          step.after.ToString(), DumpJson(JsonNumber(step.bytes_per_rank)),
          step.cost_us);
    }
  }
  for (const CommCounter::Event& e : p.kernel_events) {
    absl::StrAppendFormat(
        &text, "kernel: %-14s mesh dims [%s]  %s bytes/rank  %.3f us\n",
        CommKindName(e.kind), absl::StrJoin(e.mesh_dims, ","),
        DumpJson(JsonNumber(e.bytes)), e.estimated_us);
  }
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    absl::StrAppend(&text, "output ", j, ": ", SpecText(*p.outputs[j]), "\n");
  }
  absl::StrAppendFormat(&text, "total %.3f us, %d collective(s)\n", p.cost_us,
                        p.num_collectives());
  return text;
}

std::string OpList() {
  std::string text;
  for (const OpDef* op : OpRegistry::Global().ops()) {
    std::vector<std::string> args;
    for (const ArgSpec& arg : op->args) {
      args.push_back(absl::StrCat(arg.name, ":", ArgKindName(arg.kind),
                                  arg.default_value == nullptr
                                      ? ""
                                      : absl::StrCat("=", arg.default_value)));
    }
    const int required = op->num_inputs - op->num_optional_inputs;
    absl::StrAppendFormat(
        &text, "%-12s %s input(s)%s  %s\n", op->name,
        op->num_optional_inputs == 0
            ? absl::StrCat(op->num_inputs)
            : absl::StrCat(required, "-", op->num_inputs),
        args.empty() ? "" : absl::StrCat(", ", absl::StrJoin(args, " ")),
        op->summary);
  }
  return text;
}

// Prints on `out` the propagation of the call `args` and `split` describe, or
// with --list the ops.
absl::StatusOr<int> PrintPropagation(const ParsedArgs& args,
                                     const SplitArgs& split,
                                     std::ostream& out) {
  if (args.Has("list")) {
    out << OpList();
    return kExitOk;
  }
  DT_ASSIGN_OR_RETURN(Request request, RequestFromArgs(args, split));
  std::vector<const DTensorSpec*> inputs;
  for (const DTensorSpec& spec : request.inputs) inputs.push_back(&spec);
  const std::shared_ptr<Runtime> runtime = Runtime::MetadataOnly(0);
  DT_ASSIGN_OR_RETURN(std::shared_ptr<const Propagation> propagation,
                      Propagate(*request.op, inputs, request.args, *runtime));
  out << (args.Has("json")
              ? PropagationJson(*propagation)
              : PropagationText(request.inputs[0].mesh(), *propagation));
  return kExitOk;
}

}  // namespace

int RunPropagateCommand(absl::Span<const std::string> args, std::ostream& out,
                        std::ostream& err) {
  absl::StatusOr<SplitArgs> split = TakeRepeatedFlags(args);
  if (!split.ok()) {
    return ReportUsageError(err, "propagate", split.status().message());
  }
  return RunSubcommand(split->rest, kFlags, "propagate", kUsage, out, err,
                       [&split](const ParsedArgs& parsed, std::ostream& results,
                                std::ostream& /*err*/) {
                         return PrintPropagation(parsed, *split, results);
                       });
}

}  // namespace dtensor
