#ifndef DTENSOR_TESTS_FUZZ_MUTATOR_H_
#define DTENSOR_TESTS_FUZZ_MUTATOR_H_

#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace dtensor {
namespace fuzz {

// Structure-aware byte mutations for text inputs: flips, inserts, deletes,
// duplicated ranges, splices with another input, tokens of the parsers'
// grammars ("S(", "},", "\"n_layers\":", "--mesh") and extreme numbers
// (0, -1, 2^31, 2^63, 1e308, 40-digit integers). Deterministic given `rng`.
class Mutator {
 public:
  // `dictionary`: extra tokens of the target's grammar.
  explicit Mutator(std::vector<std::string> dictionary);

  // One to four mutations of `input`; `corpus` (non-empty) gives splices.
  std::string Mutate(const std::string& input,
                     absl::Span<const std::string> corpus,
                     std::mt19937_64& rng) const;

 private:
  void MutateOnce(std::string& text, absl::Span<const std::string> corpus,
                  std::mt19937_64& rng) const;

  std::vector<std::string> tokens_;
};

}  // namespace fuzz
}  // namespace dtensor

#endif  // DTENSOR_TESTS_FUZZ_MUTATOR_H_
