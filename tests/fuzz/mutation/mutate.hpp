// Mutations of the bundled input files for the issue-15 mutation run (docs/fuzzing.md, "The mutation
// run"): structure-aware edits of YAML and JSON (a value replaced by another type, an empty or a
// one-element list, an empty map, a huge, negative, infinite or NaN number, a null; a key deleted,
// duplicated or added) and byte-level edits of any text (truncation, byte flips, a line deleted or
// doubled, a number token replaced). Pure functions of the input and a seeded generator, so that a
// case is reproduced from (seed, case index) alone.
#pragma once

#include <cstdint>
#include <string>

namespace dtsim::mutation {

// splitmix64: a small, fully specified generator (the same sequence on every platform and library,
// unlike std::uniform_int_distribution).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n); n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  std::uint64_t state_;
};

enum class Format { yaml, json, jsonl, text };

// One mutated file and a short description of the edit (for the findings list).
struct Mutant {
  std::string text;
  std::string edit;
};

Mutant mutate(const std::string& original, Format format, Rng& rng);

}  // namespace dtsim::mutation
