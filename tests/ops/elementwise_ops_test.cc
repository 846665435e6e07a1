// Elementwise ops on DTensors: for every op of the family, a randomized
// property test (random meshes, shapes broadcasting against each other, even
// and uneven shards, Partial inputs) against the tensor layer on the gathered
// inputs; and the Partial rules users expect, with communication counted.
#include "dtensor/ops/elementwise_ops.h"

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/dispatch.h"
#include "dtensor/ops/registry.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/testing/op_cases.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

using testing_util::CheckCases;
using testing_util::MetaTensor;
using testing_util::OpCase;
using testing_util::PartialOpsFor;
using testing_util::RandomMeshShape;
using testing_util::RandomShape;
using testing_util::RandomSharding;
using testing_util::RandomTensor;

// The scalar operand of the *_scalar ops.
constexpr double kScalar = 1.5;

enum class Domain { kAny, kPositive };

// One op of the family and its reference on full tensors (one per output);
// `same_shape`: its inputs do not broadcast.
struct Spec {
  std::string op;
  int arity;
  bool scalar;
  Domain domain;
  std::vector<DType> dtypes;
  testing_util::ReferenceCall reference;
  bool same_shape = false;
};

// The one output `out` as a reference's outputs.
absl::StatusOr<std::vector<Tensor>> One(absl::StatusOr<Tensor> out) {
  if (!out.ok()) return out.status();
  return std::vector<Tensor>{*std::move(out)};
}

void PrintTo(const Spec& spec, std::ostream* os) { *os << spec.op; }

using Bin = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
using Sca = absl::StatusOr<Tensor> (*)(const Tensor&, double);
using Un = absl::StatusOr<Tensor> (*)(const Tensor&);

Spec BinarySpec(std::string op, Bin f, std::vector<DType> dtypes,
                Domain domain = Domain::kAny) {
  return {std::move(op),
          2,
          false,
          domain,
          std::move(dtypes),
          [f](const std::vector<Tensor>& in) { return One(f(in[0], in[1])); }};
}

Spec ScalarSpec(std::string op, Sca f, std::vector<DType> dtypes,
                Domain domain = Domain::kAny) {
  return {
      std::move(op),
      1,
      true,
      domain,
      std::move(dtypes),
      [f](const std::vector<Tensor>& in) { return One(f(in[0], kScalar)); }};
}

Spec UnarySpec(std::string op, Un f, std::vector<DType> dtypes,
               Domain domain = Domain::kAny) {
  return {std::move(op),
          1,
          false,
          domain,
          std::move(dtypes),
          [f](const std::vector<Tensor>& in) { return One(f(in[0])); }};
}

// swiglu_backward(g, a, b) by its definition: d/da = g b s (1 + a (1 - s))
// with s = sigmoid(a), d/db = g silu(a).
absl::StatusOr<std::vector<Tensor>> UnfusedSwiGluBackward(
    const std::vector<Tensor>& in) {
  const Tensor& g = in[0];
  const Tensor& a = in[1];
  const Tensor& b = in[2];
  DT_ASSIGN_OR_RETURN(const Tensor s, Sigmoid(a));
  DT_ASSIGN_OR_RETURN(Tensor slope, Sub(Tensor::Scalar(1.0, s.dtype()), s));
  DT_ASSIGN_OR_RETURN(slope, Mul(slope, a));
  DT_ASSIGN_OR_RETURN(slope, Add(slope, 1.0));
  DT_ASSIGN_OR_RETURN(slope, Mul(slope, s));
  DT_ASSIGN_OR_RETURN(Tensor da, Mul(g, b));
  DT_ASSIGN_OR_RETURN(da, Mul(da, slope));
  DT_ASSIGN_OR_RETURN(const Tensor gate, Silu(a));
  DT_ASSIGN_OR_RETURN(Tensor db, Mul(g, gate));
  return std::vector<Tensor>{std::move(da), std::move(db)};
}

