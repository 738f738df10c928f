#include "mutate.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

namespace dtsim::mutation {

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31U);
}

namespace {

template <std::size_t N>
std::string_view pick(const std::array<std::string_view, N>& options, Rng& rng) {
  return options[rng.below(N)];
}

// Values written in place of any value: other types, empties, edge numbers.
constexpr std::array<std::string_view, 26> kYamlValues = {
    "[]", "{}", "[1]", "{x: 1}", "\"\"", "~", "-1", "0", "-0.0", "0.5", "1e308", "1e400", "-1e400", "18446744073709551616",
    "9223372036854775807", "-9223372036854775808", "2147483648", "4294967297", ".nan", ".inf", "-.inf", "1e-320", "true",
    "not-a-value", "[[]]", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]"};
constexpr std::array<std::string_view, 24> kJsonValues = {
    "[]", "{}", "[1]", "{\"x\": 1}", "\"\"", "null", "-1", "0", "-0.0", "0.5", "1e308", "1e400", "-1e400",
    "18446744073709551616", "9223372036854775807", "-9223372036854775808", "2147483648", "4294967297", "NaN",
    "1e-320", "true", "\"not-a-value\"", "[[]]", "\"1e999\""};
constexpr std::array<std::string_view, 14> kNumbers = {"0",   "-1",  "99999999999999999999", "1e308", "nan",  "inf", "-0",
                                                       "",    "1.5", "4294967296",           "-1e9",  "1e-9", "9e18", "x"};

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  (void)std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// ---- text ----

std::vector<std::size_t> line_starts(const std::string& text) {
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == '\n') starts.push_back(i + 1);
  return starts;
}

std::pair<std::size_t, std::size_t> line_at(const std::string& text, std::size_t index) {
  const auto starts = line_starts(text);
  const std::size_t begin = starts[index % starts.size()];
  const std::size_t nl = text.find('\n', begin);
  return {begin, nl == std::string::npos ? text.size() : nl + 1};
}

Mutant text_edit(const std::string& original, Rng& rng) {
  if (original.empty()) return {"\n", "empty file given a newline"};
  std::string text = original;
  switch (rng.below(6)) {
    case 0: {
      const std::size_t at = rng.below(text.size());
      return {text.substr(0, at), "truncated at byte " + std::to_string(at)};
    }
    case 1: {
      static constexpr std::array<char, 18> kBytes = {'\0', '\n', ':', '-', '[', '{', '"', ',', '#',
                                                      '9',  ' ',  '\t', '\xff', '&', '*', '!', '|', '>'};
      const std::size_t flips = 1 + rng.below(4);
      std::string what = "bytes changed at";
      for (std::size_t i = 0; i < flips; ++i) {
        const std::size_t at = rng.below(text.size());
        if (rng.chance(50)) {
          text[at] = kBytes[rng.below(kBytes.size())];
        } else {
          text[at] = static_cast<char>(static_cast<unsigned char>(text[at]) ^ (1U << rng.below(8)));
        }
        what += " " + std::to_string(at);
      }
      return {text, what};
    }
    case 2: {
      const std::size_t n = line_starts(text).size();
      const std::size_t index = rng.below(n);
      const auto [b, e] = line_at(text, index);
      return {text.erase(b, e - b), "line " + std::to_string(index + 1) + " deleted"};
    }
    case 3: {
      const std::size_t n = line_starts(text).size();
      const std::size_t index = rng.below(n);
      const auto [b, e] = line_at(text, index);
      std::string line = text.substr(b, e - b);
      if (line.empty() || line.back() != '\n') line += '\n';
      return {text.insert(b, line), "line " + std::to_string(index + 1) + " doubled"};
    }
    default: {
      // A number token (a run of digits, with its sign, point and exponent) replaced by an edge value.
      std::vector<std::pair<std::size_t, std::size_t>> tokens;
      for (std::size_t i = 0; i < text.size();) {
        if (std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
          std::size_t b = i;
          if (b > 0 && text[b - 1] == '-') --b;
          while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.' ||
                                     text[i] == 'e' || text[i] == 'E'))
            ++i;
          tokens.emplace_back(b, i - b);
        } else {
          ++i;
        }
      }
      if (tokens.empty()) return {text.substr(0, text.size() / 2), "cut in half (no number)"};
      const auto [b, n] = tokens[rng.below(tokens.size())];
      const std::string_view value = pick(kNumbers, rng);
      const std::string was = text.substr(b, n);
      return {text.replace(b, n, value), "number " + was + " at byte " + std::to_string(b) + " -> '" + std::string(value) + "'"};
    }
  }
}

