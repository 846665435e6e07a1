#include "tests/fuzz/mutator.h"

#include <algorithm>
#include <utility>

namespace dtensor {
namespace fuzz {
namespace {

constexpr const char* kCommonTokens[] = {
    "0",
    "-1",
    "1",
    "2",
    "3",
    "7",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1e308",
    "-0",
    "nan",
    "inf",
    "1.5",
    "0x10",
    "1234567890123456789012345678901234567890",
    "",
    " ",
    ",",
    ":",
    "=",
    "x",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "\\",
    "\n",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "false",
    "*",
    ".",
    "..",
    "\xff",
    "\xc3\xa9"};

size_t Below(size_t n, std::mt19937_64& rng) {
  return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

}  // namespace

Mutator::Mutator(std::vector<std::string> dictionary)
    : tokens_(std::move(dictionary)) {
  tokens_.insert(tokens_.end(), std::begin(kCommonTokens),
                 std::end(kCommonTokens));
}

void Mutator::MutateOnce(std::string& text,
                         absl::Span<const std::string> corpus,
                         std::mt19937_64& rng) const {
  const size_t at = Below(text.size() + 1, rng);
  const size_t length = std::min(text.size() - at, 1 + Below(8, rng));
  switch (Below(7, rng)) {
    case 0:  // Flip a byte.
      if (at < text.size()) text[at] = static_cast<char>(Below(256, rng));
      break;
    case 1:  // Insert a random byte.
      text.insert(at, 1, static_cast<char>(Below(256, rng)));
      break;
    case 2:  // Delete a range.
      text.erase(at, length);
      break;
    case 3:  // Duplicate a range.
      text.insert(at, text.substr(at, length));
      break;
    case 4:  // Insert a token.
      text.insert(at, tokens_[Below(tokens_.size(), rng)]);
      break;
    case 5: {  // Replace a range with a token.
      text.replace(at, length, tokens_[Below(tokens_.size(), rng)]);
      break;
    }
    default: {  // Splice: a prefix of this input, a suffix of another.
      const std::string& other = corpus[Below(corpus.size(), rng)];
      text = text.substr(0, at) + other.substr(Below(other.size() + 1, rng));
      break;
    }
  }
}

std::string Mutator::Mutate(const std::string& input,
                            absl::Span<const std::string> corpus,
                            std::mt19937_64& rng) const {
  std::string text = input;
  const size_t rounds = 1 + Below(4, rng);
  for (size_t i = 0; i < rounds; ++i) MutateOnce(text, corpus, rng);
  return text;
}

}  // namespace fuzz
}  // namespace dtensor
