
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/json_text.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"
#include "nlohmann/json.hpp"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/link_flags.h"
#include "tools/step_json.h"
#include "tools/subcommand.h"
#include "tools/tensor_flags.h"

namespace dtensor {
namespace {

constexpr char kUsage[] =
    "usage: dtensor plan --mesh 2x2 --shape 8,8 [--dtype f32] --from "
    "\"S(0),S(1)\" --to \"S(1),S(0)\"\n"
    "                    [--bandwidth GBps,...] [--latency us,...] [--verify] "
    "[--json]\n"
    "  --mesh       mesh sizes: 4x2, or named: dp=4,tp=2\n"
    "  --shape      global tensor shape, sizes separated by ','\n"
    "  --from/--to  one placement per mesh dim: R, S(dim), S(dim)[k], P, "
    "P(sum|avg|max|min)\n"
    "  --bandwidth  link bandwidth of each mesh dim in GB/s (default 87.7)\n"
    "  --latency    per-hop latency of each mesh dim in us (default 0.6)\n"
    "  --verify     run the plan on in-process ranks and check every shard\n"
    "  --json       print the plan as one JSON object\n";

constexpr FlagSpec kFlags[] = {
    {"mesh"},        {"shape"},       {"dtype"},   {"from"},
    {"to"},          {"bandwidth"},   {"latency"}, {"verify", false},
    {"json", false}, {"help", false},
};

// In-process verification runs one thread per rank and holds the full
// tensor (and each rank's copy of its block) in memory.
constexpr int64_t kMaxVerifyRanks = 64;
constexpr int64_t kMaxVerifyElements = int64_t{1} << 22;

// What the command plans.
struct PlanRequest {
  DeviceMesh mesh;
  std::vector<int64_t> shape;
  DType dtype;
  Sharding from;
  Sharding to;
  std::vector<MeshDimLink> links;
};

absl::StatusOr<PlanRequest> RequestFromArgs(const ParsedArgs& args) {
  DT_RETURN_IF_ERROR(args.CheckNoPositional());
  DT_ASSIGN_OR_RETURN(TensorFlags flags,
                      ParseTensorFlags(args, {"from", "to"}));
  const int64_t rank = static_cast<int64_t>(flags.shape.size());
  DT_ASSIGN_OR_RETURN(Sharding from, Sharding::Parse(flags.required[0], rank));
  DT_ASSIGN_OR_RETURN(Sharding to, Sharding::Parse(flags.required[1], rank));
  DT_ASSIGN_OR_RETURN(std::vector<MeshDimLink> links,
                      LinksFromFlags(args, flags.mesh));
  return PlanRequest{
      std::move(flags.mesh), std::move(flags.shape), flags.dtype, from, to,
      std::move(links)};
}

// Deterministic values exact in every dtype (small integers).
absl::StatusOr<Tensor> VerificationData(const PlanRequest& request) {
  DT_ASSIGN_OR_RETURN(Tensor values, Tensor::Zeros(request.shape, DType::kF64));
  double* data = values.data<double>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    data[i] = request.dtype == DType::kBool
                  ? (i * 7 % 3 == 0)
                  : static_cast<double>(i * 37 % 19) - 9;
  }
  return values.To(request.dtype);
}

// Runs the redistribution on in-process ranks; an error names the first rank
// whose result is not its block of the full tensor.
absl::Status Verify(const PlanRequest& request) {
  if (request.mesh.size() > kMaxVerifyRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--verify runs one thread per rank: mesh ", request.mesh.ToString(),
        " has more than ", kMaxVerifyRanks));
  }
  // Capped while multiplying, so that it cannot overflow.
  int64_t elements = 1;
  for (int64_t size : request.shape) {
    elements = std::min(elements * std::min(size, kMaxVerifyElements + 1),
                        kMaxVerifyElements + 1);
  }
  if (elements > kMaxVerifyElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("--verify holds the whole tensor in memory: shape [",
                     absl::StrJoin(request.shape, ","), "] has more than ",
                     kMaxVerifyElements, " elements"));
  }
  DT_ASSIGN_OR_RETURN(Tensor full, VerificationData(request));
  LocalCluster cluster(request.mesh.size());
  return cluster.Run([&](ProcessGroups& groups) -> absl::Status {
    auto runtime = Runtime::ForRank(groups);
    DT_RETURN_IF_ERROR(runtime->SetLinks(request.mesh, request.links));
    DT_ASSIGN_OR_RETURN(DTensor x,
                        DTensor::Distribute(runtime, full, request.mesh,
                                            request.from.placements(),
                                            request.from.shard_order()));
    DT_ASSIGN_OR_RETURN(DTensor y, x.Redistribute(request.to));
    // A Partial result is checked through its reduction.
    DT_ASSIGN_OR_RETURN(Tensor result, y.FullTensor());
    DT_ASSIGN_OR_RETURN(ShardBlock block, y.LocalBlock());
    Tensor expected = full;
    bool partial = false;
    for (const Placement& p : request.to.placements()) {
      partial |= p.is_partial();
    }
    if (!partial) {
      result = y.ToLocal();
      for (int64_t d = 0; d < expected.dim(); ++d) {
        DT_ASSIGN_OR_RETURN(
            expected, expected.Narrow(d, block.offset[d], block.shape[d]));
      }
    }
    if (!AllClose(result, expected, 1e-6, 1e-6)) {
      return absl::InternalError(absl::StrCat(
          "rank ", groups.rank(), " holds a wrong shard after the plan"));
    }
    return absl::OkStatus();
  });
}

