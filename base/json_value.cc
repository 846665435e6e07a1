#include "dtensor/base/json_value.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/enum_names.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

JsonValue JsonValue::Bool(bool value) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = value;
  return v;
}

JsonValue JsonValue::Number(double value) {
  JsonValue v;
  v.kind_ = Kind::kNumber;
  v.number_ = value;
  return v;
}

JsonValue JsonValue::String(std::string value) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(value);
  return v;
}

JsonValue JsonValue::Array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = Kind::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::Object(std::vector<Member> members) {
  JsonValue v;
  v.kind_ = Kind::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const Member& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

constexpr EnumNames<JsonValue::Kind, JsonValue::Kind::kObject> kJsonKindNames(
    "null", "boolean", "number", "string", "array", "object");

absl::string_view JsonKindName(JsonValue::Kind kind) {
  return kJsonKindNames.Name(kind);
}

namespace {

// Deeper nesting is rejected rather than risking the stack on hostile input.
constexpr int kMaxDepth = 256;

// A recursive-descent parser over `text_`, `pos_` the next unread byte.
class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    DT_ASSIGN_OR_RETURN(JsonValue value, ParseValue(0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing text");
    return value;
  }

 private:
  // InvalidArgument naming the position and what is there.
  absl::Status Error(absl::string_view what) const {
    int64_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string found = pos_ >= text_.size()
                            ? std::string("end of input")
                            : absl::StrCat("'", text_.substr(pos_, 12), "'");
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", what, " at line ",
                                                   line, " column ", column,
                                                   " (found ", found, ")"));
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a value");
    char c = text_[pos_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') {
      DT_ASSIGN_OR_RETURN(std::string s, ParseString());
      return JsonValue::String(std::move(s));
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    if (Consume("true")) return JsonValue::Bool(true);
    if (Consume("false")) return JsonValue::Bool(false);
    if (Consume("null")) return JsonValue();
    return Error("expected a value");
  }

  absl::StatusOr<JsonValue> ParseObject(int depth) {
    ++pos_;  // '{'
    std::vector<JsonValue::Member> members;
    absl::flat_hash_set<std::string> keys;
    SkipSpace();
    if (Consume("}")) return JsonValue::Object(std::move(members));
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Error("expected a string key");
      }
      size_t key_pos = pos_;
      DT_ASSIGN_OR_RETURN(std::string key, ParseString());
      // A set, not a scan of `members`: an object of n keys costs O(n).
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        return Error(absl::StrCat("duplicate key \"", key, "\""));
      }
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      DT_ASSIGN_OR_RETURN(JsonValue value, ParseValue(depth + 1));
      members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Consume("}")) return JsonValue::Object(std::move(members));
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
  }

  absl::StatusOr<JsonValue> ParseArray(int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    SkipSpace();
    if (Consume("]")) return JsonValue::Array(std::move(items));
    while (true) {
      DT_ASSIGN_OR_RETURN(JsonValue value, ParseValue(depth + 1));
      items.push_back(std::move(value));
      SkipSpace();
      if (Consume("]")) return JsonValue::Array(std::move(items));
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
  }

  // Four hex digits at pos_, consumed.
  absl::StatusOr<uint32_t> ParseHex4() {
    if (pos_ + 4 > text_.size()) return Error("expected 4 hex digits");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_];
      int digit = (h >= '0' && h <= '9')   ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
      if (digit < 0) return Error("expected a hex digit");
      code = code * 16 + static_cast<uint32_t>(digit);
      ++pos_;
    }
    return code;
  }

  static void AppendUtf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // A \u escape after the "\u": one code unit, or a surrogate pair.
  absl::StatusOr<uint32_t> ParseUnicodeEscape() {
    DT_ASSIGN_OR_RETURN(uint32_t code, ParseHex4());
    if (code >= 0xDC00 && code <= 0xDFFF) return Error("lone low surrogate");
    if (code < 0xD800 || code > 0xDBFF) return code;
    if (!Consume("\\u")) return Error("expected a low surrogate");
    DT_ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
    if (low < 0xDC00 || low > 0xDFFF) return Error("expected a low surrogate");
    return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }

  absl::StatusOr<std::string> ParseString() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string");
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) return Error("unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          DT_ASSIGN_OR_RETURN(uint32_t code, ParseUnicodeEscape());
          AppendUtf8(code, out);
          break;
        }
        default:
          --pos_;
          return Error("unknown escape");
      }
    }
  }

  bool AtDigit() const {
    return pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9';
  }

  // The RFC 8259 number grammar, then strtod on the accepted text.
  absl::StatusOr<JsonValue> ParseNumber() {
    size_t start = pos_;
    Consume("-");
    if (!AtDigit()) return Error("expected a digit");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (AtDigit()) ++pos_;
    }
    if (Consume(".")) {
      if (!AtDigit()) return Error("expected a digit after '.'");
      while (AtDigit()) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!Consume("+")) Consume("-");
      if (!AtDigit()) return Error("expected an exponent digit");
      while (AtDigit()) ++pos_;
    }
    std::string literal(text_.substr(start, pos_ - start));
    return JsonValue::Number(std::strtod(literal.c_str(), nullptr));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return Parser(text).ParseDocument();
}

}  // namespace dtensor
