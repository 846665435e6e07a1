#ifndef DTENSOR_OPS_OP_ARGS_H_
#define DTENSOR_OPS_OP_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/base/debug_check.h"

namespace dtensor {

// What kind of value one argument of an op holds.
//   kInt, kInts, kBool, kDouble  attributes: they may change the shardings
//                                (dims, keepdim, ...), so they are part of
//                                the propagation cache key;
//   kScalar                      a number only the kernel reads (the other
//                                operand of `mul_scalar`, addmm's alpha): not
//                                part of the key, so a value that changes
//                                every step does not miss the cache.
enum class ArgKind : uint8_t { kInt, kInts, kBool, kDouble, kScalar };

// "int", "ints", "bool", "double", "scalar".
absl::string_view ArgKindName(ArgKind kind);

// One argument of an op's schema. `default_value` is text in the syntax of
// ParseOpArgs ("" is the empty list for kInts); nullptr marks a required
// argument. A literal type, so that a schema is a constexpr array its keys
// are looked up in at compile time (KeyOf).
struct ArgSpec {
  absl::string_view name;
  ArgKind kind;
  const char* default_value = nullptr;
};

// Reads the argument at `index` of a call as kind K (OpArgs::Get). Made by
// KeyOf from the op's schema, never by hand.
template <ArgKind K>
struct ArgKey {
  size_t index;
};

namespace op_args_internal {

// Not constexpr: KeyOf reaches one of them only for a bad name or kind, which
// in a constant expression is a compile error naming the function (and,
// evaluated at run time, aborts).
[[noreturn]] void ArgNameNotInSchema();
[[noreturn]] void ArgOfAnotherKind();

// a == b in a constant expression (absl::string_view's operator== is not
// constexpr in every Abseil build).
constexpr bool SameName(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// The position of `name` in `schema`; N when it has none.
template <size_t N>
constexpr size_t IndexOf(const ArgSpec (&schema)[N], absl::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (SameName(schema[i].name, name)) return i;
  }
  return N;
}

}  // namespace op_args_internal

// The key of the argument `name` of `schema`, which must be of kind K. It
// initializes a constexpr key next to the schema (see OpArgs), where a name
// `schema` lacks, or one of another kind, does not compile.
template <ArgKind K, size_t N>
constexpr ArgKey<K> KeyOf(const ArgSpec (&schema)[N], absl::string_view name) {
  const size_t index = op_args_internal::IndexOf(schema, name);
  if (index == N) op_args_internal::ArgNameNotInSchema();
  if (schema[index].kind != K) op_args_internal::ArgOfAnotherKind();
  return ArgKey<K>{index};
}

// Whether `schema` has an argument `name` of kind `kind`: what KeyOf requires
// to compile, as a value (for a static_assert).
template <size_t N>
constexpr bool HasArg(const ArgSpec (&schema)[N], absl::string_view name,
                      ArgKind kind) {
  const size_t index = op_args_internal::IndexOf(schema, name);
  return index < N && schema[index].kind == kind;
}

// The non-tensor arguments of one op call, in the order of the op's schema
// (OpDef::args). Small and heap-free for the common cases (up to 4
// arguments and 8 integers), because every dispatch builds one and hashes it.
//
// A caller adds the values in schema order; an op reads them by name, through
// the keys of its schema (KeyOf), checked at compile time and as cheap as an
// index:
//
//   constexpr ArgSpec kReduceArgs[] = {{"dims", ArgKind::kInts, ""},
//                                      {"keepdim", ArgKind::kBool, "false"}};
//   constexpr auto kDims = KeyOf<ArgKind::kInts>(kReduceArgs, "dims");
//   constexpr auto kKeepdim = KeyOf<ArgKind::kBool>(kReduceArgs, "keepdim");
//
//   OpArgs args;
//   args.AddInts(dims).AddBool(keepdim);
//   args.Get(kDims), args.Get(kKeepdim)
//
// Requires (Get): the call's arguments match the schema the key came from
//   (the dispatcher checks them, CheckOpArgs, before the op's functions run;
//   each Get debug-checks its argument's position and kind).
class OpArgs {
 public:
  OpArgs& AddInt(int64_t value);
  OpArgs& AddInts(absl::Span<const int64_t> values);
  OpArgs& AddBool(bool value);
  OpArgs& AddDouble(double value);
  OpArgs& AddScalar(double value);