std::string PlanJson(const RedistributePlan& plan,
                     const absl::Status* verified) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const RedistributeStep& step : plan.steps) {
    steps.push_back(StepJson(step));
  }
  nlohmann::ordered_json json = {
      {"steps", std::move(steps)},
      {"total_cost_us", JsonNumber(plan.total_cost_us)},
      {"collectives", plan.num_collectives()}};
  if (verified != nullptr) json["verified"] = verified->ok();
  return DumpJson(json) + "\n";
}

std::string PlanText(const PlanRequest& request, const RedistributePlan& plan,
                     const absl::Status* verified) {
  std::string text = absl::StrCat(
      "mesh ", absl::StrJoin(request.mesh.shape(), "x"), ", shape [",
      absl::StrJoin(request.shape, ", "), "], dtype ",
      std::string(DTypeName(request.dtype)), ": ", request.from.ToString(),
      " -> ", request.to.ToString(), "\n");
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const RedistributeStep& step = plan.steps[i];
    absl::StrAppendFormat(
        &text,
        "%d. %-14s mesh dims [%s]  tensor dims [%s]  -> %s  %s bytes/rank  "
        "%.3f us\n",
        i + 1, CommKindName(step.kind), absl::StrJoin(step.mesh_dims, ","),
        absl::StrJoin(step.tensor_dims, ","), step.after.ToString(),
        DumpJson(JsonNumber(step.bytes_per_rank)), step.cost_us);
  }
  absl::StrAppendFormat(&text, "total %.3f us, %d collective(s)\n",
                        plan.total_cost_us, plan.num_collectives());
  if (verified != nullptr) {
    absl::StrAppend(
        &text,
        verified->ok()
            ? "verified on in-process ranks: every shard "
              "matches the reference\n"
            : absl::StrCat("VERIFICATION FAILED: ", verified->message(), "\n"));
  }
  return text;
}

// Prints the plan `args` ask for on `out`, verified with --verify: 1, after a
// line on `err`, when the verification fails.
absl::StatusOr<int> PrintPlan(const ParsedArgs& args, std::ostream& out,
                              std::ostream& err) {
  DT_ASSIGN_OR_RETURN(PlanRequest request, RequestFromArgs(args));
  absl::StatusOr<CostModel> model = CostModel::Create(request.links);
  DT_ASSIGN_OR_RETURN(
      RedistributePlan plan,
      PlanRedistribution(request.from, request.to, request.mesh.shape(),
                         request.shape, request.dtype, *model));
  absl::Status verified;
  const bool verify = args.Has("verify");
  if (verify) verified = Verify(request);
  if (verify && absl::IsInvalidArgument(verified)) return verified;
  out << (args.Has("json")
              ? PlanJson(plan, verify ? &verified : nullptr)
              : PlanText(request, plan, verify ? &verified : nullptr));
  if (verify && !verified.ok()) {
    err << "dtensor plan: verification failed: " << verified.message() << "\n";
    return 1;
  }
  return kExitOk;
}

}  // namespace

DT_DEFINE_SUBCOMMAND(RunPlanCommand, "plan", PrintPlan)

}  // namespace dtensor
