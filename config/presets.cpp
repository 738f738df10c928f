#include "config/presets.hpp"

#include <algorithm>

namespace dtsim::config {

const PresetFile* find_preset(std::string_view kind, std::string_view name) {
  const std::string path = "presets/" + std::string(kind) + "/" + std::string(name) + ".yaml";
  for (const PresetFile& f : embedded_presets()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

const PresetFile* find_preset_file(std::string_view name) {
  const std::string path = "presets/" + std::string(name) + ".yaml";
  for (const PresetFile& f : embedded_presets()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

std::vector<std::string> preset_names(std::string_view kind) {
  const std::string prefix = "presets/" + std::string(kind) + "/";
  std::vector<std::string> out;
  for (const PresetFile& f : embedded_presets()) {
    if (f.path.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = f.path.substr(prefix.size());
    if (rest.size() > 5) out.emplace_back(rest.substr(0, rest.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string closest(std::string_view name, const std::vector<std::string>& known) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  std::size_t best_d = name.size() / 2 + 2;
  for (const std::string& k : known) {
    const std::size_t d = distance(name, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

}  // namespace dtsim::config
