// OpArgs: reads by key, the propagation key (kinds and attribute values, not
// kernel scalars), schema checks, and parsing named text values.
#include "dtensor/ops/op_args.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

constexpr ArgSpec kSchema[] = {{"dims", ArgKind::kInts, ""},
                               {"keepdim", ArgKind::kBool, "false"},
                               {"eps", ArgKind::kDouble, "1e-5"},
                               {"dim", ArgKind::kInt, nullptr},
                               {"other", ArgKind::kScalar, "1"}};
constexpr auto kDims = KeyOf<ArgKind::kInts>(kSchema, "dims");
constexpr auto kKeepdim = KeyOf<ArgKind::kBool>(kSchema, "keepdim");
constexpr auto kEps = KeyOf<ArgKind::kDouble>(kSchema, "eps");
constexpr auto kDim = KeyOf<ArgKind::kInt>(kSchema, "dim");
constexpr auto kOther = KeyOf<ArgKind::kScalar>(kSchema, "other");

// A key is the argument's position, found at compile time.
static_assert(kDims.index == 0 && kKeepdim.index == 1 && kEps.index == 2 &&
                  kDim.index == 3 && kOther.index == 4,
              "keys are schema positions");
// What a key needs to compile. A name the schema lacks, or a kind other than
// the argument's, is a compile error in KeyOf (it reaches a non-constexpr
// function in a constant expression), e.g. neither
//   constexpr auto kBad = KeyOf<ArgKind::kInts>(kSchema, "axis");
//   constexpr auto kBad = KeyOf<ArgKind::kInt>(kSchema, "dims");
// compiles; HasArg states the same conditions as values.
static_assert(HasArg(kSchema, "dims", ArgKind::kInts), "present");
static_assert(!HasArg(kSchema, "axis", ArgKind::kInts), "no such name");
static_assert(!HasArg(kSchema, "dims", ArgKind::kInt), "another kind");
static_assert(!HasArg(kSchema, "dim0", ArgKind::kInt), "a longer name");
static_assert(!HasArg(kSchema, "di", ArgKind::kInt), "a prefix");

OpArgs Make(std::vector<int64_t> dims, bool keepdim, double eps, int64_t dim,
            double other) {
  OpArgs args;
  args.AddInts(dims).AddBool(keepdim).AddDouble(eps).AddInt(dim).AddScalar(
      other);
  return args;
}

TEST(OpArgsTest, KeysReadWhatWasAdded) {
  const OpArgs args = Make({0, -1}, true, 0.25, 3, 2.5);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(
      std::vector<int64_t>(args.Get(kDims).begin(), args.Get(kDims).end()),
      (std::vector<int64_t>{0, -1}));
  EXPECT_TRUE(args.Get(kKeepdim));
  EXPECT_EQ(args.Get(kEps), 0.25);
  EXPECT_EQ(args.Get(kDim), 3);
  EXPECT_EQ(args.Get(kOther), 2.5);
  EXPECT_EQ(args.kind(4), ArgKind::kScalar);
  EXPECT_EQ(args.ToString(kSchema),
            "dims=[0, -1], keepdim=true, eps=0.25, dim=3, other=2.5");
  // Other values: empty dims, false, the smallest int64.
  const OpArgs other =
      Make({}, false, -1e300, std::numeric_limits<int64_t>::min(), -0.5);
  EXPECT_TRUE(other.Get(kDims).empty());
  EXPECT_FALSE(other.Get(kKeepdim));
  EXPECT_EQ(other.Get(kEps), -1e300);
  EXPECT_EQ(other.Get(kDim), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(other.Get(kOther), -0.5);
}

TEST(OpArgsTest, KeyIgnoresKernelScalarsOnly) {
  const absl::Hash<OpArgs> hash;
  const OpArgs a = Make({0}, false, 1e-5, 1, 2.0);
  const OpArgs b = Make({0}, false, 1e-5, 1, 7.0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(hash(a), hash(b));
  EXPECT_NE(a, Make({1}, false, 1e-5, 1, 2.0));
  EXPECT_NE(a, Make({0}, true, 1e-5, 1, 2.0));
  EXPECT_NE(a, Make({0}, false, 1e-6, 1, 2.0));
  EXPECT_NE(a, Make({0}, false, 1e-5, 2, 2.0));
  // Same words, other kinds or boundaries.
  OpArgs ints, two_ints;
  ints.AddInts({1, 2});
  two_ints.AddInt(1).AddInt(2);
  EXPECT_NE(ints, two_ints);
  EXPECT_NE(hash(ints), hash(two_ints));
  OpArgs with_scalar, without;
  with_scalar.AddInt(1).AddScalar(3);
  without.AddInt(1);
  EXPECT_NE(with_scalar, without);
}

TEST(OpArgsTest, CheckNamesTheMismatch) {
  EXPECT_TRUE(CheckOpArgs("op", kSchema, Make({}, false, 0, 0, 0)).ok());
  OpArgs short_args;
  short_args.AddInts({});
  absl::Status status = CheckOpArgs("op", kSchema, short_args);
  EXPECT_NE(status.message().find("takes 5 argument(s), got 1"),
            std::string::npos)
      << status;
  OpArgs wrong;
  wrong.AddInts({}).AddInt(1).AddDouble(0).AddInt(0).AddScalar(0);
  status = CheckOpArgs("op", kSchema, wrong);
  EXPECT_NE(status.message().find("keepdim) must be bool, got int"),
            std::string::npos)
      << status;
}

TEST(OpArgsTest, ParsesNamedValuesWithDefaults) {
  absl::StatusOr<OpArgs> args =
      ParseOpArgs("op", kSchema, {{"dims", "0, 2"}, {"dim", "-1"}});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, Make({0, 2}, false, 1e-5, -1, 1));
  EXPECT_EQ(args->Get(kOther), 1);
  args = ParseOpArgs(
      "op", kSchema,
      {{"dim", "4"}, {"keepdim", "true"}, {"other", "-2.5"}, {"dims", ""}});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->Get(kKeepdim));
  EXPECT_TRUE(args->Get(kDims).empty());
  EXPECT_EQ(args->Get(kOther), -2.5);
}

TEST(OpArgsTest, ParseErrorsNameTheArgument) {
  const std::map<std::string, std::map<std::string, std::string, std::less<>>>
      bad = {
          {"needs argument 'dim'", {}},
          {"has no argument 'axis'", {{"dim", "0"}, {"axis", "1"}}},
          {"dim='x' is not an integer", {{"dim", "x"}}},
          {"dims='0,a'", {{"dim", "0"}, {"dims", "0,a"}}},
          {"keepdim='maybe' is not true or false",
           {{"dim", "0"}, {"keepdim", "maybe"}}},
          {"other='1.5.2' is not a number", {{"dim", "0"}, {"other", "1.5.2"}}},
      };
  for (const auto& [message, named] : bad) {
    absl::StatusOr<OpArgs> args = ParseOpArgs("op", kSchema, named);
    ASSERT_FALSE(args.ok()) << message;
    EXPECT_NE(args.status().message().find(message), std::string::npos)
        << args.status();
  }
}

}  // namespace
}  // namespace dtensor
