// `dtensor explain` on a mesh with a dim of size 1 (dp=2,pp=1,tp=2): the
// report is that of the mesh without it (dp=2,tp=2), once the size-1 dim is
// taken out of the mesh, the layouts and the collectives' mesh dims. The
// reference is the report of the mesh without it.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "dtensor/sharding.h"
#include "gtest/gtest.h"
#include "tests/tools/json_compare.h"
#include "tools/explain.h"
#include "tools/explain_config.h"
#include "tools/explain_format.h"
#include "tools/mesh_flag.h"

namespace dtensor {
namespace {

std::vector<std::string> ShippedPlanPaths() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string dir =
      absl::StrCat(srcdir == nullptr ? "." : srcdir, "/dtensor/parallel/plans");
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

ExplainRequest Request(const std::string& plan_path, const std::string& mesh) {
  nn::LlamaConfig config = LoadLlamaConfig("tiny").value();
  config.n_layers = 2;
  // Uneven shards too: 3 kv heads of 4 on tp=2, a 255-token vocabulary.
  config.vocab_size = 255;
  ExplainRequest request{"tiny", plan_path, config,
                         parallel::LoadPlanFile(plan_path).value(),
                         ParseMeshFlag(mesh).value()};
  request.batch = 2;
  request.seq = 16;
  return request;
}

// Mesh dim m of the mesh with the unit dim, on the mesh without it (unit < 0:
// a mesh without one).
int64_t WithoutUnit(int64_t m, int64_t unit) {
  return unit >= 0 && m > unit ? m - 1 : m;
}

// "S(0)[1],R,S(0)[0]" on the mesh with the unit dim as the mesh without it
// writes it: the unit dim's placement dropped, the other mesh dims renumbered
// in every shard order.
std::string LayoutWithoutUnit(const std::string& text, int64_t tensor_rank,
                              int64_t unit) {
  const Sharding with = Sharding::Parse(text, tensor_rank).value();
  std::vector<Placement> placements;
  for (int64_t m = 0; m < with.mesh_ndim(); ++m) {
    if (m != unit) placements.push_back(with.placement(m));
  }
  ShardOrder order;
  for (int64_t d = 0; d < tensor_rank; ++d) {
    order.emplace_back();
    for (int64_t m : with.MeshDimsSharding(d)) {
      if (m != unit) order.back().push_back(WithoutUnit(m, unit));
    }
  }
  return Sharding::FromPlacements(placements, tensor_rank, order)
      .value()
      .ToString();
}

// `value` (of member `key`) with the mesh dim `unit` taken out. The warnings
// (which name layouts and mesh dims in text) are left out; the test compares
// their number.
JsonValue DropUnitDim(const JsonValue& value, const std::string& key,
                      int64_t unit) {
  if (value.is_array()) {
    std::vector<JsonValue> items;
    for (size_t i = 0; i < value.items().size(); ++i) {
      const JsonValue& item = value.items()[i];
      if (key == "mesh_dims") {
        if (item.number_value() == unit) continue;
        items.push_back(JsonValue::Number(static_cast<double>(
            WithoutUnit(static_cast<int64_t>(item.number_value()), unit))));
      } else if (key == "mesh.shape" || key == "mesh.dim_names") {
        if (static_cast<int64_t>(i) != unit) items.push_back(item);
      } else {
        items.push_back(DropUnitDim(item, "", unit));
      }
    }
    return JsonValue::Array(std::move(items));
  }
  if (!value.is_object()) return value;
  std::vector<JsonValue::Member> members;
  for (const auto& [name, member] : value.members()) {
    if (name == "warnings") continue;
    if (name == "layout" && member.is_string()) {
      const int64_t rank = value.Find("shape")->items().size();
      members.push_back({name, JsonValue::String(LayoutWithoutUnit(
                                   member.string_value(), rank, unit))});
    } else {
      members.push_back(
          {name, DropUnitDim(member,
                             key == "" && name == "mesh"
                                 ? "mesh"
                                 : (key == "mesh" ? "mesh." + name : name),
                             unit)});
    }
  }
  return JsonValue::Object(std::move(members));
}

TEST(ExplainUnitDimsTest, AUnitMeshDimChangesNothingForEveryShippedPlan) {
  for (const std::string& path : ShippedPlanPaths()) {
    // A context-parallel plan needs its cp mesh dim.
    const bool cp = absl::StrContains(path, "_cp.");
    const int64_t unit = cp ? 2 : 1;
    for (int64_t rank : {0, 3}) {
      SCOPED_TRACE(absl::StrCat(path, " rank ", rank));
      absl::StatusOr<ExplainReport> with = ExplainLlamaStep(
          Request(path, cp ? "dp=2,cp=2,pp=1,tp=2" : "dp=2,pp=1,tp=2"), rank);
      absl::StatusOr<ExplainReport> without = ExplainLlamaStep(
          Request(path, cp ? "dp=2,cp=2,tp=2" : "dp=2,tp=2"), rank);
      ASSERT_TRUE(with.ok()) << with.status();
      ASSERT_TRUE(without.ok()) << without.status();
      EXPECT_EQ(with->warnings.size(), without->warnings.size());
      ExpectSameJson(
          DropUnitDim(ParseJson(ExplainJson(*with)).value(), "", unit),
          DropUnitDim(ParseJson(ExplainJson(*without)).value(), "", -1), "");
    }
  }
}

}  // namespace
}  // namespace dtensor
