// Helpers for tests that run the dtsim command line as a user would: run it, read and write the
// files it takes and makes. One place, so that every CLI test reports exit status the same way.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dtsim::testing {

struct Result {
  int code = -1;    // exit status; 128 + signal number when a signal killed it (as a shell says)
  std::string out;  // stdout and stderr together
};

// Runs `prefix dtsim args` through the shell (DTSIM_BINARY, set by the build).
inline Result run(const std::string& args, const std::string& prefix = "") {
  const std::string cmd = prefix + std::string(DTSIM_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (p && std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = p ? pclose(p) : -1;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1);
  return r;
}

// Runs a shell command; its exit status (-1 when it did not exit).
inline int sh(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A path in GoogleTest's temporary folder.
inline std::string temp(const std::string& name) { return (std::filesystem::path(::testing::TempDir()) / name).string(); }

// A path in the source tree.
inline std::string source(const std::string& rel) { return std::string(DTSIM_SOURCE_DIR) + "/" + rel; }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path` (its folder created) and returns the path.
inline std::string write_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return path;
}

}  // namespace dtsim::testing