std::vector<Spec> AllSpecs() {
  const std::vector<DType> arith = {DType::kF32, DType::kI64, DType::kF64};
  const std::vector<DType> compare = {DType::kF32, DType::kI64};
  const std::vector<DType> floats = {DType::kF32};
  const Bin add = Add, sub = Sub, mul = Mul, div = Div, pow = Pow;
  const Bin eq = Eq, ne = Ne, lt = Lt, le = Le, gt = Gt, ge = Ge;
  const Sca add_s = Add, sub_s = Sub, mul_s = Mul, div_s = Div, pow_s = Pow;
  const Sca eq_s = Eq, ne_s = Ne, lt_s = Lt, le_s = Le, gt_s = Gt, ge_s = Ge;
  std::vector<Spec> specs = {
      BinarySpec("add", add, arith),
      BinarySpec("sub", sub, arith),
      BinarySpec("mul", mul, arith),
      BinarySpec("div", div, {DType::kF32, DType::kI64}, Domain::kPositive),
      BinarySpec("pow", pow, floats, Domain::kPositive),
      BinarySpec("silu_backward", SiluBackward, floats),
      BinarySpec("maximum", Maximum, {DType::kF32, DType::kI64, DType::kBool}),
      BinarySpec("minimum", Minimum, {DType::kF32, DType::kI64, DType::kBool}),
      BinarySpec("eq", eq, compare),
      BinarySpec("ne", ne, compare),
      BinarySpec("lt", lt, compare),
      BinarySpec("le", le, compare),
      BinarySpec("gt", gt, compare),
      BinarySpec("ge", ge, compare),
      ScalarSpec("add_scalar", add_s, arith),
      ScalarSpec("sub_scalar", sub_s, arith),
      ScalarSpec("mul_scalar", mul_s, arith),
      ScalarSpec("div_scalar", div_s, arith),
      ScalarSpec("pow_scalar", pow_s, floats, Domain::kPositive),
      ScalarSpec("eq_scalar", eq_s, compare),
      ScalarSpec("ne_scalar", ne_s, compare),
      ScalarSpec("lt_scalar", lt_s, compare),
      ScalarSpec("le_scalar", le_s, compare),
      ScalarSpec("gt_scalar", gt_s, compare),
      ScalarSpec("ge_scalar", ge_s, compare),
      UnarySpec("neg", Neg, arith),
      UnarySpec("abs", Abs, {DType::kF32, DType::kI64}),
      UnarySpec("exp", Exp, floats),
      UnarySpec("log", Log, floats, Domain::kPositive),
      UnarySpec("sqrt", Sqrt, floats, Domain::kPositive),
      UnarySpec("rsqrt", Rsqrt, floats, Domain::kPositive),
      UnarySpec("relu", Relu, {DType::kF32, DType::kI64}),
      UnarySpec("silu", Silu, floats),
      UnarySpec("sigmoid", Sigmoid, floats),
      UnarySpec("tanh", Tanh, floats),
  };
  specs.push_back(
      {"gelu", 1, false, Domain::kAny, floats,
       [](const std::vector<Tensor>& in) { return One(Gelu(in[0])); }});
  specs.push_back({"where",
                   3,
                   false,
                   Domain::kAny,
                   {DType::kF32, DType::kI64},
                   [](const std::vector<Tensor>& in) {
                     return One(Where(in[0], in[1], in[2]));
                   }});
  // The fused SwiGLU against its unfused composition.
  specs.push_back({"swiglu", 2, false, Domain::kAny, floats,
                   [](const std::vector<Tensor>& in)
                       -> absl::StatusOr<std::vector<Tensor>> {
                     DT_ASSIGN_OR_RETURN(const Tensor gate, Silu(in[0]));
                     return One(Mul(gate, in[1]));
                   },
                   /*same_shape=*/true});
  specs.push_back({"swiglu_backward", 3, false, Domain::kAny, floats,
                   UnfusedSwiGluBackward, /*same_shape=*/true});
  return specs;
}

// A shape that broadcasts to `out`: leading dims dropped and dims set to 1
// at random.
Shape BroadcastingShape(const Shape& out, std::mt19937& rng) {
  const size_t drop = rng() % 3 == 0 ? rng() % (out.size() + 1) : 0;
  Shape shape(out.begin() + drop, out.end());
  for (int64_t& size : shape) {
    if (rng() % 4 == 0) size = 1;
  }
  return shape;
}

