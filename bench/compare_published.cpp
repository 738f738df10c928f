// Computes every accuracy figure of docs/validation.md: dtsim's predictions next to each published
// dataset of data/published/, each marked in-sample, held-out or leave-one-source-out from
// data/registry.yaml (bench/accuracy.hpp).
//
// Usage: dtsim-compare-published                 print every table as Markdown
//        dtsim-compare-published --write FILE... replace the generated blocks of each FILE
//        dtsim-compare-published --check FILE... exit 1 when a generated block of a FILE is stale
//
// A generated block sits between
//   <!-- BEGIN dtsim-compare-published NAME -->  and  <!-- END dtsim-compare-published NAME -->
// and nothing outside the markers is touched, so prose merges independently of the numbers: after
// a merge that changes the model, rerun --write and commit (docs/validation.md says how).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "bench/accuracy.hpp"
#include "sim/file.hpp"

namespace {

using dtsim::accuracy::Section;

const char* const kBegin = "<!-- BEGIN dtsim-compare-published ";
const char* const kEnd = "<!-- END dtsim-compare-published ";

// Replaces each generated block of `text` with its section; names a block with no section.
// `changed` gets the names of the blocks whose content differs.
dtsim::Expected<std::string> fill(const std::string& text, const std::vector<Section>& sections, const std::string& file,
                                  std::vector<std::string>& changed) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t b = text.find(kBegin, pos);
    if (b == std::string::npos) break;
    const std::size_t name_start = b + std::strlen(kBegin);
    const std::size_t name_end = text.find(" -->", name_start);
    if (name_end == std::string::npos) return dtsim::Error(fmt::format("{}: unterminated marker", file));
    const std::string name = text.substr(name_start, name_end - name_start);
    const std::string end_marker = std::string(kEnd) + name + " -->";
    const std::size_t e = text.find(end_marker, name_end);
    if (e == std::string::npos) return dtsim::Error(fmt::format("{}: '{}' has no end marker ({})", file, name, end_marker));
    const Section* s = nullptr;
    for (const auto& sec : sections) {
      if (sec.name == name) s = &sec;
    }
    if (s == nullptr) return dtsim::Error(fmt::format("{}: no generated table is called '{}'", file, name));
    const std::size_t body = text.find('\n', name_end) + 1;
    if (text.compare(body, e - body, s->markdown) != 0) changed.push_back(name);
    out += text.substr(pos, body - pos);
    out += s->markdown;
    pos = e;
  }
  out += text.substr(pos);
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dtsim;
  std::string mode;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write" || a == "--check") {
      mode = a;
    } else if (a == "-h" || a == "--help") {
      std::puts("usage: dtsim-compare-published [--write FILE... | --check FILE...]");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "error: unknown option '%s' (--write, --check)\n", a.c_str());
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (mode.empty() != files.empty()) {
    std::fprintf(stderr, "error: --write and --check need the files to fill, and files need one of them\n");
    return 2;
  }
  config::LoadContext ctx;
  auto reg = config::embedded_registry(ctx);
  if (!reg) {
    std::fputs(ctx.diagnostics.to_string().c_str(), stderr);
    return 1;
  }
  accuracy::Results res;
  for (auto step : {accuracy::nccl_allreduce, accuracy::nccl_logs, accuracy::gemm_and_hbm, accuracy::training, accuracy::measured_runs}) {
    if (Status st = step(*reg, res); !st) {
      std::fprintf(stderr, "error: %s\n", st.error().to_string().c_str());
      return 1;
    }
  }
  accuracy::summary(res);
  if (mode.empty()) {
    for (const auto& s : res.sections) std::printf("%s%s -->\n%s%s%s -->\n\n", kBegin, s.name.c_str(), s.markdown.c_str(), kEnd, s.name.c_str());
    return 0;
  }
  int stale = 0;
  for (const auto& f : files) {
    const std::string text = read_all(f);
    if (text.empty()) {
      std::fprintf(stderr, "error: %s: cannot be read or is empty\n", f.c_str());
      return 2;
    }
    std::vector<std::string> changed;
    auto filled = fill(text, res.sections, f, changed);
    if (!filled) {
      std::fprintf(stderr, "error: %s\n", filled.error().message.c_str());
      return 2;
    }
    if (*filled == text) continue;
    if (mode == "--write") {
      if (Status st = write_file_atomic(f, *filled); !st) {
        std::fprintf(stderr, "error: %s\n", st.error().to_string().c_str());
        return 1;
      }
      std::printf("updated %s\n", f.c_str());
    } else {
      std::string names;
      for (const auto& n : changed) names += (names.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "%s: generated accuracy tables are stale (the model or data changed since they were written): %s\n", f.c_str(),
                   names.c_str());
      ++stale;
    }
  }
  if (stale > 0) {
    std::fprintf(stderr,
                 "Regenerate them and commit: cmake --build BUILD --target dtsim-compare-published && "
                 "BUILD/bench/dtsim-compare-published --write docs/validation.md README.md\n");
    return 1;
  }
  return 0;
}
