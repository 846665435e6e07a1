#ifndef DTENSOR_BASE_JSON_TEXT_H_
#define DTENSOR_BASE_JSON_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dtensor {

// Pieces of JSON text, for the small reports dtensor writes (traces, the
// command-line tool's --json output).

// `text` as a JSON string literal, quoted and escaped.
std::string JsonString(absl::string_view text);
// A finite number in its shortest round-trip form ("8.3", "256", "1e-07");
// NaN and infinities, which JSON lacks, as null.
std::string JsonNumber(double value);
// "[1,2,3]".
std::string JsonIntArray(absl::Span<const int64_t> values);

}  // namespace dtensor

#endif  // DTENSOR_BASE_JSON_TEXT_H_
