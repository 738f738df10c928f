#include "config/model_loader.hpp"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/hardware.hpp"
#include "config/presets.hpp"

namespace dtsim::config {

namespace {

using workloads::CnnSpec;
using workloads::ModelSpec;
using workloads::Norm;
using workloads::Positions;
using workloads::TransformerSpec;

constexpr std::int64_t kAnyInt = std::numeric_limits<std::int64_t>::max();

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Validation shared by every source of a transformer description.

// Reports a problem with one field of the model, named by its dtsim key (hidden, kv_heads, ...);
// "" for the model as a whole.
using ReportFn = std::function<void(const std::string& key, const std::string& message)>;

struct Bound {
  const char* key;
  std::int64_t TransformerSpec::*member;
  std::int64_t min;
  std::int64_t max;  // anything above is treated as a typo: no model is anywhere near
};

// Checks sizes, divisibility and MoE settings. Returns false after reporting any problem.
bool validate(const TransformerSpec& m, bool head_dim_given, const ReportFn& report) {
  static const Bound bounds[] = {
      {"hidden", &TransformerSpec::hidden, 1, 1'000'000},       {"layers", &TransformerSpec::layers, 1, 10'000},
      {"heads", &TransformerSpec::heads, 1, 100'000},           {"kv_heads", &TransformerSpec::kv_heads, 1, 100'000},
      {"head_dim", &TransformerSpec::head_dim, 1, 100'000},     {"ffn", &TransformerSpec::ffn, 1, 10'000'000},
      {"vocab", &TransformerSpec::vocab, 1, 100'000'000},       {"max_seq", &TransformerSpec::max_seq, 1, 100'000'000},
      {"experts", &TransformerSpec::experts, 0, 100'000},       {"top_k", &TransformerSpec::top_k, 0, 100'000},
  };
  bool ok = true;
  for (const Bound& b : bounds) {
    const std::int64_t v = m.*(b.member);
    if (b.key == std::string("head_dim") && !head_dim_given) continue;  // derived below
    if (v < b.min) {
      report(b.key, b.min == 1 ? fmt::format("must be positive (got {})", v) : fmt::format("must not be negative (got {})", v));
      ok = false;
    } else if (v > b.max) {
      report(b.key, fmt::format("{} is implausibly large (the limit is {}); is it a typo?", v, b.max));
      ok = false;
    }
  }
  if (!ok) return false;
  if (!head_dim_given && m.hidden % m.heads != 0) {
    report("heads", fmt::format("hidden ({}) is not divisible by heads ({}); give head_dim when heads are not hidden/heads wide",
                                m.hidden, m.heads));
    ok = false;
  }
  if (m.heads % m.kv_heads != 0) {
    report("kv_heads", fmt::format("kv_heads ({}) must divide heads ({})", m.kv_heads, m.heads));
    ok = false;
  }
  if (m.experts == 0 && m.top_k != 0) {
    report("top_k", fmt::format("top_k ({}) needs experts (a mixture-of-experts model)", m.top_k));
    ok = false;
  }
  if (m.experts > 0 && (m.top_k < 1 || m.top_k > m.experts)) {
    report("top_k", fmt::format("top_k ({}) must be from 1 to experts ({})", m.top_k, m.experts));
    ok = false;
  }
  if (!ok) return false;
  // An upper estimate in floating point, so that the exact integer count cannot overflow.
  const double hidden = static_cast<double>(m.hidden);
  const double hd = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
  const double attention = hidden * hd * (2.0 * static_cast<double>(m.heads) + 2.0 * static_cast<double>(m.kv_heads));
  const double mlp = 3.0 * hidden * static_cast<double>(m.ffn) * static_cast<double>(std::max<std::int64_t>(1, m.experts));
  const double total = static_cast<double>(m.layers) * (attention + mlp + 8.0 * hidden) +
                       hidden * (2.0 * static_cast<double>(m.vocab) + static_cast<double>(m.max_seq) + 8.0);
  if (total > 1e15) {
    report("", fmt::format("the sizes give about {:.3g} parameters, more than 10^15; check them", total));
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// YAML model descriptions (presets, files, inline mappings).

std::optional<CnnSpec> cnn_from(MapReader& r, LoadContext& ctx) {
  const std::size_t errors = ctx.diagnostics.size();
  const std::string name = r.string("name", true).value_or("");
  const auto arch = r.string("architecture", true);
  const std::int64_t image = r.integer("image", false, 64, 8192).value_or(224);
  const auto published = r.integer("published_params", false, 0, kAnyInt);
  const auto source = r.string("source");
  r.finish({"kind"});
  std::optional<CnnSpec> spec;
  if (arch) {
    if (*arch == "alexnet") spec = workloads::make_alexnet(image);
    else if (*arch == "vgg16") spec = workloads::make_vgg16(image);
    else if (*arch == "resnet50") spec = workloads::make_resnet50(image);
    else r.error("architecture", fmt::format("unknown CNN architecture '{}' (use alexnet, vgg16 or resnet50)", *arch));
  }
  if (!spec || ctx.diagnostics.size() != errors) return std::nullopt;
  spec->name = name;
  if (published) spec->published_params = *published;
  if (source) spec->source = *source;
  return spec;
}

std::optional<TransformerSpec> transformer_from(MapReader& r, LoadContext& ctx) {
  const std::size_t errors = ctx.diagnostics.size();
  TransformerSpec m;
  m.name = r.string("name", true).value_or("");
  m.source = r.string("source").value_or(r.file());
  auto get = [&](const char* key, bool required, std::int64_t fallback) {
    return r.integer(key, required, std::numeric_limits<std::int64_t>::min(), kAnyInt).value_or(fallback);
  };
  m.hidden = get("hidden", true, 0);
  m.layers = get("layers", true, 0);
  m.heads = get("heads", true, 0);
  m.kv_heads = get("kv_heads", false, m.heads);
  const bool head_dim_given = r.has("head_dim");
  m.head_dim = get("head_dim", false, 0);
  m.ffn = get("ffn", true, 0);
  m.vocab = get("vocab", true, 0);
  m.max_seq = get("max_seq", true, 0);
  m.gated_mlp = r.boolean("gated_mlp").value_or(m.gated_mlp);
  m.bias = r.boolean("bias").value_or(m.bias);
  m.qkv_bias = r.boolean("qkv_bias").value_or(m.qkv_bias);
  m.tied_embeddings = r.boolean("tied_embeddings").value_or(m.tied_embeddings);
  if (auto p = r.string("positions")) {
    if (*p == "learned") m.positions = Positions::learned;
    else if (*p == "rotary") m.positions = Positions::rotary;
    else r.error("positions", fmt::format("unknown position encoding '{}' (use learned or rotary)", *p));
  }
  if (auto n = r.string("norm")) {
    if (*n == "layernorm") m.norm = Norm::layernorm;
    else if (*n == "rmsnorm") m.norm = Norm::rmsnorm;
    else r.error("norm", fmt::format("unknown norm '{}' (use layernorm or rmsnorm)", *n));
  }
  m.encoder = r.boolean("encoder").value_or(m.encoder);
  m.experts = get("experts", false, 0);
  m.top_k = get("top_k", false, 0);
  m.published_params = r.integer("published_params", false, 0, kAnyInt).value_or(0);
  r.finish({"kind"});
  if (ctx.diagnostics.size() != errors) return std::nullopt;
  const ReportFn report = [&](const std::string& key, const std::string& msg) {
    if (key.empty()) r.error_here(msg);
    else r.error(key, msg);
  };
  if (!validate(m, head_dim_given, report)) return std::nullopt;
  if (!head_dim_given) m.head_dim = m.hidden / m.heads;
  return m;
}

std::optional<ModelSpec> model_from(MapReader& r, LoadContext& ctx) {
  if (!r.ok()) return std::nullopt;
  const std::string kind = r.string("kind").value_or("transformer");
  if (kind == "cnn") {
    auto c = cnn_from(r, ctx);
    if (!c) return std::nullopt;
    return ModelSpec(std::move(*c));
  }
  if (kind != "transformer") {
    r.error("kind", fmt::format("unknown model kind '{}' (use transformer or cnn)", kind));
    return std::nullopt;
  }
  auto t = transformer_from(r, ctx);
  if (!t) return std::nullopt;
  return ModelSpec(std::move(*t));
}

// ---------------------------------------------------------------------------------------------
// Hugging Face config.json.

Location offset_location(const std::string& text, std::size_t offset, const std::string& file) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return Location{file, line, column};
}

// Reads one config.json: typed getters that report missing keys and wrong types with the line of
// the key (found in the text: nlohmann::json keeps no positions).
class JsonReader {
 public:
  JsonReader(nlohmann::json doc, std::string text, std::string file, std::string field, LoadContext& ctx)
      : doc_(std::move(doc)), text_(std::move(text)), file_(std::move(file)), field_(std::move(field)), ctx_(ctx) {}

  bool has(const std::string& key) const { return doc_.contains(key) && !doc_[key].is_null(); }

  Location location(const std::string& key) const {
    const std::string quoted = "\"" + key + "\"";
    for (std::size_t pos = text_.find(quoted); pos != std::string::npos; pos = text_.find(quoted, pos + 1)) {
      std::size_t after = pos + quoted.size();
      while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after]))) ++after;
      if (after < text_.size() && text_[after] == ':') return offset_location(text_, pos, file_);
    }
    return Location{file_, 0, 0};
  }

