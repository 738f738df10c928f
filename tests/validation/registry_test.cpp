// The validation registry (data/registry.yaml): it lists every file under data/, the files it
// lists exist, the constants it names are dtsim's, and `--list-params` can read it back.
#include "config/registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/simulate_loader.hpp"

namespace dtsim::config {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Registry from_disk() {
  LoadContext ctx;
  auto reg = parse_registry(read(fs::path(DTSIM_SOURCE_DIR) / "data/registry.yaml"), "data/registry.yaml", ctx);
  EXPECT_TRUE(reg.has_value()) << ctx.diagnostics.to_string();
  return reg.value_or(Registry{});
}

TEST(Registry, ListsEveryFileUnderData) {
  const Registry reg = from_disk();
  const auto listed = reg.files();
  std::vector<std::string> on_disk;
  const fs::path root(DTSIM_SOURCE_DIR);
  for (const auto& e : fs::recursive_directory_iterator(root / "data")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), root).generic_string();
    if (rel.find("__pycache__") != std::string::npos) continue;  // Python's cache, never committed
    on_disk.push_back(rel);
  }
  ASSERT_GE(on_disk.size(), 10u);  // guards against walking the wrong folder
  for (const auto& f : on_disk) {
    EXPECT_TRUE(std::binary_search(listed.begin(), listed.end(), f)) << f << " is under data/ but not in data/registry.yaml";
  }
  for (const auto& f : listed) {
    EXPECT_TRUE(fs::is_regular_file(root / f)) << f << " is in data/registry.yaml but not in the repository";
  }
}

TEST(Registry, EveryDatasetSaysWhereItComesFrom) {
  const Registry reg = from_disk();
  ASSERT_GE(reg.datasets.size(), 8u);
  for (const auto& d : reg.datasets) {
    for (const std::string* f : {&d.source, &d.retrieved, &d.hardware, &d.software, &d.measures}) {
      EXPECT_FALSE(f->empty()) << d.id;
    }
    if (d.kind != "quoted") {
      EXPECT_FALSE(d.files.empty()) << d.id << " is not quoted, so it has files";
    }
  }
}

TEST(Registry, ConstantsAreDtsimsParameters) {
  const Registry reg = from_disk();
  std::set<std::string> params;
  for (const auto& [name, value, help] : simulate_param_list()) params.insert(name);
  ASSERT_GE(reg.constants.size(), 8u);
  for (const auto& c : reg.constants) {
    if (c.name.rfind("links.", 0) == 0) {
      // links.<type>.<field>: a link type of presets/links.yaml.
      const std::string type = c.name.substr(6, c.name.rfind('.') - 6);
      EXPECT_NE(read(fs::path(DTSIM_SOURCE_DIR) / "presets/links.yaml").find("\n" + type + ":\n"), std::string::npos) << c.name;
    } else {
      EXPECT_TRUE(params.count(c.name)) << c.name << " is not a parameter of dtsim simulate --list-params";
    }
  }
}

TEST(Registry, BinaryCarriesTheRepositorysRegistry) {
  LoadContext ctx;
  auto reg = embedded_registry(ctx);
  ASSERT_TRUE(reg.has_value()) << ctx.diagnostics.to_string();
  EXPECT_EQ(reg->files(), from_disk().files());
  EXPECT_EQ(reg->sources_of("links.nvlink3.efficiency"), std::vector<std::string>{"azure-nd-a100-v4-allreduce"});
  EXPECT_TRUE(reg->sources_of("comm.ring.LL.base_latency").empty());
  EXPECT_EQ(data_sources_note(*reg, "compute.memory.efficiency"), "data: azure-nd-h100-v5-hbm, azure-nd-a100-v4-hbm");
}

TEST(Registry, ErrorsNameTheLine) {
  LoadContext ctx;
  const std::string text =
      "registry: 1\n"
      "datasets:\n"
      "  - {id: a, files: [], kind: published, source: s, retrieved: r, hardware: h, software: w, measures: m}\n"
      "other_files: []\n"
      "constants:\n"
      "  - {name: compute.kernel_overhead, where: w, how: h, from: [a, nope]}\n";
  EXPECT_FALSE(parse_registry(text, "reg.yaml", ctx).has_value());
  const std::string all = ctx.diagnostics.to_string();
  EXPECT_NE(all.find("reg.yaml:6:"), std::string::npos) << all;
  EXPECT_NE(all.find("'nope' is not a dataset"), std::string::npos) << all;
}

}  // namespace
}  // namespace dtsim::config
