#ifndef DTENSOR_BASE_JSON_TEXT_H_
#define DTENSOR_BASE_JSON_TEXT_H_

#include <string>

#include "nlohmann/json.hpp"

namespace dtensor {

// Writing JSON. The documents dtensor writes (Chrome traces, checkpoint
// metadata, the command-line tool's --json output) are built as
// nlohmann::ordered_json values, whose objects keep their keys in insertion
// order, and printed by DumpJson; nlohmann quotes and escapes the strings.
// Reading is ParseJson (json_value.h), whose error messages are part of the
// interface.

// `value` as a JSON number: an integral value of magnitude below 1e15 as an
// integer ("40", where nlohmann prints a double as "40.0"), as dtensor's
// outputs have always written it; another finite value as a double, which
// prints in a shortest round-trip form ("8.3", "1e-07", "1e+15"); NaN and
// the infinities, which JSON lacks, as null.
nlohmann::ordered_json JsonNumber(double value);

// `value` as compact JSON text (no spaces, no newlines). Never throws: a
// string that is not valid UTF-8 is written with U+FFFD in place of each
// invalid byte.
std::string DumpJson(const nlohmann::ordered_json& value);

}  // namespace dtensor

#endif  // DTENSOR_BASE_JSON_TEXT_H_
