#include "cases.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace dtsim::mutation {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> files_in(const fs::path& root, const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
      out.push_back(dir + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void add_all(std::vector<Base>& bases, const fs::path& root, const std::string& dir, const std::string& ext, Format format,
             const std::vector<std::string>& args, const std::string& wrapper = {}) {
  for (const auto& f : files_in(root, dir, ext)) bases.push_back({f, format, args, wrapper, {}});
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<Base> bundled_bases(const fs::path& root) {
  std::vector<Base> b;
  const std::vector<std::string> simulate = {"simulate", "{}"};
  add_all(b, root, "examples/simulate", ".yaml", Format::yaml, simulate);
  add_all(b, root, "examples/classic", ".yaml", Format::yaml, simulate);
  add_all(b, root, "examples/traces", ".yaml", Format::yaml, simulate);
  add_all(b, root, "examples/plans", ".yaml", Format::yaml, {"plan", "-j", "1", "{}"});
  add_all(b, root, "examples/sweeps", ".yaml", Format::yaml, {"sweep", "-j", "1", "--no-progress", "{}"});
  add_all(b, root, "examples/clusters", ".yaml", Format::yaml, {"collective", "--cluster", "{}", "-e", "1M"});
  add_all(b, root, "presets/clusters", ".yaml", Format::yaml, {"collective", "--cluster", "{}", "-e", "1M"});
  const std::string one_gpu = "examples/simulate/gpt2-single-gpu.yaml";
  // fp32 (every GPU has it) and 512 tokens (BERT's positions), so that every preset simulates.
  add_all(b, root, "presets/nodes", ".yaml", Format::yaml,
          {"simulate", one_gpu, "--set", "training.precision=fp32", "--set", "cluster.node={}"});
  add_all(b, root, "presets/models", ".yaml", Format::yaml, {"simulate", one_gpu, "--set", "training.seq_len=512", "--set", "model={}"});
  // A model whose max_seq an edit shrank below the configuration's seq_len: reported at seq_len.
  for (auto& base : b)
    if (base.file.rfind("presets/models/", 0) == 0) base.accepted_field = "training.seq_len: ";
  // A GPU file is read through a node: DGX H100's, its `gpu:` pointing at the mutated file.
  std::string node = read_text(root / "presets/nodes/dgx-h100.yaml");
  if (const auto at = node.find("\ngpu: h100-sxm\n"); at != std::string::npos) {
    node.replace(at, 15, "\ngpu: {}\n");
    add_all(b, root, "presets/gpus", ".yaml", Format::yaml, {"simulate", one_gpu, "--set", "training.precision=fp32", "--set", "cluster.node={wrap}"}, node);
    for (auto& base : b)
      if (!base.wrapper.empty()) base.accepted_field = "training.precision: ";
  }
  // presets/datasets: training.data takes a preset name or a mapping, not a file; not mutated.
  add_all(b, root, "presets/profiles", ".yaml", Format::yaml,
          {"simulate", "examples/simulate/gpt2-124m-eager-1xh100.yaml", "--hw-profile", "{}"});
  add_all(b, root, "examples/models", ".json", Format::json,
          {"simulate", "examples/simulate/llama3-8b-from-hf-config.yaml", "--set", "model.hf_config={}"});
  // nccl-tests logs: fitted (dtsim fit) and compared (dtsim collective --compare) on their cluster.
  const std::vector<std::pair<std::string, std::vector<std::string>>> logs = {
      {"data/published/nccl-tests/all_reduce_perf-1x-h100-default.log", {"--cluster", "dgx-h100"}},
      {"data/published/nccl-tests/all_reduce_perf-2x-h100-ndr-default.log", {"--cluster", "dgx-h100", "--nodes", "2"}},
      {"data/published/nccl-tests/all_reduce_perf-2x-h100-ndr-ring.log", {"--cluster", "dgx-h100", "--nodes", "2"}},
      {"data/published/nccl-tests/all_reduce_perf-4x-a100-ib-sharp.log", {"--cluster", "dgx-a100-80g", "--nodes", "4"}},
      {"data/published/nccl-tests/all_reduce_perf-3x-a100-4nic-tail.log", {"--cluster", "dgx-a100-40g", "--nodes", "3"}},
      {"data/published/nccl-tests/all_reduce_perf-2x-h100-a3mega-tcpxo.log", {"--cluster", "examples/clusters/gcp-a3-mega-2node.yaml"}},
      {"data/calibration/published/all_reduce_perf-a100.log", {"--cluster", "dgx-a100-80g"}},
      {"data/calibration/published/all_reduce_perf-h100-nvls.log", {"--cluster", "dgx-h100"}}};
  for (const auto& [file, cluster] : logs) {
    b.push_back({file, Format::text, {"fit", "--nccl-tests", "{}", "-o", "{out}"}, {}, {}});
    std::vector<std::string> args = {"collective"};
    args.insert(args.end(), cluster.begin(), cluster.end());
    args.insert(args.end(), {"--compare", "{}"});
    b.push_back({file, Format::text, args, {}, {}});
  }
  add_all(b, root, "data/calibration/h100-sxm-2026-11-23", "-quick.jsonl", Format::jsonl, {"fit", "{}", "-o", "{out}"});
  add_all(b, root, "data/validation/h100-sxm-2026-11-23", ".jsonl", Format::jsonl, {"validate", "{}"});
  b.push_back({"data/validation/h100-sxm-2026-11-23/kernels/kernels-gpt-125m-b8.csv", Format::text,
               {"validate", "data/validation/h100-sxm-2026-11-23/validation-quick.jsonl", "--kernels", "{}", "--point",
                "gpt-125m/seq1024/mb8/gpus1"},
               {},
               {}});
  // Step graphs, run as `simulate CONFIG --graph FILE` on the configuration they were written from.
  add_all(b, root, "examples/graphs", ".json", Format::json, {"simulate", "examples/graphs/tiny-tp2-pp2-dp2.yaml", "--graph", "{}"});
  add_all(b, root, "examples/graphs", ".yaml", Format::yaml, simulate);
  // The well-formed traces of the trace tests (the others are refused on purpose).
  for (const char* t : {"legacy-1.9.json", "pytorch-1.13.json", "small.json"})
    b.push_back({std::string("tests/trace/data/") + t, Format::json, {"trace", "summary", "{}"}, {}, {}});
  return b;
}

}  // namespace dtsim::mutation
