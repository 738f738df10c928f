// The bundled files the mutation run edits, each with the command line that reads it
// (docs/fuzzing.md, "The mutation run").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "mutate.hpp"

namespace dtsim::mutation {

// One bundled file and the dtsim arguments that read it. In `args`, "{}" is the mutated file,
// "{wrap}" a scratch file holding `wrapper` with "{}" in it replaced by the mutated file (for a
// file that is only read through another one, a GPU through a node), "{out}" a scratch output.
struct Base {
  std::string file;  // relative to the source tree
  Format format = Format::text;
  std::vector<std::string> args;
  std::string wrapper;
  // A message on this configuration field is accepted without naming the mutated file (a GPU
  // without a rate for the chosen precision is reported where the precision is chosen, a model
  // with fewer learned positions than the sequence where seq_len is).
  std::string accepted_field;
};

// Every bundled input, in a fixed order (sorted paths), from the source tree `root`.
std::vector<Base> bundled_bases(const std::filesystem::path& root);

}  // namespace dtsim::mutation
