// ExplainJson on a report made by hand, read back with ParseJson: every
// field's value, names and warnings that need escapes, and a non-finite time
// as null. (explain_command_test checks a real report's totals.)
#include "tools/explain_format.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/base/json_value.h"
#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"
#include "tools/explain.h"

namespace dtensor {
namespace {

// Quotes, backslash, control characters and non-ASCII UTF-8 (é, U+1F600).
constexpr char kOddName[] =
    "my \"model\" \\ \n\t\x01 \xC3\xA9 \xF0\x9F\x98\x80";

ExplainReport HandMadeReport() {
  ExplainReport r{{kOddName,
                   "plans/tp.json",
                   {},
                   {},
                   DeviceMesh::Create({2, 4}, {"dp", "tp"}).value()}};
  r.request.batch = 8;
  r.request.seq = 16;
  r.request.dtype = DType::kBF16;
  r.rank = 3;
  ModuleReport m;
  m.name = "layers.0.w\xC3\xA9";
  m.type = "Linear";
  m.parameters.push_back(
      {"layers.0.w.weight", {{64, 32}, DType::kF32, "S(0)", {16, 32}}});
  m.output = TensorLayout{{8, 16, 64}, DType::kBF16, "S(0),S(2)", {4, 16, 16}};
  m.forward.push_back({CommKind::kAllGather, {1}, 1536, 2.5, 3});
  m.backward.push_back({CommKind::kReduceScatter,
                        {0, 1},
                        0.5,
                        std::numeric_limits<double>::infinity(),
                        1});
  r.modules.push_back(m);
  r.step.collectives = 4;
  r.step.bytes_per_rank = 4608.5;
  r.step.time_us = std::numeric_limits<double>::quiet_NaN();
  r.memory.parameters = int64_t{1} << 40;
  r.warnings = {kOddName, "plain"};
  return r;
}

const JsonValue& At(const JsonValue& object, const char* key) {
  static const JsonValue kMissing;
  const JsonValue* value = object.Find(key);
  EXPECT_NE(value, nullptr) << key;
  return value != nullptr ? *value : kMissing;
}

std::vector<std::string> Keys(const JsonValue& object) {
  std::vector<std::string> keys;
  for (const JsonValue::Member& member : object.members()) {
    keys.push_back(member.first);
  }
  return keys;
}

TEST(ExplainJsonTest, ReadsBackWithEveryValue) {
  const std::string text = ExplainJson(HandMadeReport());
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
  absl::StatusOr<JsonValue> json = ParseJson(text);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << text;
  EXPECT_EQ(Keys(*json),
            (std::vector<std::string>{
                "model", "config", "mesh", "plan", "batch", "seq", "dtype",
                "rank", "modules", "totals", "memory_per_rank", "warnings"}));
  EXPECT_EQ(At(*json, "model").string_value(), "llama");
  EXPECT_EQ(At(*json, "config").string_value(), kOddName);
  EXPECT_EQ(At(At(*json, "mesh"), "dim_names").items()[1].string_value(), "tp");
  EXPECT_EQ(At(At(*json, "mesh"), "shape").items()[1].number_value(), 4);
  EXPECT_EQ(At(*json, "rank").number_value(), 3);
  EXPECT_EQ(At(*json, "warnings").items()[0].string_value(), kOddName);

  ASSERT_EQ(At(*json, "modules").items().size(), 1u);
  const JsonValue& m = At(*json, "modules").items()[0];
  EXPECT_EQ(At(m, "name").string_value(), "layers.0.w\xC3\xA9");
  const JsonValue& param = At(m, "parameters").items()[0];
  EXPECT_EQ(Keys(param), (std::vector<std::string>{"name", "shape", "dtype",
                                                   "layout", "local_shape"}));
  EXPECT_EQ(At(param, "dtype").string_value(), "f32");
  EXPECT_EQ(At(param, "local_shape").items()[0].number_value(), 16);
  EXPECT_TRUE(At(At(m, "activations"), "input").is_null());
  EXPECT_EQ(At(At(At(m, "activations"), "output"), "layout").string_value(),
            "S(0),S(2)");
  const JsonValue& gather = At(m, "forward").items()[0];
  EXPECT_EQ(At(gather, "kind").string_value(), "all_gather");
  EXPECT_EQ(At(gather, "bytes_per_rank").number_value(), 1536);
  EXPECT_EQ(At(gather, "time_us").number_value(), 2.5);
  EXPECT_EQ(At(gather, "count").number_value(), 3);
  const JsonValue& scatter = At(m, "backward").items()[0];
  EXPECT_EQ(At(scatter, "bytes_per_rank").number_value(), 0.5);
  EXPECT_TRUE(At(scatter, "time_us").is_null());

  const JsonValue& step = At(At(*json, "totals"), "step");
  EXPECT_EQ(At(step, "collectives").number_value(), 4);
  EXPECT_EQ(At(step, "bytes_per_rank").number_value(), 4608.5);
  EXPECT_TRUE(At(step, "time_us").is_null());
  EXPECT_EQ(
      Keys(At(step, "by_kind")),
      (std::vector<std::string>{"all_gather", "all_reduce", "reduce_scatter",
                                "all_to_all", "permute"}));
  const JsonValue& memory = At(*json, "memory_per_rank");
  EXPECT_EQ(At(memory, "parameters").number_value(), 1099511627776.0);
  EXPECT_EQ(At(memory, "total").number_value(), 1099511627776.0);
}

TEST(ExplainJsonTest, DeviceMemoryIsAKeyBeforeTheWarnings) {
  ExplainReport r = HandMadeReport();
  r.device = DeviceFit{int64_t{80} << 30, (int64_t{80} << 30) + 1024};
  absl::StatusOr<JsonValue> json = ParseJson(ExplainJson(r));
  ASSERT_TRUE(json.ok()) << json.status();
  const std::vector<std::string> keys = Keys(*json);
  ASSERT_EQ(keys.size(), 13u);
  EXPECT_EQ(keys[11], "memory_per_device");
  EXPECT_EQ(keys[12], "warnings");
  const JsonValue& device = At(*json, "memory_per_device");
  EXPECT_EQ(Keys(device),
            (std::vector<std::string>{"capacity", "peak", "headroom", "fits"}));
  EXPECT_EQ(At(device, "capacity").number_value(), 85899345920.0);
  EXPECT_EQ(At(device, "peak").number_value(), 85899345920.0 + 1024);
  EXPECT_EQ(At(device, "headroom").number_value(), -1024);
  EXPECT_FALSE(At(device, "fits").bool_value());
}

TEST(ExplainTextTest, DeviceMemoryLinesOnlyWithACapacity) {
  ExplainReport r = HandMadeReport();
  EXPECT_EQ(ExplainText(r).find("Memory per device"), std::string::npos);
  r.device = DeviceFit{int64_t{80} << 30, int64_t{20} << 30};
  const std::string text = ExplainText(r);
  for (const char* line :
       {"Memory per device (one device per rank; rank 3's peak",
        "  capacity             80.00 GiB\n",
        "  peak                 20.00 GiB  (25.0% of capacity)\n",
        "  headroom             60.00 GiB\n",
        "  fits                       yes\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  r.device->peak = int64_t{81} << 30;
  EXPECT_NE(ExplainText(r).find("  headroom             -1.00 GiB\n"),
            std::string::npos)
      << ExplainText(r);
}

}  // namespace
}  // namespace dtensor
