// Loading model descriptions: presets (presets/models/*.yaml), model YAML files, inline mappings,
// and Hugging Face config.json files.
#pragma once

#include <optional>
#include <string>

#include "config/reader.hpp"
#include "workloads/model.hpp"

namespace dtsim::config {

// `parent.key` holds a model preset name (e.g. gpt3-175b), a path to a model YAML file, an inline
// mapping (a transformer description), or {hf_config: path/to/config.json}. Problems are reported
// to the context with file, line and field; returns nullopt if there were any.
std::optional<workloads::ModelSpec> load_model(MapReader& parent, const std::string& key, LoadContext& ctx);

// Reads a Hugging Face config.json (GPT-2, Llama, Mistral/Mixtral, BERT and similar model_types).
// `field` is the dotted path reported in errors (e.g. "model.hf_config").
std::optional<workloads::TransformerSpec> load_hf_config(const std::string& path, const std::string& field, LoadContext& ctx);

}  // namespace dtsim::config