  void error(const std::string& key, const std::string& message) const {
    ctx_.diagnostics.error(key.empty() ? Location{file_, 1, 1} : location(key), key.empty() ? field_ : field_ + "." + key,
                           message);
  }

  std::optional<std::int64_t> integer(const std::string& key, bool required) {
    if (!has(key)) {
      if (required) error(key, fmt::format("is missing (required for model_type '{}')", model_type_));
      return std::nullopt;
    }
    const nlohmann::json& v = doc_[key];
    if (v.is_number_integer()) return v.get<std::int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18) return static_cast<std::int64_t>(d);
    }
    error(key, fmt::format("expected a whole number, got {}", v.dump()));
    return std::nullopt;
  }

  std::optional<bool> boolean(const std::string& key) {
    if (!has(key)) return std::nullopt;
    const nlohmann::json& v = doc_[key];
    if (v.is_boolean()) return v.get<bool>();
    error(key, fmt::format("expected true or false, got {}", v.dump()));
    return std::nullopt;
  }

  std::optional<std::string> string(const std::string& key) {
    if (!has(key)) return std::nullopt;
    const nlohmann::json& v = doc_[key];
    if (v.is_string()) return v.get<std::string>();
    error(key, fmt::format("expected a string, got {}", v.dump()));
    return std::nullopt;
  }

  void set_model_type(std::string t) { model_type_ = std::move(t); }

 private:
  nlohmann::json doc_;
  std::string text_;
  std::string file_;
  std::string field_;
  LoadContext& ctx_;
  std::string model_type_;
};

