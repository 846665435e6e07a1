#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "dtensor/base/status_macros.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/link_flags.h"
#include "tools/mesh_flag.h"
#include "tools/subcommand.h"
#include "tools/user_path.h"

namespace dtensor {
namespace {

constexpr char kUsage[] =
    "usage: dtensor explain [--model llama] --config <name or JSON file> "
    "[--plan <plan file>]\n"
    "                       --mesh dp=64,tp=8 [--batch B] [--seq S] [--dtype "
    "bf16]\n"
    "                       [--bandwidth GBps,...] [--latency us,...] "
    "[--rank R]\n"
    "                       [--device-memory GiB|80GiB] [--json]\n"
    "Runs one training step (forward, backward, AdamW update) without data "
    "and prints\n"
    "per module the parameter and activation layouts and the collectives "
    "issued,\n"
    "totals per phase and step, memory per rank and warnings "
    "(docs/explain.md).\n"
    "  --model      llama (the only model, the default)\n"
    "  --config     tiny, 1b, 8b, 70b, 405b, or a JSON file of LlamaConfig "
    "fields\n"
    "  --plan       a plan file (parallel/plans/*.json; default\n"
    "               parallel/plans/tp_sp_fsdp.json, or tp_sp_fsdp_cp.json when "
    "the\n"
    "               mesh has a cp dim)\n"
    "  --mesh       mesh sizes: 4x2, or named: dp=4,tp=2\n"
    "  --batch      global batch (default: the dp mesh dim's size)\n"
    "  --seq        sequence length (default: the config's max_seq_len; a "
    "longer\n"
    "               one raises max_seq_len to it)\n"
    "  --dtype      parameter and activation dtype (default bf16; with a "
    "plan's\n"
    "               mixed_precision, the parameters' (masters') dtype, "
    "default f32)\n"
    "  --bandwidth  link bandwidth of each mesh dim in GB/s (default 87.7)\n"
    "  --latency    per-hop latency of each mesh dim in us (default 0.6)\n"
    "  --rank       whose view (default 0; rank 0 holds the largest shards)\n"
    "  --device-memory\n"
    "               one device's memory in GiB, or with a unit (B, KiB, MiB, "
    "GiB,\n"
    "               TiB: 80GiB) (each rank is one device): adds the\n"
    "               rank's peak against it, the headroom and whether it fits\n"
    "               (\"Memory per device\"; with --json the key "
    "\"memory_per_device\":\n"
    "               {\"capacity\",\"peak\",\"headroom\",\"fits\"}, bytes)\n"
    "  --json       print the report as one JSON object:\n"
    "               {\"model\",\"config\",\"mesh\",\"plan\",\"batch\",\"seq\","
    "\"dtype\",\"rank\",\n"
    "                \"mixed_precision\" (only with the plan key),\n"
    "                \"modules\":[{\"name\",\"type\",\"parameters\","
    "\"activations\",\"forward\",\"backward\"}],\n"
    "                \"totals\":{\"forward\",\"backward\",\"optimizer\","
    "\"step\"},\"memory_per_rank\",\"warnings\"}\n";

constexpr FlagSpec kFlags[] = {
    {"model"},       {"config"},  {"plan"},          {"mesh"},
    {"batch"},       {"seq"},     {"dtype"},         {"rank"},
    {"bandwidth"},   {"latency"}, {"device-memory"}, {"json", false},
    {"help", false},
};

absl::StatusOr<int64_t> PositiveInt(const std::string& text,
                                    absl::string_view flag, int64_t min) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " '", text, "' must be an integer >= ", min));
  }
  return value;
}

// --device-memory: a positive, finite number of GiB ("80"), or of a unit:
// "80GiB", "512MiB", "1TiB", "85899345920B" (binary units only: "80GB" is
// refused rather than read as either). As bytes.
absl::StatusOr<int64_t> DeviceMemoryBytes(const std::string& text) {
  constexpr std::pair<const char*, double> kUnits[] = {
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"MiB", 1024.0 * 1024},
      {"KiB", 1024.0},
      {"B", 1.0},
  };
  absl::string_view number = text;
  double unit = kUnits[1].second;  // A bare number is GiB.
  for (const auto& [suffix, bytes] : kUnits) {
    if (absl::ConsumeSuffix(&number, suffix)) {
      unit = bytes;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value > 0) ||
      !std::isfinite(value) || value * unit < 1 || value * unit > 9.0e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-memory '", text,
                     "' must be a positive number of GiB, or of B, KiB, "
                     "MiB, GiB or TiB written after it (80GiB)"));
  }
  return static_cast<int64_t>(std::llround(value * unit));
}

