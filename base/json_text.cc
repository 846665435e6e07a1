#include "dtensor/base/json_text.h"

#include <cmath>
#include <cstdint>

namespace dtensor {

nlohmann::ordered_json JsonNumber(double value) {
  if (!std::isfinite(value)) return nullptr;
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return static_cast<int64_t>(value);
  }
  return value;
}

std::string DumpJson(const nlohmann::ordered_json& value) {
  // By default dump() throws on a string that is not valid UTF-8, and such
  // strings come from users (module, file and config names, trace labels).
  // dtensor reports errors as statuses and never throws across its API, and
  // one bad byte in a name should not cost the whole report, so each invalid
  // byte becomes U+FFFD and the text stays valid JSON.
  return value.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace dtensor
