// narrow, slice, split and chunk on DTensors: randomized property tests
// (random meshes, even and uneven shards, Partial inputs) against the tensor
// layer on the gathered input, under random layouts and (narrow, slice)
// under every strategy; the layouts users expect, and one redistribution
// for all the parts of a split.
#include "dtensor/ops/slice_ops.h"

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

using testing_util::CheckOnRandomShardings;
using testing_util::CheckOpProperties;
using testing_util::IssuedNoCollectives;
using testing_util::MetaOutcome;
using testing_util::MetaTensor;
using testing_util::OneOutput;
using testing_util::OneReference;
using testing_util::OpCall;
using testing_util::RandomShape;
using testing_util::RandomTensor;
using testing_util::RunOnMeta;

using In = std::vector<DTensor>;
using Full = std::vector<Tensor>;

constexpr double kTol = 1e-6;

Tensor RandomInput(const Shape& shape, std::mt19937& rng) {
  return RandomTensor(shape, rng() % 4 == 0 ? DType::kI64 : DType::kF32, -5, 5,
                      rng);
}

// A rank-1..3 input and one of its dims (negative half the time) with its
// size.
struct Sliced {
  Shape shape;
  int64_t dim;
  int64_t size;
};

Sliced RandomSliced(std::mt19937& rng) {
  Sliced s;
  s.shape = RandomShape(1 + rng() % 3, 7, rng);
  const int64_t rank = static_cast<int64_t>(s.shape.size());
  const int64_t d = rng() % rank;
  s.dim = rng() % 2 == 0 ? d : d - rank;
  s.size = s.shape[d];
  return s;
}

OpCall NarrowCall(std::mt19937& rng) {
  const Sliced s = RandomSliced(rng);
  const int64_t start = static_cast<int64_t>(rng() % (2 * s.size + 1)) - s.size;
  const int64_t from = start < 0 ? start + s.size : start;
  const int64_t length = rng() % (s.size - from + 1);
  OpCall c;
  c.op = "narrow";
  c.description =
      absl::StrCat(c.op, " dim ", s.dim, " from ", start, " length ", length);
  c.inputs = {RandomInput(s.shape, rng)};
  c.args.AddInt(s.dim).AddInt(start).AddInt(length);
  const int64_t dim = s.dim;
  c.call = OneOutput([dim, start, length](const In& in) {
    return ops::Narrow(in[0], dim, start, length);
  });
  c.reference = OneReference([dim, start, length](const Full& in) {
    return in[0].Narrow(dim, start, length);
  });
  return c;
}

OpCall SliceCall(std::mt19937& rng) {
  const Sliced s = RandomSliced(rng);
  const int64_t span = s.size + 3;
  const int64_t start = static_cast<int64_t>(rng() % (2 * span)) - span;
  const int64_t end = static_cast<int64_t>(rng() % (2 * span)) - span;
  const int64_t step = 1 + rng() % 3;
  OpCall c;
  c.op = "slice";
  c.description =
      absl::StrCat(c.op, " dim ", s.dim, " [", start, ":", end, ":", step, "]");
  c.inputs = {RandomInput(s.shape, rng)};
  c.args.AddInt(s.dim).AddInt(start).AddInt(end).AddInt(step);
  const int64_t dim = s.dim;
  c.call = OneOutput([dim, start, end, step](const In& in) {
    return ops::Slice(in[0], dim, start, end, step);
  });
  c.reference = OneReference([dim, start, end, step](const Full& in) {
    return in[0].Slice(dim, start, end, step);
  });
  return c;
}

