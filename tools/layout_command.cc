
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/json_text.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/sharding.h"
#include "dtensor/tensor/dtype.h"
#include "nlohmann/json.hpp"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/shard_picture.h"
#include "tools/subcommand.h"
#include "tools/tensor_flags.h"

namespace dtensor {
namespace {

constexpr char kUsage[] =
    "usage: dtensor layout --mesh 4x2 --shape 18,2 --placements \"S(0),S(0)\" "
    "[--dtype f32] [--json]\n"
    "  --mesh        mesh sizes separated by 'x' (ranks 0..N-1, row-major)\n"
    "  --shape       global tensor shape, sizes separated by ','\n"
    "  --placements  one placement per mesh dim: R, S(dim), P, P(sum|avg|max|"
    "min);\n"
    "                S(dim)[k] puts the mesh dim at nesting position k "
    "(0 = outermost)\n"
    "  --dtype       element type (f32, f64, bf16, f16, i32, i64, bool)\n"
    "  --json        print the per-rank blocks as one JSON object\n";

constexpr FlagSpec kFlags[] = {
    {"mesh"},  {"shape"},       {"placements"},
    {"dtype"}, {"json", false}, {"help", false},
};

// "[3, 2]".
std::string IntList(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

absl::StatusOr<DTensorSpec> SpecFromArgs(const ParsedArgs& args) {
  DT_RETURN_IF_ERROR(args.CheckNoPositional());
  DT_ASSIGN_OR_RETURN(TensorFlags flags,
                      ParseTensorFlags(args, {"placements"}));
  DT_ASSIGN_OR_RETURN(
      Sharding sharding,
      Sharding::Parse(flags.required[0],
                      static_cast<int64_t>(flags.shape.size())));
  return DTensorSpec::Create(std::move(flags.mesh), sharding,
                             std::move(flags.shape), flags.dtype);
}

// One row per rank, row-major over the mesh.
struct RankRow {
  int64_t rank;
  std::vector<int64_t> coord;
  ShardBlock block;
  int64_t replica;
};

absl::StatusOr<std::vector<RankRow>> RankRows(const DTensorSpec& spec) {
  std::vector<RankRow> rows;
  for (int64_t rank : spec.mesh().Ranks()) {
    RankRow row{rank, {}, {}, 0};
    DT_ASSIGN_OR_RETURN(row.coord, spec.mesh().CoordinateOf(rank));
    DT_ASSIGN_OR_RETURN(row.block, spec.BlockAt(row.coord));
    DT_ASSIGN_OR_RETURN(row.replica, spec.ReplicaIndexOf(rank));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string LayoutJson(const DTensorSpec& spec,
                       const std::vector<RankRow>& rows) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const RankRow& row : rows) {
    ranks.push_back({{"rank", row.rank},
                     {"coord", row.coord},
                     {"local_shape", row.block.shape},
                     {"global_offset", row.block.offset}});
  }
  const nlohmann::ordered_json json = {
      {"mesh", spec.mesh().shape()},
      {"shape", spec.shape()},
      {"placements", spec.sharding().ToString()},
      {"ranks", std::move(ranks)}};
  return DumpJson(json) + "\n";
}

// Columns padded to their widest cell, separated by two spaces.
std::string LayoutTable(const std::vector<RankRow>& rows) {
  std::vector<std::vector<std::string>> cells = {
      {"rank", "coord", "local_shape", "global_offset", "replica"}};
  for (const RankRow& row : rows) {
    cells.push_back({absl::StrCat(row.rank), IntList(row.coord),
                     IntList(row.block.shape), IntList(row.block.offset),
                     absl::StrCat(row.replica)});
  }
  std::vector<size_t> widths(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) {
      widths[c] = std::max(widths[c], line[c].size());
    }
  }
  std::string table;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      absl::StrAppend(&text, line[c],
                      std::string(widths[c] - line[c].size() + 2, ' '));
    }
    text.erase(text.find_last_not_of(' ') + 1);
    absl::StrAppend(&table, text, "\n");
  }
  return table;
}

absl::StatusOr<std::string> LayoutText(const DTensorSpec& spec,
                                       const std::vector<RankRow>& rows) {
  std::string text = absl::StrCat(
      "mesh ", absl::StrJoin(spec.mesh().shape(), "x"), ", shape ",
      IntList(spec.shape()), ", dtype ", std::string(DTypeName(spec.dtype())),
      ", placements ", spec.sharding().ToString(), "\n\n", LayoutTable(rows));
  if (spec.ndim() == 1 || spec.ndim() == 2) {
    DT_ASSIGN_OR_RETURN(std::string picture, DrawShardPicture(spec));
    absl::StrAppend(&text, "\n", picture);
  }
  return text;
}

// Prints the layout `args` describe on `out`.
absl::StatusOr<int> PrintLayout(const ParsedArgs& args, std::ostream& out,
                                std::ostream& /*err*/) {
  DT_ASSIGN_OR_RETURN(DTensorSpec spec, SpecFromArgs(args));
  DT_ASSIGN_OR_RETURN(std::vector<RankRow> rows, RankRows(spec));
  if (args.Has("json")) {
    out << LayoutJson(spec, rows);
  } else {
    DT_ASSIGN_OR_RETURN(std::string text, LayoutText(spec, rows));
    out << text;
  }
  return kExitOk;
}

}  // namespace

DT_DEFINE_SUBCOMMAND(RunLayoutCommand, "layout", PrintLayout)

}  // namespace dtensor
