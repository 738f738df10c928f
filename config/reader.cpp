#include "config/reader.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "config/presets.hpp"

namespace dtsim::config {

std::string Diagnostic::to_string() const {
  std::string out = where.file.empty() ? std::string("<input>") : where.file;
  if (where.line > 0) out += fmt::format(":{}:{}", where.line, where.column);
  out += ": ";
  if (!field.empty()) out += field + ": ";
  out += message;
  return out;
}

void Diagnostics::error(Location where, std::string field, std::string message) {
  items_.push_back(Diagnostic{std::move(where), std::move(field), std::move(message)});
}

std::string Diagnostics::to_string() const {
  std::string out;
  for (const auto& d : items_) out += "error: " + d.to_string() + "\n";
  return out;
}

void SourceMap::add(const std::string& field, Location where) { entries_.insert_or_assign(field, std::move(where)); }
void SourceMap::add_if_absent(const std::string& field, Location where) { entries_.emplace(field, std::move(where)); }

Location SourceMap::find(const std::string& field) const {
  std::string f = field;
  while (true) {
    const auto it = entries_.find(f);
    if (it != entries_.end()) return it->second;
    // Drop the last component: "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "".
    const auto dot = f.find_last_of(".[");
    if (dot == std::string::npos) break;
    f.erase(dot);
  }
  const auto it = entries_.find("");
  return it == entries_.end() ? Location{} : it->second;
}

void LoadContext::report(const Error& e) { diagnostics.error(sources.find(e.field), e.field, e.message); }

std::string resolve_path(const std::string& ref, const std::string& from_file) {
  namespace fs = std::filesystem;
  const fs::path p(ref);
  if (ref.empty() || p.is_absolute() || from_file.empty()) return ref;
  std::error_code ec;
  const fs::path from(from_file);
  if (!fs::is_regular_file(from, ec)) return ref;  // presets and command-line pseudo-files
  const fs::path beside = from.parent_path() / p;
  if (fs::exists(beside, ec)) return beside.lexically_normal().string();
  return ref;
}

Location location_of(const YAML::Node& n, const std::string& file) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return Location{file, 0, 0};
  return Location{file, m.line + 1, m.column + 1};
}

namespace {

// YAML requires the keys of a mapping to be unique; yaml-cpp keeps a repeated key but every lookup
// finds the first, so the second would be ignored without a word. Reports each repeat at its line.
// Iterative (a stack, not recursion): a fuzzed file may nest thousands deep.
bool check_unique_keys(const YAML::Node& root, const std::string& file, LoadContext& ctx) {
  bool ok = true;
  std::vector<YAML::Node> todo{root};
  std::set<int> visited;  // text positions of the collections seen: an alias (*a) is its anchor's node, walked once
  while (!todo.empty()) {
    const YAML::Node n = todo.back();
    todo.pop_back();
    if ((n.IsSequence() || n.IsMap()) && !visited.insert(n.Mark().pos).second) continue;
    if (n.IsSequence()) {
      for (const auto& child : n) todo.push_back(child);
    } else if (n.IsMap()) {
      std::map<std::string, int> seen;  // key -> its first line
      for (const auto& kv : n) {
        todo.push_back(kv.second);
        if (!kv.first.IsScalar()) continue;
        const int line = kv.first.Mark().line + 1;
        if (auto [it, fresh] = seen.emplace(kv.first.Scalar(), line); !fresh) {
          ctx.diagnostics.error(Location{file, line, kv.first.Mark().column + 1}, kv.first.Scalar(),
                                fmt::format("is given twice in the same mapping (first at line {}); YAML keys must be unique", it->second));
          ok = false;
        }
      }
    }
  }
  return ok;
}

}  // namespace

