// Reading YAML into plain structs: every problem becomes a Diagnostic naming the file, line,
// column and field; all problems of a document are collected before giving up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/expected.hpp"
#include "sim/units.hpp"

namespace dtsim::config {

struct Location {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
};

struct Diagnostic {
  Location where;
  std::string field;
  std::string message;
  std::string to_string() const;  // "file:line:col: field: message"
};

class Diagnostics {
 public:
  void error(Location where, std::string field, std::string message);
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  std::string to_string() const;  // one line per diagnostic

 private:
  std::vector<Diagnostic> items_;
};

// Where each setting of a resolved configuration came from, by dotted field path. Lets errors that
// the model finds later (a disconnected fabric, say) still point at a file and line.
class SourceMap {
 public:
  void add(const std::string& field, Location where);
  void add_if_absent(const std::string& field, Location where);
  // The location of `field`, or of its nearest recorded parent.
  Location find(const std::string& field) const;

 private:
  std::map<std::string, Location> entries_;
};

// Shared state of one load: where to report problems and record locations.
struct LoadContext {
  Diagnostics diagnostics;
  SourceMap sources;
  // Every file the load read from disk (presets are built in), with a hash of its bytes: what a
  // results file's fingerprint must cover besides the configuration's own text.
  std::map<std::string, std::string> inputs;
  // Notes for the result: defaults a setting silently inherited (a NIC kind given without its
  // count, say). Not errors: they are shown with the result.
  std::vector<std::string> notes;
  // Reports a model-level error (field path relative to the configuration) with its location.
  void report(const Error& e);
};

// A 64-bit FNV-1a hash of `bytes`, as 16 hex digits (fingerprints, not security).
std::string content_hash(const std::string& bytes);

// Parses YAML text. On failure reports a diagnostic and returns nullopt.
std::optional<YAML::Node> parse_yaml(const std::string& text, const std::string& file, LoadContext& ctx);
// Reads and parses a file from disk.
std::optional<YAML::Node> load_yaml_file(const std::string& path, LoadContext& ctx);

// A YAML mapping being read: typed getters report problems (wrong type, bad unit, out of range,
// missing required key) and return nullopt; finish() reports keys nobody asked for.
class MapReader {
 public:
  // Reports an error (and yields an empty reader) when `node` is not a mapping.
  MapReader(YAML::Node node, std::string path, std::string file, LoadContext& ctx);

  bool ok() const { return ok_; }
  bool has(const std::string& key) const;
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  LoadContext& context() const { return *ctx_; }
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  Location location() const;
  Location location(const std::string& key) const;
  void error(const std::string& key, std::string message) const;
  void error_here(std::string message) const;

  // Raw access (marks the key as used).
  YAML::Node node(const std::string& key);

  std::optional<std::string> string(const std::string& key, bool required = false);
  std::optional<std::int64_t> integer(const std::string& key, bool required, std::int64_t min, std::int64_t max);
  std::optional<double> number(const std::string& key, bool required, double min, double max);
  std::optional<bool> boolean(const std::string& key, bool required = false);
  std::optional<Bytes> bytes(const std::string& key, bool required = false);
  std::optional<Bandwidth> bandwidth(const std::string& key, bool required = false);  // > 0
  std::optional<Time> time(const std::string& key, bool required = false);            // >= 0
  std::optional<FlopRate> flop_rate(const std::string& key, bool required = false);   // > 0
  // A power in watts ("700 W", "1.2 kW") or a frequency in hertz ("1980 MHz"), optional, refused
  // outside [min, max] as "TEXT is not WHAT" (WHAT states the range: "a GPU's power (1 W to 10 kW)").
  std::optional<double> power(const std::string& key, double min, double max, const char* what);
  std::optional<double> frequency(const std::string& key, double min, double max, const char* what);
  std::optional<std::vector<std::int64_t>> int_list(const std::string& key, bool required, std::int64_t min, std::int64_t max);
  std::optional<MapReader> map(const std::string& key, bool required = false);

  // Reports every key that no getter asked for, with the closest known key as a hint.
  void finish(const std::vector<std::string>& also_known = {});

 private:
  std::optional<std::string> scalar(const std::string& key, bool required);
  // A scalar with a unit, parsed by `parse`; when `positive_what` is set, zero is an error too.
  template <class T, class Parse>
  std::optional<T> quantity(const std::string& key, bool required, Parse parse, const char* positive_what);
  std::optional<double> ranged(const std::string& key, Expected<double> (*parse)(std::string_view), double min, double max, const char* what);

  YAML::Node node_;
  std::string path_;
  std::string file_;
  LoadContext* ctx_;
  bool ok_ = true;
  std::set<std::string> used_;
};

Location location_of(const YAML::Node& n, const std::string& file);

// A file named inside another file: relative to that file's folder when it exists there, else as
// given (relative to the working directory).
std::string resolve_path(const std::string& ref, const std::string& from_file);

}  // namespace dtsim::config
