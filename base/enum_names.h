#ifndef DTENSOR_BASE_ENUM_NAMES_H_
#define DTENSOR_BASE_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dtensor {

// The names of an enum's values, for printing and parsing them: one table in
// place of a switch from value to name and a loop from name back to value.
// `Enum` numbers its values 0, 1, ..., kLast (the default numbering); the
// names are given in that order, one per value (checked at compile time):
//
//   constexpr EnumNames<ReduceOp, ReduceOp::kMin> kReduceOpNames(
//       "sum", "avg", "max", "min");
//   kReduceOpNames.Name(ReduceOp::kAvg);  // "avg"
//   kReduceOpNames.Parse("max");          // ReduceOp::kMax
//   kReduceOpNames.List();                // "sum, avg, max, min"
//
// Names are string literals; Name hands out the literal, which converts to
// std::string_view and absl::string_view alike.
template <typename Enum, Enum kLast>
class EnumNames {
 public:
  static constexpr size_t kCount = static_cast<size_t>(kLast) + 1;

  template <typename... Names>
  constexpr explicit EnumNames(const Names&... names) : names_{names...} {
    static_assert(sizeof...(Names) == kCount,
                  "EnumNames: one name per value of the enum, in value order");
  }

  // The name of `value`; "unknown" for an integer cast to `Enum` that names
  // none of its values.
  constexpr const char* Name(Enum value) const {
    const size_t index = static_cast<size_t>(value);
    return index < kCount ? names_[index] : "unknown";
  }

  // The value named exactly `name`, if there is one.
  constexpr std::optional<Enum> Parse(std::string_view name) const {
    for (size_t i = 0; i < kCount; ++i) {
      if (names_[i] == name) return static_cast<Enum>(i);
    }
    return std::nullopt;
  }

  // The names in value order, separated by ", ": the choices an error
  // message about an unknown name lists.
  std::string List() const {
    std::string list;
    for (size_t i = 0; i < kCount; ++i) {
      if (i > 0) list += ", ";
      list += names_[i];
    }
    return list;
  }

 private:
  const char* names_[kCount];
};

}  // namespace dtensor

#endif  // DTENSOR_BASE_ENUM_NAMES_H_