OpCase MakeCase(const Spec& spec, int64_t mesh_ndim, std::mt19937& rng) {
  const Shape out = RandomShape(rng() % 4, 5, rng);
  const DType dtype = spec.dtypes[rng() % spec.dtypes.size()];
  const bool positive = spec.domain == Domain::kPositive;
  OpCase c;
  for (int i = 0; i < spec.arity; ++i) {
    const Shape shape =
        spec.arity == 1 || spec.same_shape ? out : BroadcastingShape(out, rng);
    const DType input_dtype =
        spec.op == "where" && i == 0 ? DType::kBool : dtype;
    c.inputs.push_back(RandomTensor(shape, input_dtype, positive ? 0.5 : -3,
                                    positive ? 3 : 3, rng));
    c.shardings.push_back(RandomSharding(mesh_ndim,
                                         static_cast<int64_t>(shape.size()),
                                         PartialOpsFor(input_dtype), rng));
  }
  c.description = spec.op;
  return c;
}

class ElementwisePropertyTest : public ::testing::TestWithParam<Spec> {};

TEST_P(ElementwisePropertyTest, MatchesTheTensorLayerOnGatheredInputs) {
  const Spec& spec = GetParam();
  absl::StatusOr<const OpDef*> op = OpRegistry::Builtin().Find(spec.op);
  ASSERT_TRUE(op.ok()) << op.status();
  OpArgs args;
  if (spec.scalar) args.AddScalar(kScalar);
  if (spec.op == "gelu") args.AddBool(false);
  const testing_util::DTensorCall call = [&](const std::vector<DTensor>& in)
      -> absl::StatusOr<std::vector<DTensor>> {
    std::vector<const DTensor*> pointers;
    for (const DTensor& t : in) pointers.push_back(&t);
    absl::StatusOr<OpOutputs> out = Dispatch(**op, pointers, args);
    if (!out.ok()) return out.status();
    return std::vector<DTensor>(out->begin(), out->end());
  };
  std::mt19937 rng(std::hash<std::string>()(spec.op) % 100000);
  for (int round = 0; round < 3; ++round) {
    const std::vector<int64_t> mesh_shape = RandomMeshShape(rng);
    std::vector<OpCase> cases;
    for (int k = 0; k < 10; ++k) {
      cases.push_back(
          MakeCase(spec, static_cast<int64_t>(mesh_shape.size()), rng));
    }
    const absl::Status status =
        CheckCases(mesh_shape, cases, call, spec.reference, 1e-4, 1e-4);
    ASSERT_TRUE(status.ok()) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, ElementwisePropertyTest,
                         ::testing::ValuesIn(AllSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) {
                           return info.param.op;
                         });

TEST(ElementwiseCoverageTest, EveryRegisteredElementwiseOpIsTested) {
  std::set<std::string> tested;
  for (const Spec& spec : AllSpecs()) tested.insert(spec.op);
  for (const OpDef* op : ops::ElementwiseOps()) {
    EXPECT_TRUE(tested.count(std::string(op->name))) << op->name;
  }
}

TEST(ElementwisePropertyTest, GeluTanhApproximationMatches) {
  std::mt19937 rng(5);
  std::vector<OpCase> cases;
  for (int k = 0; k < 10; ++k) {
    const Shape shape = RandomShape(rng() % 4, 5, rng);
    OpCase c;
    c.inputs = {RandomTensor(shape, DType::kF32, -3, 3, rng)};
    c.shardings = {RandomSharding(2, static_cast<int64_t>(shape.size()),
                                  PartialOpsFor(DType::kF32), rng)};
    cases.push_back(std::move(c));
  }
  const absl::Status status = CheckCases(
      {2, 2}, cases,
      [](const std::vector<DTensor>& in)
          -> absl::StatusOr<std::vector<DTensor>> {
        absl::StatusOr<DTensor> out =
            ops::Gelu(in[0], GeluApproximation::kTanh);
        if (!out.ok()) return out.status();
        return std::vector<DTensor>{*out};
      },
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
        absl::StatusOr<Tensor> out = Gelu(in[0], GeluApproximation::kTanh);
        if (!out.ok()) return out.status();
        return std::vector<Tensor>{*out};
      },
      1e-4, 1e-4);
  EXPECT_TRUE(status.ok()) << status;
}