// The plan when --plan is not given: the shipped TP + SP + FSDP plan, with
// context parallelism when the mesh has a "cp" dim (a path from the
// repository's root).
absl::string_view DefaultPlanFile(const DeviceMesh& mesh) {
  return mesh.DimIndex("cp").ok() ? "parallel/plans/tp_sp_fsdp_cp.json"
                                  : "parallel/plans/tp_sp_fsdp.json";
}

absl::StatusOr<ExplainRequest> RequestFromArgs(const ParsedArgs& args) {
  DT_RETURN_IF_ERROR(args.CheckNoPositional());
  const std::string model = args.ValueOr("model", "llama");
  if (model != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model '", model, "' is not known (only llama)"));
  }
  DT_ASSIGN_OR_RETURN(std::string config_name, args.Required("config"));
  DT_ASSIGN_OR_RETURN(std::string mesh_text, args.Required("mesh"));
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, ParseMeshFlag(mesh_text));
  const std::string plan_name =
      args.ValueOr("plan", std::string(DefaultPlanFile(mesh)));
  DT_ASSIGN_OR_RETURN(nn::LlamaConfig config, LoadLlamaConfig(config_name));
  DT_ASSIGN_OR_RETURN(parallel::Plan plan,
                      parallel::LoadPlanFile(UserPath(plan_name)));
  ExplainRequest request{config_name, plan_name, config, plan, mesh};
  // Mixed precision keeps f32 masters and computes in its param_dtype.
  DT_ASSIGN_OR_RETURN(
      request.dtype,
      ParseDType(args.ValueOr("dtype", plan.mixed_precision ? "f32" : "bf16")));
  if (args.Has("bandwidth") || args.Has("latency")) {
    DT_ASSIGN_OR_RETURN(request.links, LinksFromFlags(args, request.mesh));
  }
  absl::StatusOr<int64_t> dp = request.mesh.DimIndex(request.plan.dp_dim);
  const int64_t default_batch = dp.ok() ? request.mesh.shape()[*dp] : 1;
  DT_ASSIGN_OR_RETURN(
      request.batch,
      PositiveInt(args.ValueOr("batch", absl::StrCat(default_batch)), "batch",
                  1));
  DT_ASSIGN_OR_RETURN(
      request.seq,
      PositiveInt(args.ValueOr("seq", absl::StrCat(request.config.max_seq_len)),
                  "seq", 1));
  // The step is modelled at the requested length: a run at that length sets
  // max_seq_len to it (it only sizes the rotary table), so a longer --seq
  // raises it, within the config's limit.
  if (request.seq > request.config.max_seq_len) {
    request.config.max_seq_len = request.seq;
    absl::Status valid = request.config.Validate();
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seq ", request.seq, ": ", valid.message()));
    }
  }
  return request;
}

// Prints the report of the step `args` describe on `out`.
absl::StatusOr<int> PrintReport(const ParsedArgs& args, std::ostream& out,
                                std::ostream& /*err*/) {
  DT_ASSIGN_OR_RETURN(ExplainRequest request, RequestFromArgs(args));
  DT_ASSIGN_OR_RETURN(int64_t rank,
                      PositiveInt(args.ValueOr("rank", "0"), "rank", 0));
  std::optional<int64_t> device_memory;
  if (args.Has("device-memory")) {
    DT_ASSIGN_OR_RETURN(device_memory,
                        DeviceMemoryBytes(args.ValueOr("device-memory", "")));
  }
  DT_ASSIGN_OR_RETURN(ExplainReport report, ExplainLlamaStep(request, rank));
  if (device_memory.has_value()) {
    report.device = DeviceFit{*device_memory, report.memory.total()};
  }
  out << (args.Has("json") ? ExplainJson(report) : ExplainText(report));
  return kExitOk;
}

}  // namespace

DT_DEFINE_SUBCOMMAND(RunExplainCommand, "explain", PrintReport)

}  // namespace dtensor
