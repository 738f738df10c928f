#include "fuzz/entries.hpp"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace dtsim::fuzz {

namespace {

constexpr std::array<Target, 12> kTargets{{
    {"simulate", "yaml", &simulate},
    {"cluster", "yaml", &cluster},
    {"plan", "yaml", &plan},
    {"sweep", "yaml", &sweep},
    {"profile", "yaml", &profile},
    {"hf_config", "json", &hf_config},
    {"records", "jsonl", &records},
    {"nccl_tests", "txt", &nccl_tests},
    {"published", "csv", &published},
    {"trace", "json", &trace},
    {"kernel_csv", "csv", &kernel_csv},
    {"graph", "json", &graph},
}};

}  // namespace

std::span<const Target> targets() { return kTargets; }

const Target* find_target(std::string_view name) {
  for (const auto& t : kTargets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string scratch_file(std::string_view input, std::string_view extension) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / ("dtsim-fuzz-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / ("input." + std::string(extension));
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(input.data(), static_cast<std::streamsize>(input.size()));
  out.close();
  if (!out) contract_broken("cannot write the scratch file " + file.string());
  return file.string();
}

void contract_broken(const std::string& what) {
  std::fprintf(stderr, "dtsim fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace dtsim::fuzz