// The config.json keys that hold each dtsim key, per family (for reading and for error locations).
struct HfKeys {
  const char* hidden;
  const char* layers;
  const char* heads;
  const char* ffn;
  const char* max_seq;
};
constexpr HfKeys kGpt2Keys{"n_embd", "n_layer", "n_head", "n_inner", "n_positions"};
constexpr HfKeys kStandardKeys{"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                               "max_position_embeddings"};

bool is_llama_like(const std::string& t) { return t == "llama" || t == "mistral" || t == "mixtral" || t == "qwen2"; }

}  // namespace

std::optional<TransformerSpec> load_hf_config(const std::string& path, const std::string& field, LoadContext& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Location where = ctx.sources.find(field);
    if (where.file.empty()) where = Location{path, 0, 0};
    ctx.diagnostics.error(where, field, fmt::format("cannot open the Hugging Face config file '{}'", path));
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ctx.inputs[path] = content_hash(text);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (const auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos) {
      what.erase(0, close + 2);
    }
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;  // nlohmann counts bytes from 1
    ctx.diagnostics.error(offset_location(text, offset, path), field, "malformed JSON: " + what);
    return std::nullopt;
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax that nlohmann cannot hold, e.g. a number beyond a double (4.3e1765024).
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    ctx.diagnostics.error(Location{path, 1, 1}, field, "unusable JSON: " + what);
    return std::nullopt;
  }
  if (!doc.is_object()) {
    ctx.diagnostics.error(Location{path, 1, 1}, field, "expected a JSON object of config keys (a Hugging Face config.json)");
    return std::nullopt;
  }

  const std::size_t errors = ctx.diagnostics.size();
  JsonReader j(doc, text, path, field, ctx);
  const auto model_type = j.string("model_type");
  if (!model_type) {
    if (ctx.diagnostics.size() == errors) j.error("model_type", "is missing (gpt2, bert, llama, mistral, mixtral or qwen2)");
    return std::nullopt;
  }
  j.set_model_type(*model_type);
  const bool gpt2 = *model_type == "gpt2";
  const bool bert = *model_type == "bert";
  const bool llama_like = is_llama_like(*model_type);
  if (!gpt2 && !bert && !llama_like) {
    j.error("model_type", fmt::format("model_type '{}' is not supported (use gpt2, bert, llama, mistral, mixtral or qwen2, "
                                      "or describe the model in YAML)",
                                      *model_type));
    return std::nullopt;
  }
  const HfKeys& keys = gpt2 ? kGpt2Keys : kStandardKeys;
  // dtsim key -> config.json key, for reporting validation problems where they are.
  std::map<std::string, std::string> json_key = {{"hidden", keys.hidden}, {"layers", keys.layers}, {"heads", keys.heads},
                                                 {"kv_heads", "num_key_value_heads"}, {"head_dim", "head_dim"},
                                                 {"ffn", keys.ffn}, {"vocab", "vocab_size"}, {"max_seq", keys.max_seq},
                                                 {"experts", "num_local_experts"}, {"top_k", "num_experts_per_tok"}};

  TransformerSpec m;
  if (auto n = j.string("_name_or_path"); n && !n->empty()) {
    m.name = *n;
  } else {
    const std::filesystem::path p(path);
    const std::string dir = p.parent_path().filename().string();
    m.name = dir.empty() ? *model_type : dir;
  }
  m.source = "Hugging Face config.json: " + path;
  m.hidden = j.integer(keys.hidden, true).value_or(0);
  m.layers = j.integer(keys.layers, true).value_or(0);
  m.heads = j.integer(keys.heads, true).value_or(0);
  m.vocab = j.integer("vocab_size", true).value_or(0);
  m.max_seq = j.integer(keys.max_seq, true).value_or(0);
  m.kv_heads = m.heads;
  bool head_dim_given = false;

  if (gpt2) {
    // GPT2Config: n_inner null means 4 * n_embd; biases everywhere; tied LM head by default.
    m.ffn = j.integer("n_inner", false).value_or(4 * m.hidden);
    m.tied_embeddings = j.boolean("tie_word_embeddings").value_or(true);
    m.bias = true;
    m.gated_mlp = false;
    m.positions = Positions::learned;
    m.norm = Norm::layernorm;
  } else if (bert) {
    m.ffn = j.integer("intermediate_size", true).value_or(0);
    m.encoder = true;
    m.bias = true;
    m.tied_embeddings = j.boolean("tie_word_embeddings").value_or(true);
    m.positions = Positions::learned;
    m.norm = Norm::layernorm;
    if (auto t = j.integer("type_vocab_size", false); t && *t != 2) {
      j.error("type_vocab_size", fmt::format("dtsim models BERT with 2 token types, not {}", *t));
    }
    if (auto pe = j.string("position_embedding_type"); pe && *pe != "absolute") {
      j.error("position_embedding_type", fmt::format("'{}' position embeddings are not modelled (only absolute)", *pe));
    }
  } else {
    // Llama, Mistral, Mixtral, Qwen2: SwiGLU MLP, RMSNorm, rotary positions, untied by default
    // (the defaults of their transformers config classes). The family fixes these whatever
    // hidden_act, rms_norm_eps or rope_theta say: the modelling code does not consult them for the
    // shapes of the weights.
    m.ffn = j.integer("intermediate_size", true).value_or(0);
    m.kv_heads = j.integer("num_key_value_heads", false).value_or(m.heads);
    head_dim_given = j.has("head_dim");
    m.head_dim = j.integer("head_dim", false).value_or(0);
    m.tied_embeddings = j.boolean("tie_word_embeddings").value_or(false);
    m.gated_mlp = true;
    m.positions = Positions::rotary;
    m.norm = Norm::rmsnorm;
    if (*model_type == "qwen2") {
      m.bias = false;
      m.qkv_bias = true;  // Qwen2Attention: bias on q/k/v, none on o_proj; no MLP bias
    } else {
      const bool attention_bias = j.boolean("attention_bias").value_or(false);
      const bool mlp_bias = j.boolean("mlp_bias").value_or(false);
      if (attention_bias != mlp_bias) {
        j.error(attention_bias ? "attention_bias" : "mlp_bias",
                "dtsim models biases on all linear layers or on none: set attention_bias and mlp_bias alike");
      }
      m.bias = attention_bias && mlp_bias;
    }
    if (*model_type == "mixtral") {
      m.experts = j.integer("num_local_experts", true).value_or(0);
      m.top_k = j.integer("num_experts_per_tok", true).value_or(0);
    }
  }
  if (ctx.diagnostics.size() != errors) return std::nullopt;
  const ReportFn report = [&](const std::string& key, const std::string& msg) {
    const auto it = json_key.find(key);
    j.error(it == json_key.end() ? std::string() : it->second, msg);
  };
  if (!validate(m, head_dim_given, report)) return std::nullopt;
  if (!head_dim_given) m.head_dim = m.hidden / m.heads;
  return m;
}

