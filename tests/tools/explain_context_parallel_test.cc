// `dtensor explain` of a context-parallel step (issue 28): the issue's
// command without --plan picks the shipped tp_sp_fsdp_cp plan, a --seq longer
// than the config's max_seq_len is modelled at that length, and the ring's
// permute bytes per layer match the hand derivation.
//
// Ring attention (dtensor/ops/ring_attention.h): each of the cp ranks holds
// seq/cp positions of every sequence and passes its key and value blocks on
// cp - 1 times in forward, so rank 0's forward permute bytes per layer are
//
//   2 (keys, values) * (cp - 1) * batch/dp * kv_heads/tp * seq/cp * head_dim
//     * element size
//
// (the batch split over dp, the kv heads over tp by the colwise wk and wv).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "gtest/gtest.h"
#include "tools/commands.h"
#include "tools/subcommand.h"

namespace dtensor {
namespace {

struct Step {
  int64_t dp, cp, tp, batch, seq, kv_heads, head_dim;
};

// The hand derivation above, bf16.
double RingBytesPerLayer(const Step& s) {
  return 2.0 * (s.cp - 1) * (s.batch / s.dp) * (s.kv_heads / s.tp) *
         (s.seq / s.cp) * s.head_dim * 2;
}

JsonValue ExplainJson(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = RunExplainCommand(args, out, err);
  EXPECT_EQ(status, 0) << err.str();
  absl::StatusOr<JsonValue> json = ParseJson(out.str());
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *std::move(json) : JsonValue();
}

// The bytes (in all) and count of `module`'s forward permutes over mesh dim
// `cp_dim`.
std::pair<double, int64_t> ForwardPermutes(const JsonValue& report,
                                           const std::string& module,
                                           int64_t cp_dim) {
  double bytes = 0;
  int64_t count = 0;
  for (const JsonValue& m : report.Find("modules")->items()) {
    if (m.Find("name")->string_value() != module) continue;
    for (const JsonValue& c : m.Find("forward")->items()) {
      const std::vector<JsonValue>& dims = c.Find("mesh_dims")->items();
      if (c.Find("kind")->string_value() == "permute" && dims.size() == 1 &&
          dims[0].number_value() == cp_dim) {
        // bytes_per_rank is per collective.
        const double n = c.Find("count")->number_value();
        bytes += n * c.Find("bytes_per_rank")->number_value();
        count += static_cast<int64_t>(n);
      }
    }
  }
  return {bytes, count};
}

void ExpectRing(const JsonValue& report, const Step& s) {
  ASSERT_NE(report.Find("memory_per_rank"), nullptr);
  EXPECT_EQ(report.Find("plan")->string_value(),
            "parallel/plans/tp_sp_fsdp_cp.json");
  EXPECT_EQ(report.Find("seq")->number_value(), s.seq);
  for (const char* layer : {"layers.0.attention", "layers.1.attention"}) {
    SCOPED_TRACE(layer);
    const auto [bytes, count] = ForwardPermutes(report, layer, 1);
    EXPECT_EQ(count, 2 * (s.cp - 1));
    EXPECT_DOUBLE_EQ(bytes, RingBytesPerLayer(s));
  }
}

TEST(ExplainContextParallelTest, TinyRingBytesMatchTheDerivation) {
  // seq 512 is above tiny's max_seq_len of 128.
  const JsonValue report =
      ExplainJson({"--config", "tiny", "--mesh", "dp=2,cp=4,tp=2", "--seq",
                   "512", "--json"});
  ExpectRing(report, {2, 4, 2, 2, 512, 4, 32});
}

TEST(ExplainContextParallelTest, TheIssuesCommand) {
  // 70b: 8 kv heads of 128; batch defaults to dp.
  const JsonValue report =
      ExplainJson({"--config", "70b", "--mesh", "dp=8,cp=8,tp=8", "--seq",
                   "131072", "--json"});
  ExpectRing(report, {8, 8, 8, 8, 131072, 8, 128});
  // 56 MiB per layer.
  EXPECT_EQ(RingBytesPerLayer({8, 8, 8, 8, 131072, 8, 128}),
            56.0 * 1024 * 1024);
  EXPECT_GT(report.Find("memory_per_rank")->Find("total")->number_value(), 0);
}

}  // namespace
}  // namespace dtensor