// ---- The Partial rules and layouts users expect (1-D mesh of 4). ----

struct Outcome {
  std::string sharding;
  int64_t collectives = 0;
};

Outcome RunMeta(
    const std::vector<std::pair<Shape, std::string>>& inputs,
    const std::function<absl::StatusOr<DTensor>(const std::vector<DTensor>&)>&
        call,
    const std::vector<int64_t>& mesh_shape = {4}) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create(mesh_shape);
  std::vector<DTensor> tensors;
  for (const auto& [shape, sharding] : inputs) {
    tensors.push_back(*MetaTensor(runtime, mesh, shape, sharding));
  }
  CommCounter counter;
  absl::StatusOr<DTensor> out;
  {
    CommCounter::Scope scope(counter);
    out = call(tensors);
  }
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return {out->sharding().ToString(), counter.total_collectives()};
}

using In = std::vector<DTensor>;

TEST(ElementwiseShardingTest, SumOfPartialsStaysPartialWithoutCommunication) {
  const Outcome o = RunMeta({{{8, 4}, "P"}, {{8, 4}, "P"}}, [](const In& in) {
    return ops::Add(in[0], in[1]);
  });
  EXPECT_EQ(o.sharding, "P(sum)");
  EXPECT_EQ(o.collectives, 0);
  const Outcome sub =
      RunMeta({{{8, 4}, "P(avg)"}, {{4}, "P(avg)"}},
              [](const In& in) { return ops::Sub(in[0], in[1]); });
  EXPECT_EQ(sub.sharding, "P(avg)");
  EXPECT_EQ(sub.collectives, 0);
}

TEST(ElementwiseShardingTest, PartialTimesReplicatedStaysPartial) {
  EXPECT_EQ(RunMeta({{{8, 4}, "P"}, {{8, 4}, "R"}},
                    [](const In& in) { return ops::Mul(in[0], in[1]); })
                .sharding,
            "P(sum)");
  EXPECT_EQ(RunMeta({{{8, 4}, "R"}, {{4}, "P"}},
                    [](const In& in) { return ops::Mul(in[0], in[1]); })
                .sharding,
            "P(sum)");
  EXPECT_EQ(RunMeta({{{8, 4}, "P"}},
                    [](const In& in) { return ops::Mul(in[0], 3.0); })
                .sharding,
            "P(sum)");
  EXPECT_EQ(
      RunMeta({{{8, 4}, "P"}}, [](const In& in) { return ops::Neg(in[0]); })
          .sharding,
      "P(sum)");
  // A Replicate operand of a Partial sum joins it locally: no collective.
  const Outcome add = RunMeta({{{8, 4}, "P"}, {{8, 4}, "R"}}, [](const In& in) {
    return ops::Add(in[0], in[1]);
  });
  EXPECT_EQ(add.sharding, "P(sum)");
  EXPECT_EQ(add.collectives, 0);
}

TEST(ElementwiseShardingTest, NonlinearOpsDoNotKeepPartial) {
  for (const auto& op :
       std::vector<std::function<absl::StatusOr<DTensor>(const In&)>>{
           [](const In& in) { return ops::Exp(in[0]); },
           [](const In& in) { return ops::Gelu(in[0]); },
           [](const In& in) { return ops::Add(in[0], 1.0); },
       }) {
    const Outcome o = RunMeta({{{8, 4}, "P"}}, op);
    EXPECT_EQ(o.sharding.find("P"), std::string::npos) << o.sharding;
    EXPECT_GE(o.collectives, 1);
  }
  // x * x of a Partial x: all-reducing one copy leaves a Partial product,
  // linear in the other copy, that a linear consumer reads for free; read
  // whole it costs no more than reduce-scattering both copies and gathering
  // the product, in fewer collectives (docs/ops.md, the cost rule (a)).
  const Outcome square = RunMeta(
      {{{8, 4}, "P"}}, [](const In& in) { return ops::Mul(in[0], in[0]); });
  EXPECT_EQ(square.sharding, "P(sum)");
  EXPECT_EQ(square.collectives, 1);
  // A sum reduced by the cheaper reduce-scatter rather than an all-reduce.
  const Outcome exp =
      RunMeta({{{8, 4}, "P"}}, [](const In& in) { return ops::Exp(in[0]); });
  EXPECT_EQ(exp.sharding, "S(0)");
}

