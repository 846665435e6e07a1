#include "tools/tensor_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tools/arg_parser.h"

namespace dtensor {
namespace {

constexpr FlagSpec kFlags[] = {
    {"mesh"}, {"shape"}, {"dtype"}, {"from"}, {"to"}};

// ParseTensorFlags(args, {"from", "to"})'s error, or "" when it succeeds.
std::string ErrorOf(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) return "ParseArgs failed";
  absl::StatusOr<TensorFlags> flags = ParseTensorFlags(*parsed, {"from", "to"});
  return flags.ok() ? "" : std::string(flags.status().message());
}

TEST(TensorFlagsTest, ValuesAndDefaultDType) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs({"--mesh", "dp=4,tp=2", "--shape", "18,2", "--from", "S(0),R",
                 "--to", "R,R"},
                kFlags);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<TensorFlags> flags = ParseTensorFlags(*parsed, {"to", "from"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->mesh.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(flags->shape, (std::vector<int64_t>{18, 2}));
  EXPECT_EQ(flags->dtype, DType::kF32);
  EXPECT_EQ(flags->required, (std::vector<std::string>{"R,R", "S(0),R"}));
}

// Every missing flag comes before any malformed one; then --mesh, --shape,
// --dtype, in that order.
TEST(TensorFlagsTest, MissingFlagsFirstThenMeshShapeDType) {
  EXPECT_EQ(ErrorOf({"--mesh", "x", "--shape", "a", "--dtype", "f8"}),
            "missing --from");
  EXPECT_EQ(ErrorOf({"--from", "R", "--to", "R"}), "missing --mesh");
  EXPECT_EQ(ErrorOf({"--mesh", "x", "--from", "R", "--to", "R"}),
            "missing --shape");
  EXPECT_EQ(ErrorOf({"--mesh", "2", "--shape", "8", "--from", "R"}),
            "missing --to");
  EXPECT_NE(ErrorOf({"--mesh", "2y2", "--shape", "a", "--dtype", "f8", "--from",
                     "R", "--to", "R"})
                .find("--mesh '2y2'"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--mesh", "2", "--shape", "a", "--dtype", "f8", "--from",
                     "R", "--to", "R"})
                .find("--shape 'a'"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--mesh", "2", "--shape", "8", "--dtype", "f8", "--from",
                     "R", "--to", "R"})
                .find("f8"),
            std::string::npos);
  EXPECT_EQ(
      ErrorOf({"--mesh", "2", "--shape", "8", "--from", "Q", "--to", "Q"}), "");
}

}  // namespace
}  // namespace dtensor
