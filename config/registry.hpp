// The validation registry (data/registry.yaml): where each dataset under data/ comes from, and
// which default constants were derived from which datasets. Compiled into the binary like the
// presets, so that `--list-params` and the accuracy tables can say what each constant was fitted
// on, and whether a comparison is in-sample or held-out.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "config/reader.hpp"

namespace dtsim::config {

struct RegistryDataset {
  std::string id;
  std::vector<std::string> files;  // repository-relative; empty for figures only quoted
  std::string rows;                // which rows of a shared file ("system = ..."), or empty
  std::string kind;                // published, derived, quoted, measured
  std::string source, retrieved, hardware, software, measures;
};

struct RegistryConstant {
  std::string name;               // "compute.kernel_overhead", "links.nvlink3.efficiency"
  std::string where;              // file holding the default
  std::vector<std::string> from;  // dataset ids
  std::string how;
};

struct Registry {
  std::vector<RegistryDataset> datasets;
  std::vector<std::string> other_files;  // documentation and scripts under data/
  std::vector<RegistryConstant> constants;

  const RegistryDataset* dataset(std::string_view id) const;
  const RegistryConstant* constant(std::string_view name) const;
  // The datasets `constant` was derived from (empty: not from data in this registry).
  std::vector<std::string> sources_of(std::string_view constant) const;
  // True when `dataset` fed any of `constants`.
  bool fed_any(std::string_view dataset, const std::vector<std::string>& constants) const;
  // Every file the registry lists (dataset files and other files), each once, sorted.
  std::vector<std::string> files() const;
};

// What `--list-params` prints for a constant: "data: id, id" or "data: none (assumption, source
// code or datasheet; see its source)".
std::string data_sources_note(const Registry& reg, std::string_view constant);
// Prints the registry's constants whose names start with `prefix` and that no parameter table
// lists (the link efficiencies of presets/links.yaml), one line each, for `--list-params`.
void print_preset_constants(const Registry& reg, std::string_view prefix, std::FILE* out);

// Parses registry text; problems (missing fields, unknown dataset ids in `from`) go to ctx with
// file and line.
std::optional<Registry> parse_registry(const std::string& text, const std::string& file, LoadContext& ctx);
// The registry compiled into the binary from data/registry.yaml.
std::optional<Registry> embedded_registry(LoadContext& ctx);

}  // namespace dtsim::config