std::optional<YAML::Node> parse_yaml(const std::string& text, const std::string& file, LoadContext& ctx) {
  try {
    YAML::Node n = YAML::Load(text);
    if (!n || n.IsNull()) {
      ctx.diagnostics.error(Location{file, 1, 1}, "", "the file is empty");
      return std::nullopt;
    }
    if (!check_unique_keys(n, file, ctx)) return std::nullopt;
    ctx.sources.add_if_absent("", location_of(n, file));  // the first document loaded is the root
    return n;
  } catch (const YAML::ParserException& e) {
    ctx.diagnostics.error(Location{file, e.mark.line + 1, e.mark.column + 1}, "", "malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    ctx.diagnostics.error(Location{file, 0, 0}, "", std::string("malformed YAML: ") + e.what());
  }
  return std::nullopt;
}

std::optional<YAML::Node> load_yaml_file(const std::string& path, LoadContext& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.diagnostics.error(Location{path, 0, 0}, "", "cannot open the file");
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ctx.inputs[path] = content_hash(text);
  return parse_yaml(text, path, ctx);
}

std::string content_hash(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

MapReader::MapReader(YAML::Node node, std::string path, std::string file, LoadContext& ctx)
    : node_(std::move(node)), path_(std::move(path)), file_(std::move(file)), ctx_(&ctx) {
  if (!node_.IsMap()) {
    ok_ = false;
    ctx_->diagnostics.error(location(), path_, "expected a mapping of key: value pairs");
    node_ = YAML::Node(YAML::NodeType::Map);
  }
  ctx_->sources.add_if_absent(path_, location());
}

bool MapReader::has(const std::string& key) const {
  const YAML::Node n = node_[key];
  return n.IsDefined() && !n.IsNull();
}

Location MapReader::location() const { return location_of(node_, file_); }

Location MapReader::location(const std::string& key) const {
  // The key's own position ("switches:"), which reads better than where its value starts.
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return location_of(it->first, file_);
  }
  return location();
}

void MapReader::error(const std::string& key, std::string message) const {
  ctx_->diagnostics.error(location(key), field(key), std::move(message));
}

void MapReader::error_here(std::string message) const { ctx_->diagnostics.error(location(), path_, std::move(message)); }

YAML::Node MapReader::node(const std::string& key) {
  used_.insert(key);
  YAML::Node n = node_[key];
  if (n.IsDefined()) ctx_->sources.add(field(key), location(key));
  return n;
}

std::optional<std::string> MapReader::scalar(const std::string& key, bool required) {
  YAML::Node n = node(key);
  if (!n.IsDefined() || n.IsNull()) {
    if (required) error(key, "is required");
    return std::nullopt;
  }
  if (!n.IsScalar()) {
    error(key, "expected a single value, not a list or mapping");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<std::string> MapReader::string(const std::string& key, bool required) { return scalar(key, required); }

std::optional<std::int64_t> MapReader::integer(const std::string& key, bool required, std::int64_t min, std::int64_t max) {
  auto s = scalar(key, required);
  if (!s) return std::nullopt;
  std::int64_t v = 0;
  std::size_t used = 0;
  try {
    v = std::stoll(*s, &used, 10);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s->size()) {
    error(key, fmt::format("'{}' is not a whole number", *s));
    return std::nullopt;
  }
  if (v < min || v > max) {
    error(key, fmt::format("{} is out of range (expected {} to {})", v, min, max));
    return std::nullopt;
  }
  return v;
}

std::optional<double> MapReader::number(const std::string& key, bool required, double min, double max) {
  auto s = scalar(key, required);
  if (!s) return std::nullopt;
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(*s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s->size() || !std::isfinite(v)) {
    error(key, fmt::format("'{}' is not a number", *s));
    return std::nullopt;
  }
  if (v < min || v > max) {
    error(key, fmt::format("{} is out of range (expected {} to {})", v, min, max));
    return std::nullopt;
  }
  return v;
}

std::optional<bool> MapReader::boolean(const std::string& key, bool required) {
  auto s = scalar(key, required);
  if (!s) return std::nullopt;
  if (*s == "true" || *s == "yes" || *s == "on") return true;
  if (*s == "false" || *s == "no" || *s == "off") return false;
  error(key, fmt::format("'{}' is not true or false", *s));
  return std::nullopt;
}

namespace {
double magnitude(const Bytes& b) { return b.as_double(); }
double magnitude(const Bandwidth& b) { return b.bytes_per_s(); }
double magnitude(const Time& t) { return t.seconds(); }
double magnitude(const FlopRate& r) { return r.flops_per_s(); }
double magnitude(double v) { return v; }
}  // namespace

template <class T, class Parse>
std::optional<T> MapReader::quantity(const std::string& key, bool required, Parse parse, const char* positive_what) {
  auto s = scalar(key, required);
  if (!s) return std::nullopt;
  auto v = parse(*s);
  if (!v) {
    error(key, v.error().message);
    return std::nullopt;
  }
  if (positive_what != nullptr && !(magnitude(*v) > 0)) {
    error(key, fmt::format("'{}': a {} must be positive", *s, positive_what));
    return std::nullopt;
  }
  return *v;
}

std::optional<Bytes> MapReader::bytes(const std::string& key, bool required) {
  return quantity<Bytes>(key, required, parse_bytes, nullptr);
}
std::optional<Bandwidth> MapReader::bandwidth(const std::string& key, bool required) {
  return quantity<Bandwidth>(key, required, parse_bandwidth, "bandwidth");
}
std::optional<Time> MapReader::time(const std::string& key, bool required) {
  return quantity<Time>(key, required, parse_time, nullptr);
}
std::optional<FlopRate> MapReader::flop_rate(const std::string& key, bool required) {
  return quantity<FlopRate>(key, required, parse_flop_rate, "compute rate");
}

std::optional<double> MapReader::ranged(const std::string& key, Expected<double> (*parse)(std::string_view), double min, double max,
                                        const char* what) {
  auto v = quantity<double>(key, false, parse, nullptr);
  if (v && !(*v >= min && *v <= max)) {
    error(key, fmt::format("{} is not {}", node(key).Scalar(), what));
    return std::nullopt;
  }
  return v;
}
std::optional<double> MapReader::power(const std::string& key, double min, double max, const char* what) {
  return ranged(key, parse_power, min, max, what);
}
std::optional<double> MapReader::frequency(const std::string& key, double min, double max, const char* what) {
  return ranged(key, parse_frequency, min, max, what);
}

std::optional<std::vector<std::int64_t>> MapReader::int_list(const std::string& key, bool required, std::int64_t min,
                                                            std::int64_t max) {
  YAML::Node n = node(key);
  if (!n.IsDefined() || n.IsNull()) {
    if (required) error(key, "is required");
    return std::nullopt;
  }
  if (!n.IsSequence()) {
    error(key, "expected a list such as [0, 1]");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const YAML::Node item = n[i];
    std::int64_t v = 0;
    std::size_t used = 0;
    const std::string s = item.IsScalar() ? item.Scalar() : std::string();
    try {
      v = std::stoll(s, &used, 10);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != s.size() || v < min || v > max) {
      ctx_->diagnostics.error(location_of(item, file_), fmt::format("{}[{}]", field(key), i),
                              fmt::format("'{}' is not a whole number from {} to {}", s, min, max));
      return std::nullopt;
    }
    out.push_back(v);
  }
  return out;
}

std::optional<MapReader> MapReader::map(const std::string& key, bool required) {
  YAML::Node n = node(key);
  if (!n.IsDefined() || n.IsNull()) {
    if (required) error(key, "is required");
    return std::nullopt;
  }
  MapReader r(n, field(key), file_, *ctx_);
  if (!r.ok()) return std::nullopt;
  return r;
}

namespace {

// Names other tools give to dtsim's keys (Megatron-LM, DeepSpeed, PyTorch, Hugging Face), so that an
// unknown key is answered with the key meant rather than the nearest spelling.
const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> a = {
      {"tensor_parallel", "tp"}, {"tensor_model_parallel_size", "tp"}, {"tensor_parallel_size", "tp"}, {"tp_size", "tp"},
      {"pipeline_parallel", "pp"}, {"pipeline_model_parallel_size", "pp"}, {"pipeline_parallel_size", "pp"}, {"pp_size", "pp"},
      {"data_parallel", "dp"}, {"data_parallel_size", "dp"}, {"dp_size", "dp"},
      {"context_parallel", "cp"}, {"context_parallel_size", "cp"}, {"cp_size", "cp"}, {"cp_comm_type", "cp_comm"},
      {"expert_parallel", "ep"}, {"expert_model_parallel_size", "ep"}, {"expert_parallel_size", "ep"}, {"ep_size", "ep"},
      {"zero_stage", "zero"}, {"zero_optimization", "zero"}, {"fsdp", "zero"},
      {"micro_batch_size", "micro_batch"}, {"train_micro_batch_size_per_gpu", "micro_batch"}, {"micro_batch_per_gpu", "micro_batch"},
      {"global_batch_size", "global_batch"}, {"train_batch_size", "global_batch"}, {"batch_size", "global_batch"},
      {"seq_length", "seq_len"}, {"sequence_length", "seq_len"}, {"seqlen", "seq_len"}, {"max_seq_len", "seq_len"},
      {"bucket_cap_mb", "bucket"}, {"bucket_size", "bucket"},
      {"recompute_granularity", "recompute"}, {"activation_checkpointing", "recompute"}, {"gradient_checkpointing", "recompute"},
      {"num_nodes", "nodes"}, {"dtype", "precision"}, {"mixed_precision", "precision"},
      {"virtual_pipeline_model_parallel_size", "virtual_stages"}, {"pipeline_schedule", "schedule"}};
  return a;
}

// The top-level section of a simulate configuration each of these keys lives in.
const std::map<std::string, std::string>& key_sections() {
  static const std::map<std::string, std::string> s = {
      {"global_batch", "training"}, {"micro_batch", "training"}, {"seq_len", "training"}, {"precision", "training"},
      {"grad_dtype", "training"}, {"recompute", "training"}, {"optimizer", "training"}, {"attention", "training"},
      {"tokens", "training"}, {"samples", "training"}, {"epochs", "training"}, {"data", "training"},
      {"tp", "parallel"}, {"pp", "parallel"}, {"dp", "parallel"}, {"cp", "parallel"}, {"cp_comm", "parallel"}, {"ep", "parallel"}, {"zero", "parallel"},
      {"schedule", "parallel"}, {"virtual_stages", "parallel"}, {"sequence_parallel", "parallel"}, {"overlap_param_gather", "parallel"}, {"param_gather_start", "parallel"}, {"overlap_p2p", "parallel"}, {"separate_gather_group", "parallel"}, {"dp_impl", "parallel"},
      {"bucket", "parallel"}, {"fusion_buffer", "parallel"}, {"fusion_cycle", "parallel"}, {"order", "parallel"},
      {"symmetric", "simulation"}, {"sharing", "simulation"}, {"free_communication", "simulation"}, {"params", "simulation"},
      {"gpu_hour", "prices"}, {"kwh", "prices"}, {"currency", "prices"}, {"pue", "energy"}};
  return s;
}

}  // namespace

void MapReader::finish(const std::vector<std::string>& also_known) {
  if (!ok_) return;
  std::vector<std::string> known(used_.begin(), used_.end());
  known.insert(known.end(), also_known.begin(), also_known.end());
  const auto is_known = [&](const std::string& k) { return std::find(known.begin(), known.end(), k) != known.end(); };
  static const std::set<std::string> sections = {"training", "parallel", "simulation", "prices", "energy"};
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) {
      ctx_->diagnostics.error(location_of(it->first, file_), path_, "a key must be a plain name (not empty, a list or a mapping)");
      continue;
    }
    const std::string key = it->first.as<std::string>("");
    if (used_.count(key) || std::find(also_known.begin(), also_known.end(), key) != also_known.end()) continue;
    std::string message;
    const auto alias = key_aliases().find(key);
    const auto home = key_sections().find(alias != key_aliases().end() ? alias->second : key);
    if (alias != key_aliases().end() && is_known(alias->second)) {
      message = fmt::format("unknown field: dtsim calls it '{}' ({}: ...)", alias->second, field(alias->second));
    } else if (sections.count(path_) && home != key_sections().end() && home->second != path_) {
      message = fmt::format("'{}' belongs in the {} section, not in {}: write it as {}.{}", home->first, home->second, path_, home->second,
                            home->first);
    } else {
      const std::string hint = closest(key, known);
      message = hint.empty() ? "unknown field" : fmt::format("unknown field (did you mean '{}'?)", hint);
    }
    ctx_->diagnostics.error(location_of(it->first, file_), field(key), message);
  }
}

}  // namespace dtsim::config
