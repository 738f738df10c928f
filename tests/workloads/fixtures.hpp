// Shapes the workload tests share: a GPT-style transformer with 128-wide heads, a 4h MLP, rotary
// positions (no position parameters) and RMSNorm; the vocabulary and sequence limit as asked.
#pragma once

#include <cstdint>

#include "workloads/model.hpp"

namespace dtsim::workloads::testing {

inline TransformerSpec gpt(std::int64_t layers, std::int64_t hidden, std::int64_t vocab = 32000, std::int64_t max_seq = 4096) {
  TransformerSpec m;
  m.name = "gpt";
  m.hidden = hidden;
  m.layers = layers;
  m.heads = hidden / 128;
  m.kv_heads = hidden / 128;
  m.head_dim = 128;
  m.ffn = 4 * hidden;
  m.vocab = vocab;
  m.max_seq = max_seq;
  m.positions = Positions::rotary;
  m.norm = Norm::rmsnorm;
  return m;
}

}  // namespace dtsim::workloads::testing
