// Small text helpers shared across modules.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace dtsim {

// `s` with ASCII letters in lower case (std::tolower in the "C" locale; other bytes as they are).
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace dtsim
