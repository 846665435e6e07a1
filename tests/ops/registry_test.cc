// The op registry: the built-in ops are found under their names, with the
// functions the engine needs; lookups and registrations fail cleanly.
#include "dtensor/ops/registry.h"

#include <string>

#include "dtensor/ops/elementwise_ops.h"
#include "dtensor/ops/matmul_ops.h"
#include "dtensor/ops/reduction_ops.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace {

TEST(OpRegistryTest, BuiltinFindsEveryOpOfTheseFamiliesUnderItsName) {
  // Find returns the family's own OpDef: no other op took its name.
  for (const auto& family :
       {ops::MatmulOps(), ops::ElementwiseOps(), ops::ReductionOps()}) {
    for (const OpDef* op : family) {
      absl::StatusOr<const OpDef*> found = OpRegistry::Builtin().Find(op->name);
      ASSERT_TRUE(found.ok()) << found.status();
      EXPECT_EQ(*found, op) << op->name;
    }
  }
  for (const char* name :
       {"matmul", "mm", "bmm", "linear", "addmm", "add", "where", "gelu", "sum",
        "mean", "amax", "max", "aminmax"}) {
    EXPECT_TRUE(OpRegistry::Builtin().Find(name).ok()) << name;
  }
}

TEST(OpRegistryTest, EveryBuiltinOpIsCompleteAndListedByName) {
  const std::vector<const OpDef*> all = OpRegistry::Builtin().ops();
  for (size_t i = 0; i < all.size(); ++i) {
    const OpDef* op = all[i];
    EXPECT_TRUE(op->infer && op->strategies && op->kernel) << op->name;
    EXPECT_FALSE(op->summary.empty()) << op->name;
    EXPECT_EQ(*OpRegistry::Builtin().Find(op->name), op) << op->name;
    if (i > 0) {
      EXPECT_LT(all[i - 1]->name, op->name);
    }
  }
}

TEST(OpRegistryTest, UnknownNamesAndBadRegistrationsAreErrors) {
  absl::StatusOr<const OpDef*> missing = OpRegistry::Builtin().Find("conv9d");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("conv9d"), std::string::npos);

  OpRegistry registry;
  const OpDef* mm = *OpRegistry::Builtin().Find("mm");
  EXPECT_TRUE(registry.Register(mm).ok());
  EXPECT_EQ(registry.Register(mm).code(), absl::StatusCode::kAlreadyExists);
  OpDef incomplete;
  incomplete.name = "incomplete";
  EXPECT_FALSE(registry.Register(&incomplete).ok());
  OpDef unnamed = *mm;
  unnamed.name = "";
  EXPECT_FALSE(registry.Register(&unnamed).ok());
  EXPECT_EQ(registry.ops().size(), 1u);
}

}  // namespace
}  // namespace dtensor
