// One libFuzzer binary per target (DTSIM_FUZZ_TARGET names it; fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::fuzz::Target* target = dtsim::fuzz::find_target(DTSIM_FUZZ_TARGET);
  if (target == nullptr) dtsim::fuzz::contract_broken("no fuzz target named " DTSIM_FUZZ_TARGET);
  target->run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
