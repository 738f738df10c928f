// Fuzz entry points: one per loader, each taking raw bytes through the very functions the command
// line calls for that kind of file (docs/fuzzing.md). The libFuzzer binaries (fuzz_main.cpp) and
// the regression replay of the ordinary test suite (tests/fuzz/) both call them, so a crash found
// by one is reproduced by the other.
//
// An entry returns normally for any input, good or bad. A crash, a sanitizer report or a broken
// contract (a load that fails without saying why) aborts: that is what the fuzzer looks for.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace dtsim::fuzz {

struct Target {
  std::string_view name;       // fuzz_<name> binary, tests/fuzz/regressions/<name>/
  std::string_view extension;  // of the file the input is written to (loaders look at it)
  void (*run)(std::string_view input);
};

// Every target, in a fixed order.
std::span<const Target> targets();
// The target named `name`; nullptr when there is none.
const Target* find_target(std::string_view name);

// Limits past which an input is loaded but not simulated: each input must run in milliseconds.
// (The loaders refuse sizes beyond their own, much larger limits with a message.)
inline constexpr int kMaxSimulatedGpus = 256;
inline constexpr long long kMaxSimulatedMicroBatches = 64;   // per pipeline, per step
inline constexpr int kMaxSimulatedLayers = 256;
// Layers x micro-batches: a step's events grow with their product (Llama 2 7B with FSDP, 32 layers
// x 16 micro-batches, is 67,000 events: 0.06 s in a release build, 2.3 s under the fuzzers'
// sanitizers, past libFuzzer's 10 s slow-unit report on a loaded machine).
inline constexpr long long kMaxSimulatedLayerPasses = 256;
inline constexpr int kMaxSweepPoints = 4;                     // points of a sweep loaded per input

// The simulate target's input is a configuration YAML; lines `#--set KEY=VALUE` (comments to the
// YAML parser) are also applied as `--set` overrides, so that the fuzzer explores both paths.
inline constexpr std::string_view kSetPrefix = "#--set ";

// The entries of each family (entries_config.cpp, entries_data.cpp).
void simulate(std::string_view input);
void cluster(std::string_view input);
void plan(std::string_view input);
void sweep(std::string_view input);
void profile(std::string_view input);
void hf_config(std::string_view input);
void records(std::string_view input);
void nccl_tests(std::string_view input);
void published(std::string_view input);
void trace(std::string_view input);
void kernel_csv(std::string_view input);
void graph(std::string_view input);

// The loaders read files: the input written to a file of this process (the same file every time,
// in $TMPDIR or /tmp), named "input.<extension>". Returns its path.
std::string scratch_file(std::string_view input, std::string_view extension);

// Aborts (a finding) with `what` on stderr: a loader broke its contract.
[[noreturn]] void contract_broken(const std::string& what);

}  // namespace dtsim::fuzz
