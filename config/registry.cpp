#include "config/registry.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/presets.hpp"

namespace dtsim::config {

const RegistryDataset* Registry::dataset(std::string_view id) const {
  for (const auto& d : datasets) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

const RegistryConstant* Registry::constant(std::string_view name) const {
  for (const auto& c : constants) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<std::string> Registry::sources_of(std::string_view name) const {
  const RegistryConstant* c = constant(name);
  return c != nullptr ? c->from : std::vector<std::string>{};
}

bool Registry::fed_any(std::string_view ds, const std::vector<std::string>& names) const {
  for (const auto& n : names) {
    const auto from = sources_of(n);
    if (std::find(from.begin(), from.end(), ds) != from.end()) return true;
  }
  return false;
}

std::vector<std::string> Registry::files() const {
  std::set<std::string> all(other_files.begin(), other_files.end());
  for (const auto& d : datasets) all.insert(d.files.begin(), d.files.end());
  return {all.begin(), all.end()};
}

std::string data_sources_note(const Registry& reg, std::string_view constant) {
  const auto from = reg.sources_of(constant);
  if (from.empty()) return "data: none";
  return fmt::format("data: {}", fmt::join(from, ", "));
}

void print_preset_constants(const Registry& reg, std::string_view prefix, std::FILE* out) {
  for (const auto& c : reg.constants) {
    if (c.name.rfind(prefix, 0) != 0) continue;
    std::fprintf(out, "%-44s %-12s %s (%s) [%s]\n", c.name.c_str(), "(preset)", c.how.c_str(), c.where.c_str(),
                 data_sources_note(reg, c.name).c_str());
  }
}

namespace {

std::vector<std::string> string_list(MapReader& r, const std::string& key) {
  std::vector<std::string> out;
  YAML::Node n = r.node(key);
  if (!n.IsDefined() || n.IsNull()) {
    r.error(key, "is required (a list, [] when empty)");
    return out;
  }
  if (!n.IsSequence()) {
    r.error(key, "must be a list");
    return out;
  }
  for (const auto& item : n) {
    if (!item.IsScalar()) {
      r.error(key, "must be a list of strings");
      continue;
    }
    out.push_back(item.Scalar());
  }
  return out;
}

template <class F>
void each_item(MapReader& root, const std::string& key, F&& f) {
  YAML::Node list = root.node(key);
  if (!list.IsDefined() || !list.IsSequence()) {
    root.error(key, "is required (a list)");
    return;
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    MapReader item(list[i], fmt::format("{}[{}]", key, i), root.file(), root.context());
    if (item.ok()) f(item);
  }
}

}  // namespace

std::optional<Registry> parse_registry(const std::string& text, const std::string& file, LoadContext& ctx) {
  auto doc = parse_yaml(text, file, ctx);
  if (!doc) return std::nullopt;
  const std::size_t errors = ctx.diagnostics.size();
  MapReader root(*doc, "", file, ctx);
  Registry reg;
  root.integer("registry", true, 1, 1);
  each_item(root, "datasets", [&](MapReader& r) {
    RegistryDataset d;
    d.id = r.string("id", true).value_or("");
    d.files = string_list(r, "files");
    d.rows = r.string("rows").value_or("");
    d.kind = r.string("kind", true).value_or("");
    if (!d.kind.empty() && d.kind != "published" && d.kind != "derived" && d.kind != "quoted" && d.kind != "measured") {
      r.error("kind", fmt::format("'{}' is not a dataset kind (published, derived, quoted, measured)", d.kind));
    }
    for (auto [key, field] : {std::pair{"source", &d.source}, {"retrieved", &d.retrieved}, {"hardware", &d.hardware},
                              {"software", &d.software}, {"measures", &d.measures}}) {
      *field = r.string(key, true).value_or("");
    }
    if (reg.dataset(d.id) != nullptr) r.error("id", fmt::format("'{}' is listed twice", d.id));
    r.finish();
    reg.datasets.push_back(std::move(d));
  });
  each_item(root, "other_files", [&](MapReader& r) {
    reg.other_files.push_back(r.string("file", true).value_or(""));
    r.string("role", true);
    r.finish();
  });
  each_item(root, "constants", [&](MapReader& r) {
    RegistryConstant c;
    c.name = r.string("name", true).value_or("");
    c.where = r.string("where", true).value_or("");
    c.from = string_list(r, "from");
    c.how = r.string("how", true).value_or("");
    if (c.from.empty()) r.error("from", "names no dataset (leave constants that did not come from data out)");
    for (const auto& id : c.from) {
      if (reg.dataset(id) == nullptr) r.error("from", fmt::format("'{}' is not a dataset of this registry", id));
    }
    if (reg.constant(c.name) != nullptr) r.error("name", fmt::format("'{}' is listed twice", c.name));
    r.finish();
    reg.constants.push_back(std::move(c));
  });
  root.finish();
  if (ctx.diagnostics.size() != errors) return std::nullopt;
  return reg;
}

std::optional<Registry> embedded_registry(LoadContext& ctx) {
  for (const PresetFile& f : embedded_presets()) {
    if (f.path == "data/registry.yaml") return parse_registry(std::string(f.text), std::string(f.path), ctx);
  }
  ctx.diagnostics.error(Location{"data/registry.yaml", 0, 0}, "", "not compiled into this binary");
  return std::nullopt;
}

}  // namespace dtsim::config