  size_t size() const { return slots_.size(); }
  ArgKind kind(size_t i) const { return slots_[i].kind; }

  int64_t Get(ArgKey<ArgKind::kInt> key) const { return Int(key.index); }
  absl::Span<const int64_t> Get(ArgKey<ArgKind::kInts> key) const {
    return Ints(key.index);
  }
  bool Get(ArgKey<ArgKind::kBool> key) const { return Bool(key.index); }
  double Get(ArgKey<ArgKind::kDouble> key) const { return Double(key.index); }
  double Get(ArgKey<ArgKind::kScalar> key) const { return Scalar(key.index); }

  // "dims=[0, 1], keepdim=true" with the names of `schema` (positions past
  // the schema are named by their index).
  std::string ToString(absl::Span<const ArgSpec> schema) const;

  // Equality and hash over the propagation key: every argument's kind and
  // the values of all but the kScalar ones.
  friend bool operator==(const OpArgs& a, const OpArgs& b) {
    return a.slots_ == b.slots_ && a.words_ == b.words_;
  }
  friend bool operator!=(const OpArgs& a, const OpArgs& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const OpArgs& args) {
    for (const Slot& slot : args.slots_) {
      h = H::combine(std::move(h), slot.kind, slot.length);
    }
    return H::combine_contiguous(std::move(h), args.words_.data(),
                                 args.words_.size());
  }

 private:
  // The argument at position i, added as that kind.
  int64_t Int(size_t i) const {
    DT_DCHECK(Holds(i, ArgKind::kInt));
    return words_[slots_[i].offset];
  }
  absl::Span<const int64_t> Ints(size_t i) const {
    DT_DCHECK(Holds(i, ArgKind::kInts));
    return absl::MakeConstSpan(words_.data() + slots_[i].offset,
                               slots_[i].length);
  }
  bool Bool(size_t i) const {
    DT_DCHECK(Holds(i, ArgKind::kBool));
    return words_[slots_[i].offset] != 0;
  }
  double Double(size_t i) const;
  double Scalar(size_t i) const {
    DT_DCHECK(Holds(i, ArgKind::kScalar));
    return scalars_[slots_[i].offset];
  }
  // Whether position i exists and holds an argument of `kind`.
  bool Holds(size_t i, ArgKind kind) const {
    return i < slots_.size() && slots_[i].kind == kind;
  }

  struct Slot {
    ArgKind kind;
    // Into words_ (attributes) or scalars_ (kScalar).
    uint32_t offset;
    uint32_t length;

    friend bool operator==(const Slot& a, const Slot& b) {
      // Scalar offsets follow from the kinds; comparing them is harmless.
      return a.kind == b.kind && a.offset == b.offset && a.length == b.length;
    }
  };

  absl::InlinedVector<Slot, 4> slots_;
  // Integers, bools as 0/1, doubles bit-cast.
  absl::InlinedVector<int64_t, 8> words_;
  absl::InlinedVector<double, 2> scalars_;
};

// Whether `args` matches `schema`: one argument per entry, of its kind.
// Errors: a count or kind that differs (naming `op`, the position, the
// expected and the given kind).
absl::Status CheckOpArgs(absl::string_view op, absl::Span<const ArgSpec> schema,
                         const OpArgs& args);

// Builds the arguments of `op` from named text values (a command line's
// "--arg dims=0,1"), defaults filling the rest. Syntax by kind: kInt "-1";
// kInts "0,1" ("" is empty); kBool "true"/"false"/"1"/"0"; kDouble and kScalar
// "2.5".
// Errors: an unknown name, a malformed value, a missing required argument
// (each naming the argument).
absl::StatusOr<OpArgs> ParseOpArgs(
    absl::string_view op, absl::Span<const ArgSpec> schema,
    const std::map<std::string, std::string, std::less<>>& named);

}  // namespace dtensor

#endif  // DTENSOR_OPS_OP_ARGS_H_
