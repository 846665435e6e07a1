#ifndef DTENSOR_BASE_JSON_VALUE_H_
#define DTENSOR_BASE_JSON_VALUE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtensor {

// A parsed JSON document (RFC 8259): null, a boolean, a number (as double), a
// string (UTF-8), an array or an object. Objects keep their members in text
// order, so that errors and traversals follow the file. A value type.
class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;  // null
  static JsonValue Bool(bool value);
  static JsonValue Number(double value);
  static JsonValue String(std::string value);
  static JsonValue Array(std::vector<JsonValue> items);
  static JsonValue Object(std::vector<Member> members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // The payloads; each is meaningful only for its kind (default otherwise).
  bool bool_value() const { return bool_; }
  double number_value() const { return number_; }
  const std::string& string_value() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }

  // The member called `key` of an object, or nullptr (also for non-objects).
  const JsonValue* Find(absl::string_view key) const;

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

// "null", "true", "object", ... for messages.
absl::string_view JsonKindName(JsonValue::Kind kind);

// Parses one JSON document (surrounding whitespace allowed).
// Errors: InvalidArgument naming the line, column and what was found there;
// an object with a repeated key, naming the key.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace dtensor

#endif  // DTENSOR_BASE_JSON_VALUE_H_
