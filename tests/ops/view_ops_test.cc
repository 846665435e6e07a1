// The shape ops on DTensors (view, reshape, flatten, unflatten, squeeze,
// unsqueeze, transpose, permute, expand): randomized property tests (random
// meshes, even and uneven shards, nested orders, Partial inputs, random
// regroupings of dims) against the tensor layer on the gathered inputs,
// under random layouts and under every strategy the ops offer; and the
// merge / split rules users expect, with communication counted.
#include "dtensor/ops/view_ops.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/comm_counter.h"
#include "dtensor/testing/comm_matchers.h"
#include "dtensor/testing/op_cases.h"
#include "dtensor/testing/op_checks.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

// Views move values: exact.
constexpr double kTol = 1e-6;

void CheckOp(uint32_t seed, const testing_util::OpCallMaker& make) {
  const absl::Status status = CheckOpProperties(seed, make, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

Tensor RandomInput(const Shape& shape, std::mt19937& rng) {
  return RandomTensor(shape, rng() % 4 == 0 ? DType::kI64 : DType::kF32, -5, 5,
                      rng);
}

// The prime factors of `n` >= 1 in a random order.
std::vector<int64_t> ShuffledFactors(int64_t n, std::mt19937& rng) {
  std::vector<int64_t> factors;
  for (int64_t p = 2; n > 1; ++p) {
    while (n % p == 0) {
      factors.push_back(p);
      n /= p;
    }
  }
  std::shuffle(factors.begin(), factors.end(), rng);
  return factors;
}

// Another shape of the same elements: every dim split into factors, runs of
// consecutive factors merged at random, a size-1 dim inserted now and then.
Shape RandomRegrouping(const Shape& shape, std::mt19937& rng) {
  Shape out;
  if (NumElements(shape) == 0) {
    out = rng() % 2 == 0 ? Shape{0} : shape;
  } else {
    int64_t run = 1;
    for (int64_t size : shape) {
      for (int64_t f : ShuffledFactors(size, rng)) {
        run *= f;
        if (rng() % 2 == 0) {
          out.push_back(run);
          run = 1;
        }
      }
    }
    if (run != 1 || out.empty()) out.push_back(run);
  }
  if (rng() % 4 == 0) out.insert(out.begin() + rng() % (out.size() + 1), 1);
  return out;
}

// `shape` with one size replaced by -1 at random (not for empty tensors).
Shape MaybeInferred(Shape shape, std::mt19937& rng) {
  if (!shape.empty() && NumElements(shape) > 0 && rng() % 3 == 0) {
    shape[rng() % shape.size()] = -1;
  }
  return shape;
}

// Sizes that often split evenly over the test meshes.
Shape ViewableShape(std::mt19937& rng) {
  static const int64_t kSizes[] = {1, 2, 3, 4, 5, 6, 8, 12};
  Shape shape(rng() % 4);
  for (int64_t& size : shape) size = kSizes[rng() % 8];
  if (rng() % 16 == 0 && !shape.empty()) shape[0] = 0;
  return shape;
}

// ---- Reshapes. ----

OpCall ReshapeCall(bool view, std::mt19937& rng) {
  const Shape shape = ViewableShape(rng);
  const Shape target = MaybeInferred(RandomRegrouping(shape, rng), rng);
  OpCall c;
  c.op = view ? "view" : "reshape";
  c.description = absl::StrCat(c.op, " to ", ShapeToString(target));
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInts(target);
  c.call = OneOutput([view, target](const In& in) {
    return view ? ops::View(in[0], target) : ops::Reshape(in[0], target);
  });
  c.reference =
      OneReference([target](const Full& in) { return in[0].Reshape(target); });
  return c;
}

TEST(ViewPropertyTest, ViewMatchesTheTensorLayer) {
  CheckOp(31, [](std::mt19937& rng) { return ReshapeCall(true, rng); });
}

TEST(ViewPropertyTest, ReshapeMatchesTheTensorLayer) {
  CheckOp(32, [](std::mt19937& rng) { return ReshapeCall(false, rng); });
}

OpCall FlattenCall(std::mt19937& rng) {
  const Shape shape = ViewableShape(rng);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t r = std::max<int64_t>(rank, 1);
  const int64_t start = rng() % r;
  const int64_t end = start + rng() % (r - start);
  // Negative spellings now and then.
  const int64_t start_arg = rng() % 3 == 0 ? start - r : start;
  const int64_t end_arg = rng() % 3 == 0 ? end - r : end;
  OpCall c;
  c.op = "flatten";
  c.description = absl::StrCat(c.op, " ", start_arg, "..", end_arg);
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInt(start_arg).AddInt(end_arg);
  c.call = OneOutput([start_arg, end_arg](const In& in) {
    return ops::Flatten(in[0], start_arg, end_arg);
  });
  c.reference = OneReference([start_arg, end_arg](const Full& in) {
    return in[0].Flatten(start_arg, end_arg);
  });
  return c;
}

TEST(ViewPropertyTest, FlattenMatchesTheTensorLayer) {
  CheckOp(33, FlattenCall);
}

OpCall UnflattenCall(std::mt19937& rng) {
  Shape shape = ViewableShape(rng);
  if (shape.empty()) shape = {12};
  const int64_t dim = rng() % shape.size();
  Shape sizes = RandomRegrouping({shape[dim]}, rng);
  if (NumElements(shape) > 0) sizes = MaybeInferred(sizes, rng);
  OpCall c;
  c.op = "unflatten";
  c.description =
      absl::StrCat(c.op, " dim ", dim, " into ", ShapeToString(sizes));
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInt(dim).AddInts(sizes);
  c.call = OneOutput(
      [dim, sizes](const In& in) { return ops::Unflatten(in[0], dim, sizes); });
  // The reference: the shape with dim replaced by the sizes (one -1 inferred
  // by Reshape over the whole tensor, which is the same).
  c.reference = OneReference([dim, sizes](const Full& in) {
    Shape target = in[0].shape();
    target.erase(target.begin() + dim);
    target.insert(target.begin() + dim, sizes.begin(), sizes.end());
    return in[0].Reshape(target);
  });
  return c;
}

TEST(ViewPropertyTest, UnflattenMatchesTheTensorLayer) {
  CheckOp(34, UnflattenCall);
}

OpCall SqueezeCall(std::mt19937& rng) {
  Shape shape = ViewableShape(rng);
  for (int k = rng() % 3; k > 0; --k) {
    shape.insert(shape.begin() + rng() % (shape.size() + 1), 1);
  }
  std::vector<int64_t> dims;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rng() % 2 == 0) {
    for (int64_t d = 0; d < rank; ++d) {
      if (rng() % 2 == 0) dims.push_back(rng() % 2 == 0 ? d : d - rank);
    }
  }
  OpCall c;
  c.op = "squeeze";
  c.description = absl::StrCat(c.op, " dims [", absl::StrJoin(dims, ","), "]");
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInts(dims);
  c.call =
      OneOutput([dims](const In& in) { return ops::Squeeze(in[0], dims); });
  // The reference: every size-1 dim of `dims` (all when empty) dropped.
  c.reference = OneReference([dims](const Full& in) {
    const int64_t r = in[0].dim();
    Shape target;
    for (int64_t d = 0; d < r; ++d) {
      const bool listed =
          dims.empty() ||
          std::find(dims.begin(), dims.end(), d) != dims.end() ||
          std::find(dims.begin(), dims.end(), d - r) != dims.end();
      if (!(listed && in[0].shape()[d] == 1))
        target.push_back(in[0].shape()[d]);
    }
    return in[0].Reshape(target);
  });
  return c;
}

TEST(ViewPropertyTest, SqueezeMatchesTheTensorLayer) {
  CheckOp(35, SqueezeCall);
}

OpCall UnsqueezeCall(std::mt19937& rng) {
  const Shape shape = ViewableShape(rng);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t dim = static_cast<int64_t>(rng() % (2 * rank + 2)) - rank - 1;
  OpCall c;
  c.op = "unsqueeze";
  c.description = absl::StrCat(c.op, " dim ", dim);
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInt(dim);
  c.call =
      OneOutput([dim](const In& in) { return ops::Unsqueeze(in[0], dim); });
  c.reference =
      OneReference([dim](const Full& in) { return in[0].Unsqueeze(dim); });
  return c;
}

TEST(ViewPropertyTest, UnsqueezeMatchesTheTensorLayer) {
  CheckOp(36, UnsqueezeCall);
}

// ---- Permutations and expand. ----

OpCall TransposeCall(std::mt19937& rng) {
  Shape shape = RandomShape(1 + rng() % 3, 6, rng);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d0 = static_cast<int64_t>(rng() % (2 * rank)) - rank;
  const int64_t d1 = static_cast<int64_t>(rng() % (2 * rank)) - rank;
  OpCall c;
  c.op = "transpose";
  c.description = absl::StrCat(c.op, " ", d0, " ", d1);
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInt(d0).AddInt(d1);
  c.call = OneOutput(
      [d0, d1](const In& in) { return ops::Transpose(in[0], d0, d1); });
  c.reference = OneReference(
      [d0, d1](const Full& in) { return in[0].Transpose(d0, d1); });
  return c;
}

TEST(ViewPropertyTest, TransposeMatchesTheTensorLayer) {
  CheckOp(37, TransposeCall);
}

OpCall PermuteCall(std::mt19937& rng) {
  const Shape shape = RandomShape(rng() % 4, 6, rng);
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims(rank);
  std::iota(dims.begin(), dims.end(), 0);
  std::shuffle(dims.begin(), dims.end(), rng);
  for (int64_t& d : dims) {
    if (rng() % 3 == 0) d -= rank;
  }
  OpCall c;
  c.op = "permute";
  c.description = absl::StrCat(c.op, " [", absl::StrJoin(dims, ","), "]");
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInts(dims);
  c.call =
      OneOutput([dims](const In& in) { return ops::Permute(in[0], dims); });
  c.reference =
      OneReference([dims](const Full& in) { return in[0].Permute(dims); });
  return c;
}

TEST(ViewPropertyTest, PermuteMatchesTheTensorLayer) {
  CheckOp(38, PermuteCall);
}

OpCall ExpandCall(std::mt19937& rng) {
  Shape shape = RandomShape(rng() % 4, 5, rng);
  for (int64_t& size : shape) {
    if (rng() % 3 == 0) size = 1;
  }
  Shape target;
  for (int k = rng() % 3; k > 0; --k) target.push_back(1 + rng() % 3);
  for (int64_t size : shape) {
    if (rng() % 4 == 0) {
      target.push_back(-1);
    } else {
      target.push_back(size == 1 ? static_cast<int64_t>(rng() % 5) : size);
    }
  }
  OpCall c;
  c.op = "expand";
  c.description = absl::StrCat(c.op, " to ", ShapeToString(target));
  c.inputs = {RandomInput(shape, rng)};
  c.args.AddInts(target);
  c.call =
      OneOutput([target](const In& in) { return ops::Expand(in[0], target); });
  c.reference =
      OneReference([target](const Full& in) { return in[0].Expand(target); });
  return c;
}

TEST(ViewPropertyTest, ExpandMatchesTheTensorLayer) { CheckOp(39, ExpandCall); }

TEST(ViewCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"view",      "reshape", "flatten",
                                        "unflatten", "squeeze", "unsqueeze",
                                        "transpose", "permute", "expand"};
  for (const OpDef* op : ops::ViewOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- The merge and split rules (metadata only). ----

// The layout of `call` on x of `shape` laid out by `sharding`, and whether it
// communicated.
MetaOutcome OnMeta(
    const std::vector<int64_t>& mesh, const Shape& shape,
    const std::string& sharding,
    std::function<absl::StatusOr<DTensor>(const DTensor&)> call) {
  return RunOnMeta(mesh, {{shape, sharding}},
                   [&call](const In& in) { return call(in[0]); });
}

TEST(ViewShardingTest, MergingKeepsAnOutermostShardWhereChunksAlign) {
  const auto flat = [](const DTensor& x) { return ops::Reshape(x, {-1}); };
  MetaOutcome o = OnMeta({2}, {8, 3}, "S(0)", flat);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // 5 rows on 2 ranks (3, 2) hold 9 and 6 elements; 15 chunks as 8, 7.
  o = OnMeta({2}, {5, 3}, "S(0)", flat);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_GE(o.comms.total_collectives(), 1);
  // An inner dim's shards are not a run of the merged dim.
  o = OnMeta({2}, {4, 6}, "S(1)", flat);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_GE(o.comms.total_collectives(), 1);
  // Nested shards keep their order.
  o = OnMeta({2, 2}, {16, 3}, "S(0),S(0)", flat);
  EXPECT_EQ(o.sharding, "S(0),S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2, 2}, {16, 3}, "S(0)[1],S(0)[0]", flat);
  EXPECT_EQ(o.sharding, "S(0)[1],S(0)[0]");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // Other groups keep their shards.
  o = OnMeta({2, 2}, {4, 2, 6, 3}, "S(0),S(2)", [](const DTensor& x) {
    return ops::Reshape(x, {8, 18});
  });
  EXPECT_EQ(o.sharding, "S(0),S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

TEST(ViewShardingTest, SplittingKeepsTheShardOnTheOutermostPiece) {
  MetaOutcome o = OnMeta({2}, {24}, "S(0)", [](const DTensor& x) {
    return ops::View(x, {2, 12});
  });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2}, {2, 24}, "S(1)", [](const DTensor& x) {
    return ops::Unflatten(x, 1, {4, 6});
  });
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // 12 on 4 ranks is 3 each, but 3 rows of 4 on 4 ranks are 1, 1, 1, 0.
  o = OnMeta({4}, {12}, "S(0)", [](const DTensor& x) {
    return ops::View(x, {3, 4});
  });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_GE(o.comms.total_collectives(), 1);
}

TEST(ViewShardingTest, PermutationsAndUnitDimsMoveShardsWithTheirDims) {
  MetaOutcome o = OnMeta({2}, {8, 6}, "S(0)", [](const DTensor& x) {
    return ops::Transpose(x, 0, 1);
  });
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2, 2}, {2, 4, 6}, "S(0),S(2)", [](const DTensor& x) {
    return ops::Permute(x, {2, 0, 1});
  });
  EXPECT_EQ(o.sharding, "S(1),S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2}, {8, 6}, "S(1)",
             [](const DTensor& x) { return ops::Unsqueeze(x, 0); });
  EXPECT_EQ(o.sharding, "S(2)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2}, {8, 1, 6}, "S(2)",
             [](const DTensor& x) { return ops::Squeeze(x); });
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2}, {1, 6}, "S(1)", [](const DTensor& x) {
    return ops::Expand(x, {3, 4, 6});
  });
  EXPECT_EQ(o.sharding, "S(2)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

// As in PyTorch: a sharded size-1 dim that meets a size-1 dim of the output
// keeps its shard (rank 0 holds the one row, the others none).
TEST(ViewShardingTest, ShardedSizeOneDimsKeepTheirShardThroughViews) {
  MetaOutcome o = OnMeta({4}, {4, 1, 8}, "S(1)", [](const DTensor& x) {
    return ops::View(x, {4, 1, 2, 4});
  });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({4}, {4, 1, 8}, "S(1)",
             [](const DTensor& x) { return ops::Unsqueeze(x, 0); });
  EXPECT_EQ(o.sharding, "S(2)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = OnMeta({2, 2}, {1, 6, 1}, "S(0),S(2)", [](const DTensor& x) {
    return ops::Reshape(x, {1, 2, 3, 1});
  });
  EXPECT_EQ(o.sharding, "S(0),S(3)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  // Squeezed away, the dim has nowhere to keep its shard.
  o = OnMeta({4}, {4, 1, 8}, "S(1)",
             [](const DTensor& x) { return ops::Squeeze(x, {1}); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.comms.total_collectives(), 1);
}

TEST(ViewShardingTest, EveryPartialPassesThrough) {
  for (const char* sharding : {"P(sum)", "P(avg)", "P(max)", "P(min)"}) {
    const MetaOutcome o = OnMeta({2}, {8, 6}, sharding, [](const DTensor& x) {
      return ops::Reshape(x, {4, 12});
    });
    EXPECT_EQ(o.sharding, sharding);
    EXPECT_THAT(o.comms, IssuedNoCollectives());
  }
}

TEST(ViewErrorTest, BadShapesAreErrorsNamingTheOpAndShape) {
  const auto check =
      [](const Shape& shape,
         std::function<absl::StatusOr<DTensor>(const DTensor&)> call,
         const std::string& text) {
        const MetaOutcome o = OnMeta({2}, shape, "R", std::move(call));
        ASSERT_FALSE(o.status.ok());
        EXPECT_NE(o.status.message().find(text), std::string::npos) << o.status;
      };
  check(
      {4, 6},
      [](const DTensor& x) {
        return ops::Reshape(x, {5, -1});
      },
      "reshape");
  check(
      {4, 6},
      [](const DTensor& x) {
        return ops::View(x, {-1, -1});
      },
      "[-1, -1]");
  check(
      {4, 6},
      [](const DTensor& x) {
        return ops::Unflatten(x, 1, {4, 2});
      },
      "unflatten");
  check(
      {4, 6},
      [](const DTensor& x) {
        return ops::Permute(x, {0, 0});
      },
      "permute");
  check(
      {4, 6},
      [](const DTensor& x) {
        return ops::Expand(x, {4, 7});
      },
      "expand");
  check(
      {4, 6}, [](const DTensor& x) { return ops::Transpose(x, 0, 2); },
      "transpose");
  check(
      {4, 6}, [](const DTensor& x) { return ops::Flatten(x, 1, 0); },
      "flatten");
}

}  // namespace
}  // namespace dtensor