TEST(SlicePropertyTest, NarrowMatchesTheTensorLayer) {
  const absl::Status status = CheckOpProperties(51, NarrowCall, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SlicePropertyTest, SliceMatchesTheTensorLayer) {
  const absl::Status status = CheckOpProperties(53, SliceCall, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

// Split by a size, by sizes, or chunk: several outputs.
OpCall PartsCall(std::mt19937& rng) {
  const Sliced s = RandomSliced(rng);
  const int kind = rng() % 3;
  std::vector<int64_t> sizes;
  int64_t left = s.size;
  while (left > 0) {
    sizes.push_back(std::min<int64_t>(left, rng() % 4));
    left -= sizes.back();
  }
  const int64_t split_size = 1 + rng() % 4;
  const int64_t chunks = 1 + rng() % 5;
  const int64_t dim = s.dim;
  OpCall c;
  c.inputs = {RandomInput(s.shape, rng)};
  if (kind == 0) {
    c.description = absl::StrCat("split dim ", dim, " by ", split_size);
    c.call = [=](const In& in) { return ops::Split(in[0], split_size, dim); };
    c.reference = [=](const Full& in) { return in[0].Split(split_size, dim); };
  } else if (kind == 1) {
    c.description = absl::StrCat("split dim ", dim, " into [",
                                 absl::StrJoin(sizes, ","), "]");
    c.call = [=](const In& in) { return ops::Split(in[0], sizes, dim); };
    c.reference = [=](const Full& in) { return in[0].Split(sizes, dim); };
  } else {
    c.description = absl::StrCat("chunk dim ", dim, " in ", chunks);
    c.call = [=](const In& in) { return ops::Chunk(in[0], chunks, dim); };
    c.reference = [=](const Full& in) { return in[0].Chunk(chunks, dim); };
  }
  return c;
}

TEST(SlicePropertyTest, SplitAndChunkMatchTheTensorLayer) {
  const absl::Status status =
      CheckOnRandomShardings(55, 4, 12, PartsCall, kTol, kTol);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SliceCoverageTest, EveryOpOfTheFamilyHasAPropertyTest) {
  const std::set<std::string> tested = {"narrow", "slice"};
  for (const OpDef* op : ops::SliceOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

// ---- Layouts. ----

TEST(SliceShardingTest, OnlyTheSlicedDimLosesItsShards) {
  MetaOutcome o = RunOnMeta({4}, {{{8, 6}, "S(0)"}}, [](const In& in) {
    return ops::Narrow(in[0], 1, 1, 3);
  });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.sharding, "S(0)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
  o = RunOnMeta({4}, {{{8, 6}, "S(0)"}},
                [](const In& in) { return ops::Slice(in[0], 0, 1, 7, 2); });
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_NE(o.sharding, "S(0)");
  EXPECT_EQ(o.comms.total_collectives(), 1);
  o = RunOnMeta({4}, {{{8, 6}, "P(sum)"}},
                [](const In& in) { return ops::Narrow(in[0], 0, 2, 2); });
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_THAT(o.comms, IssuedNoCollectives());
}

TEST(SliceShardingTest, SplitRedistributesOnceForAllItsParts) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({4});
  const DTensor x = *MetaTensor(runtime, mesh, {8, 6}, "S(0)");
  CommCounter counter;
  absl::StatusOr<std::vector<DTensor>> parts;
  {
    CommCounter::Scope scope(counter);
    parts = ops::Split(x, 2, 0);
  }
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 4u);
  EXPECT_EQ(counter.total_collectives(), 1);
  for (const DTensor& part : *parts) {
    EXPECT_EQ(part.shape(), Shape({2, 6}));
    EXPECT_EQ(part.sharding(), (*parts)[0].sharding());
  }
  // Along an unsharded dim: no communication.
  counter.Reset();
  {
    CommCounter::Scope scope(counter);
    parts = ops::Chunk(x, 3, 1);
  }
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->size(), 3u);
  EXPECT_EQ(counter.total_collectives(), 0);
  EXPECT_EQ((*parts)[0].sharding().ToString(), "S(0)");
}

TEST(SliceErrorTest, BadRangesAreErrorsNamingTheValue) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DTensor x = *MetaTensor(runtime, mesh, {8, 6}, "S(0)");
  absl::StatusOr<DTensor> out = ops::Narrow(x, 1, 4, 3);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("narrow"), std::string::npos)
      << out.status();
  EXPECT_FALSE(ops::Slice(x, 0, 0, 4, 0).ok());
  EXPECT_FALSE(ops::Narrow(x, 2, 0, 1).ok());
  absl::StatusOr<std::vector<DTensor>> parts = ops::Split(x, {3, 4}, 0);
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.status().message().find("split"), std::string::npos)
      << parts.status();
  EXPECT_FALSE(ops::Chunk(x, 0, 0).ok());
  EXPECT_FALSE(ops::Chunk(DTensor(), 2, 0).ok());
}

}  // namespace
}  // namespace dtensor