std::optional<workloads::ModelSpec> load_model(MapReader& parent, const std::string& key, LoadContext& ctx) {
  YAML::Node n = parent.node(key);
  if (!n.IsDefined() || n.IsNull()) {
    parent.error(key, "is required (a model preset such as gpt3-175b or llama3-8b, a model file, a mapping, or {hf_config: "
                      "path/to/config.json})");
    return std::nullopt;
  }
  if (n.IsMap()) {
    MapReader r(n, parent.field(key), parent.file(), ctx);
    if (r.has("hf_config")) {
      const auto path = r.string("hf_config", true);
      r.finish();
      if (!path) return std::nullopt;
      auto t = load_hf_config(resolve_path(*path, r.file()), r.field("hf_config"), ctx);
      if (!t) return std::nullopt;
      return ModelSpec(std::move(*t));
    }
    return model_from(r, ctx);
  }
  if (!n.IsScalar()) {
    parent.error(key, "expected a model preset name, a model file, or a mapping");
    return std::nullopt;
  }
  const std::string ref = resolve_path(n.Scalar(), parent.file());
  if (looks_like_path(ref)) {
    auto doc = load_yaml_file(ref, ctx);
    if (!doc) return std::nullopt;
    MapReader r(*doc, parent.field(key), ref, ctx);
    return model_from(r, ctx);
  }
  const PresetFile* p = find_preset("models", ref);
  if (p == nullptr) {
    const auto names = preset_names("models");
    const std::string hint = closest(ref, names);
    parent.error(key, fmt::format("unknown model preset '{}'{} (known: {})", ref,
                                  hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), join(names)));
    return std::nullopt;
  }
  auto doc = parse_yaml(std::string(p->text), std::string(p->path), ctx);
  if (!doc) return std::nullopt;
  MapReader r(*doc, parent.field(key), std::string(p->path), ctx);
  return model_from(r, ctx);
}

}  // namespace dtsim::config
