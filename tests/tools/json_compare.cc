#include "tests/tools/json_compare.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dtensor {

void ExpectSameJson(const JsonValue& a, const JsonValue& b,
                    const std::string& where) {
  ASSERT_EQ(a.kind(), b.kind()) << where;
  if (a.is_number()) {
    EXPECT_NEAR(a.number_value(), b.number_value(),
                1e-9 * std::max(1.0, std::fabs(b.number_value())))
        << where;
  } else if (a.is_array()) {
    ASSERT_EQ(a.items().size(), b.items().size()) << where;
    for (size_t i = 0; i < a.items().size(); ++i) {
      ExpectSameJson(a.items()[i], b.items()[i],
                     absl::StrCat(where, "[", i, "]"));
    }
  } else if (a.is_object()) {
    ASSERT_EQ(a.members().size(), b.members().size()) << where;
    for (size_t i = 0; i < a.members().size(); ++i) {
      ASSERT_EQ(a.members()[i].first, b.members()[i].first) << where;
      ExpectSameJson(a.members()[i].second, b.members()[i].second,
                     absl::StrCat(where, ".", a.members()[i].first));
    }
  } else {
    EXPECT_EQ(a.string_value(), b.string_value()) << where;
    EXPECT_EQ(a.bool_value(), b.bool_value()) << where;
  }
}

}  // namespace dtensor