// ---- YAML ----

// Where a node sits: the root, a map value under `key`, or a sequence element at `index`.
struct YamlSlot {
  YAML::Node node;
  YAML::Node parent;
  YAML::Node key;
  std::size_t index = 0;
  std::string path;
};

void collect(const YAML::Node& node, const YAML::Node& parent, const YAML::Node& key, std::size_t index,
             const std::string& path, std::vector<YamlSlot>& out) {
  out.push_back({node, parent, key, index, path});
  if (node.IsMap()) {
    for (const auto& kv : node) collect(kv.second, node, kv.first, 0, path + "." + kv.first.as<std::string>(""), out);
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) collect(node[i], node, YAML::Node(), i, path + "[" + std::to_string(i) + "]", out);
  }
}

void replace(YAML::Node& root, const YamlSlot& slot, const YAML::Node& value) {
  if (!slot.parent) {
    root = value;
  } else {
    YAML::Node parent = slot.parent;  // a handle: writing through it edits the tree
    if (parent.IsMap()) {
      parent[slot.key] = value;
    } else {
      parent[slot.index] = value;
    }
  }
}

std::optional<Mutant> yaml_edit(const std::string& original, Rng& rng) {
  YAML::Node root;
  try {
    root = YAML::Load(original);
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  std::vector<YamlSlot> slots;
  collect(root, YAML::Node(), YAML::Node(), 0, "", slots);
  const YamlSlot slot = slots[rng.below(slots.size())];
  const std::string where = slot.path.empty() ? "(root)" : slot.path;
  std::string edit;
  if (slot.node.IsMap() && slot.node.size() > 0 && rng.chance(60)) {
    YAML::Node copy = YAML::Clone(slot.node);
    const std::size_t victim = rng.below(copy.size());
    std::size_t i = 0;
    YAML::Node key;
    for (const auto& kv : copy)
      if (i++ == victim) key = kv.first;
    if (rng.chance(70)) {
      copy.remove(key);
      edit = "deleted " + where + "." + key.as<std::string>("?");
    } else {
      copy["zz_unknown_" + key.as<std::string>("k")] = 1;
      edit = "added an unknown key beside " + where + "." + key.as<std::string>("?");
    }
    replace(root, slot, copy);
  } else if (slot.node.IsSequence() && slot.node.size() > 0 && rng.chance(60)) {
    YAML::Node copy(YAML::NodeType::Sequence);
    const std::size_t victim = rng.below(slot.node.size());
    const bool drop = rng.chance(50);
    for (std::size_t i = 0; i < slot.node.size(); ++i) {
      if (i != victim || !drop) copy.push_back(YAML::Clone(slot.node[i]));
      if (i == victim && !drop) copy.push_back(YAML::Clone(slot.node[i]));
    }
    edit = (drop ? "dropped " : "doubled ") + where + "[" + std::to_string(victim) + "]";
    replace(root, slot, copy);
  } else {
    std::string value(pick(kYamlValues, rng));
    if (slot.node.IsScalar() && is_number(slot.node.Scalar()) && rng.chance(40)) {
      const double v = std::strtod(slot.node.Scalar().c_str(), nullptr);
      const std::array<double, 4> derived = {v * 1e6, -v, v + 0.5, v * 1e15};
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", derived[rng.below(derived.size())]);
      value = buf;
    }
    replace(root, slot, YAML::Load(value));
    edit = where + " = " + value;
  }
  YAML::Emitter out;
  out << root;
  if (!out.good()) return std::nullopt;
  return Mutant{std::string(out.c_str()) + "\n", edit};
}

// ---- JSON ----

void collect(const nlohmann::json& j, const nlohmann::json::json_pointer& at, std::vector<nlohmann::json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) collect(it.value(), at / it.key(), out);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, out);
  }
}