TEST(ElementwiseShardingTest, MaxPartialsPassMonotoneOps) {
  EXPECT_EQ(RunMeta({{{8, 4}, "P(max)"}},
                    [](const In& in) { return ops::Relu(in[0]); })
                .sharding,
            "P(max)");
  EXPECT_EQ(RunMeta({{{8, 4}, "P(max)"}, {{8, 4}, "R"}},
                    [](const In& in) { return ops::Maximum(in[0], in[1]); })
                .sharding,
            "P(max)");
}

TEST(ElementwiseShardingTest, OutputsFollowShardsThroughBroadcasting) {
  const Outcome o = RunMeta({{{8, 6}, "S(1)"}, {{6}, "R"}}, [](const In& in) {
    return ops::Add(in[0], in[1]);
  });
  EXPECT_EQ(o.sharding, "S(1)");
  EXPECT_EQ(o.collectives, 0);
  const Outcome b =
      RunMeta({{{8, 6}, "S(0)"}, {{1, 6}, "R"}},
              [](const In& in) { return ops::Mul(in[0], in[1]); });
  EXPECT_EQ(b.sharding, "S(0)");
  EXPECT_EQ(b.collectives, 0);
}

TEST(ElementwiseShardingTest, TiesPreferNoRedistribution) {
  // Sharding both operands would also cost nothing (local slices), but
  // nothing beats keeping the layouts.
  const Outcome o = RunMeta({{{8, 4}, "R"}, {{8, 4}, "R"}}, [](const In& in) {
    return ops::Add(in[0], in[1]);
  });
  EXPECT_EQ(o.sharding, "R");
}

TEST(ElementwiseShardingTest, NestedShardsKeepTheirOrder) {
  // Mesh dim 1 splits dim 0 first, then mesh dim 0: relu keeps that order
  // (no permute back to the default).
  const Outcome o =
      RunMeta({{{16, 4}, "S(0)[1],S(0)[0]"}},
              [](const In& in) { return ops::Relu(in[0]); }, {2, 2});
  EXPECT_EQ(o.sharding, "S(0)[1],S(0)[0]");
  EXPECT_EQ(o.collectives, 0);
}

TEST(ElementwiseErrorTest, BadInputsAreErrorsNamingTheOp) {
  auto runtime = Runtime::MetadataOnly(0);
  const DeviceMesh mesh = *DeviceMesh::Create({2});
  const DeviceMesh other = *DeviceMesh::Create({2}, {}, {2, 3});
  const DTensor a = *MetaTensor(runtime, mesh, {4, 3}, "R");
  const DTensor b = *MetaTensor(runtime, mesh, {4, 2}, "R");
  absl::StatusOr<DTensor> out = ops::Add(a, b);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("add"), std::string::npos)
      << out.status();
  const DTensor i = *MetaTensor(runtime, mesh, {4, 3}, "R", DType::kI64);
  EXPECT_FALSE(ops::Add(a, i).ok());  // dtypes differ
  EXPECT_FALSE(ops::Exp(i).ok());     // exp needs a float
  auto runtime3 = Runtime::MetadataOnly(3);
  const DTensor c = *MetaTensor(runtime3, other, {4, 3}, "R");
  EXPECT_FALSE(ops::Add(a, c).ok());  // different runtimes (and meshes)
  const DeviceMesh renamed = *DeviceMesh::Create({2}, {"tp"});
  const DTensor d = *MetaTensor(runtime, renamed, {4, 3}, "R");
  out = ops::Add(a, d);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("mesh"), std::string::npos)
      << out.status();
  EXPECT_FALSE(ops::Add(DTensor(), DTensor()).ok());
}

}  // namespace
}  // namespace dtensor
