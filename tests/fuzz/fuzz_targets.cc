#include "tests/fuzz/fuzz_targets.h"

#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dtensor/base/json_value.h"
#include "dtensor/parallel/checkpoint_metadata.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/placement.h"
#include "tools/commands.h"
#include "tools/explain_config.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace fuzz {
namespace {

// An error must say what is wrong.
template <typename T>
absl::Status CheckResult(const absl::StatusOr<T>& result) {
  if (result.ok() || !result.status().message().empty()) {
    return absl::OkStatus();
  }
  return absl::InternalError(
      absl::StrCat("error without a message: ", result.status().ToString()));
}

absl::Status FuzzPlacement(const std::string& input) {
  return CheckResult(ParsePlacement(input));
}

absl::Status FuzzMesh(const std::string& input) {
  return CheckResult(ParseMeshFlag(input));
}

absl::Status FuzzJson(const std::string& input) {
  return CheckResult(ParseJson(input));
}

absl::Status FuzzPlan(const std::string& input) {
  return CheckResult(parallel::ParsePlan(input));
}

absl::Status FuzzModelConfig(const std::string& input) {
  return CheckResult(ParseLlamaConfigJson(input));
}

absl::Status FuzzCheckpointMetadata(const std::string& input) {
  for (parallel::BlockCoverage coverage :
       {parallel::BlockCoverage::kWhole, parallel::BlockCoverage::kPart}) {
    absl::Status status = CheckResult(parallel::ParseMetadata(input, coverage));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

using SubcommandFn = int (*)(absl::Span<const std::string>, std::ostream&,
                             std::ostream&);

// Runs a subcommand on the argv in `input` (one argument per line).
absl::Status FuzzSubcommand(const char* command, SubcommandFn run,
                            const std::string& input) {
  const std::vector<std::string> args = absl::StrSplit(input, '\n');
  std::ostringstream out, err;
  const int status = run(args, out, err);
  const std::string error = err.str();
  if (status == 0 && error.empty()) return absl::OkStatus();
  const std::string prefix = absl::StrCat("dtensor ", command, ": ");
  if (status == 2 && absl::StartsWith(error, prefix) &&
      error.size() > prefix.size() + 1 &&
      error.find('\n') == error.size() - 1) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      "dtensor ", command, " exited ", status, " with stderr '", error, "'"));
}

absl::Status FuzzLayout(const std::string& input) {
  return FuzzSubcommand("layout", RunLayoutCommand, input);
}
absl::Status FuzzPlanCommand(const std::string& input) {
  return FuzzSubcommand("plan", RunPlanCommand, input);
}
absl::Status FuzzPropagate(const std::string& input) {
  return FuzzSubcommand("propagate", RunPropagateCommand, input);
}
absl::Status FuzzExplain(const std::string& input) {
  return FuzzSubcommand("explain", RunExplainCommand, input);
}

const std::vector<std::string> kJsonTokens = {
    "{",    "}",     "[",     "]", ":",       ",",   "\"",         "null",
    "true", "false", "1e999", "-", "\\u00e9", "\\n", "[[[[[[[[[[", "{\"a\":"};

std::vector<FuzzTarget> MakeTargets() {
  std::vector<FuzzTarget> targets;
  targets.push_back(
      {"placement",
       FuzzPlacement,
       {"R", "S(0)", "S(-1)", "P", "P(sum)", "P(max)", " S( 2 ) "},
       {"S(", "P(", "R", "avg", "min", "max", "sum", "product"}});
  targets.push_back({"mesh",
                     FuzzMesh,
                     {"4", "4x2", "dp=2,tp=2", "pp=2,dp=4,tp=8", "1x1x1"},
                     {"dp=", "tp=", "x", ",", "="}});
  targets.push_back({"json",
                     FuzzJson,
                     {"{}", "[1,2.5,-3e10,\"a\\u00e9\",true,false,null]",
                      "{\"a\":{\"b\":[{}]}}", "\"\\ud83d\\ude00\""},
                     kJsonTokens});
  std::vector<std::string> plan_tokens = kJsonTokens;
  for (const char* t :
       {"\"colwise\"", "\"rowwise\"", "\"sequence_parallel\"",
        "\"prepare_input\"", "\"loss_parallel\"", "\"fsdp\"", "\"replicate\"",
        "\"input_layouts\"", "\"output_layouts\"", "\"use_local_output\"",
        "\"layers.*.\"", "\"S(1)\"", "\"R\""}) {
    plan_tokens.push_back(t);
  }
  targets.push_back(
      {"plan",
       FuzzPlan,
       {"{\"tp_dim\":\"tp\",\"dp_dim\":\"dp\",\"tp\":{\"layers.*.attention."
        "wq\":"
        "\"colwise\",\"layers.*.attention.wo\":\"rowwise\",\"norm\":"
        "\"sequence_parallel\",\"output\":{\"style\":\"colwise\","
        "\"output_layouts\":\"R\",\"use_local_output\":false}},\"dp\":"
        "\"fsdp\"}",
        "{\"tp\":{\"tok_embeddings\":{\"style\":\"rowwise\",\"input_layouts\":"
        "\"R\",\"output_layouts\":\"S(1)\"},\"layers.*\":{\"style\":"
        "\"prepare_input\",\"input_layouts\":[\"S(1)\",null],"
        "\"desired_input_layouts\":[\"R\",null]}},\"dp\":\"replicate\"}"},
       plan_tokens});
  targets.push_back(
      {"model_config",
       FuzzModelConfig,
       {"{\"dim\":256,\"n_layers\":4,\"n_heads\":4,\"vocab_size\":256,"
        "\"max_seq_len\":128}",
        "{\"dim\":4096,\"n_layers\":32,\"n_heads\":32,\"n_kv_heads\":8,"
        "\"vocab_size\":128256,\"multiple_of\":1024,\"ffn_dim_multiplier\":1.3,"
        "\"norm_eps\":1e-5,\"rope_theta\":500000,\"max_seq_len\":8192,"
        "\"init_std\":0.02}"},
       {"\"dim\":", "\"n_layers\":", "\"n_heads\":", "\"n_kv_heads\":",
        "\"vocab_size\":", "\"multiple_of\":", "\"ffn_dim_multiplier\":",
        "\"max_seq_len\":", "\"norm_eps\":", "\"init_std\":", "1e-300"}});
  targets.push_back(
      {"checkpoint_metadata",
       FuzzCheckpointMetadata,
       {"{\"format\":\"dtensor-checkpoint\",\"version\":1,\"chunk_bytes\":64,"
        "\"tensors\":{\"w\":{\"dtype\":\"f32\",\"shape\":[4,5],\"mesh_shape\":"
        "[2],\"layout\":\"S(0)\",\"blocks\":[{\"file\":\"data_0.bin\","
        "\"file_offset\":0,\"offset\":[0,0],\"shape\":[2,5],\"crc32c\":[1]},"
        "{\"file\":\"data_1.bin\",\"file_offset\":0,\"offset\":[2,0],"
        "\"shape\":[2,5],\"crc32c\":[2]}]}}}"},
       {"\"blocks\":", "\"offset\":", "\"shape\":", "\"crc32c\":",
        "\"file_offset\":", "\"dtype\":\"bf16\"", "4611686018427387904"}});
  const std::vector<std::string> cli_tokens = {
      "--mesh",  "--shape",   "--placements", "--from",    "--to",
      "--json",  "--verify",  "--dtype",      "--help",    "--op",
      "--in",    "--arg",     "--config",     "--plan",    "--batch",
      "--seq",   "--rank",    "--bandwidth",  "--latency", "\n",
      "\n--",    "/dev/zero", "S(0)",         "R",         "P",
      "1000000", "dp=64,tp=8"};
  targets.push_back(
      {"cli_layout",
       FuzzLayout,
       {"--mesh\n4x2\n--shape\n18,2\n--placements\nS(0),S(0)",
        "--mesh=2x2\n--shape=9\n--placements\nS(-1)[1], S(0)[0]\n--json"},
       cli_tokens});
  targets.push_back(
      {"cli_plan",
       FuzzPlanCommand,
       {"--mesh\n2x2\n--shape\n8,8\n--from\nS(0),S(1)\n--to\nS(1),S(0)",
        "--mesh\n4\n--shape\n6,4\n--from\nP\n--to\nS(1)\n--json\n--verify"},
       cli_tokens});
  targets.push_back(
      {"cli_propagate",
       FuzzPropagate,
       {"--mesh\n4\n--op\nmm\n--in\n12x8:S(0)\n--in\n8x4:R\n--json",
        "--mesh\n2x2\n--op\nsum\n--in\n8x6:S(0),S(1)\n--arg\ndims=0\n--arg\n"
        "keepdim=true"},
       cli_tokens});
  targets.push_back(
      {"cli_explain",
       FuzzExplain,
       {"--config\ntiny\n--plan\nparallel/plans/tp_sp_fsdp.json\n--mesh\n"
        "dp=2,tp=2\n--batch\n2\n--seq\n16",
        "--config\ntiny\n--plan\nparallel/plans/tp_dp.json\n--mesh\ndp=1,tp=4"
        "\n--seq\n8\n--json"},
       cli_tokens});
  return targets;
}

}  // namespace

absl::Span<const FuzzTarget> FuzzTargets() {
  static const std::vector<FuzzTarget>* targets =
      new std::vector<FuzzTarget>(MakeTargets());
  return *targets;
}

}  // namespace fuzz
}  // namespace dtensor