constexpr std::string_view kMarker = "\"@@dtsim-mutation@@\"";

std::optional<Mutant> json_edit(const std::string& original, Rng& rng, int indent) {
  nlohmann::json root = nlohmann::json::parse(original, nullptr, false);
  if (root.is_discarded()) return std::nullopt;
  std::vector<nlohmann::json::json_pointer> pointers;
  collect(root, nlohmann::json::json_pointer(), pointers);
  const auto at = pointers[rng.below(pointers.size())];
  nlohmann::json& node = root[at];
  const std::string where = at.to_string().empty() ? "(root)" : at.to_string();
  std::string edit;
  std::string raw;
  if (node.is_object() && !node.empty() && rng.chance(50)) {
    auto it = node.begin();
    std::advance(it, static_cast<long>(rng.below(node.size())));
    edit = "deleted " + where + "/" + it.key();
    node.erase(it);
  } else if (node.is_array() && !node.empty() && rng.chance(50)) {
    const std::size_t victim = rng.below(node.size());
    if (rng.chance(50)) {
      node.erase(victim);
      edit = "dropped " + where + "/" + std::to_string(victim);
    } else {
      const nlohmann::json copy = node[victim];  // not a reference into the array it grows
      node.insert(node.begin() + static_cast<long>(victim), copy);
      edit = "doubled " + where + "/" + std::to_string(victim);
    }
  } else {
    raw = std::string(pick(kJsonValues, rng));
    if (node.is_number() && rng.chance(40)) {
      const double v = node.get<double>();
      const std::array<double, 4> derived = {v * 1e6, -v, v + 0.5, v * 1e15};
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", derived[rng.below(derived.size())]);
      raw = buf;
    }
    node = std::string(kMarker.substr(1, kMarker.size() - 2));
    edit = where + " = " + raw;
  }
  std::string text = root.dump(indent);
  if (!raw.empty()) {
    const std::size_t pos = text.find(kMarker);
    if (pos != std::string::npos) text.replace(pos, kMarker.size(), raw);
  }
  return Mutant{text + "\n", edit};
}

std::optional<Mutant> jsonl_edit(const std::string& original, Rng& rng) {
  const auto starts = line_starts(original);
  const std::size_t index = rng.below(starts.size());
  const auto [b, e] = line_at(original, index);
  std::string line = original.substr(b, e - b);
  const bool newline = !line.empty() && line.back() == '\n';
  if (newline) line.pop_back();
  auto mutant = json_edit(line, rng, -1);
  if (!mutant) return std::nullopt;
  if (!newline && !mutant->text.empty()) mutant->text.pop_back();
  std::string text = original;
  text.replace(b, e - b, mutant->text);
  return Mutant{text, "line " + std::to_string(index + 1) + ": " + mutant->edit};
}

}  // namespace

Mutant mutate(const std::string& original, Format format, Rng& rng) {
  // Half the cases edit the structure (when the file parses), the other half the bytes.
  if (format != Format::text && rng.chance(60)) {
    std::optional<Mutant> m;
    if (format == Format::yaml) m = yaml_edit(original, rng);
    if (format == Format::json) m = json_edit(original, rng, 2);
    if (format == Format::jsonl) m = jsonl_edit(original, rng);
    if (m) return *m;
  }
  return text_edit(original, rng);
}

}  // namespace dtsim::mutation
