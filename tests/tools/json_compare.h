#ifndef DTENSOR_TESTS_TOOLS_JSON_COMPARE_H_
#define DTENSOR_TESTS_TOOLS_JSON_COMPARE_H_

#include <string>

#include "dtensor/base/json_value.h"

namespace dtensor {

// Expects equal JSON values (a gtest failure naming the path `where` of each
// difference); numbers within a relative 1e-9, since sums of per-call times
// may be added in another order.
void ExpectSameJson(const JsonValue& a, const JsonValue& b,
                    const std::string& where);

}  // namespace dtensor

#endif  // DTENSOR_TESTS_TOOLS_JSON_COMPARE_H_
