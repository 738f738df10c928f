// dtsim-mutation-run: edits the bundled input files (mutate.hpp), runs each edit through the command
// line that reads that file (cases.hpp), and reports every run that dies by a signal, trips a
// sanitizer, hangs, exits 0 with an error, exits non-zero without a message, or fails with a
// message that does not name the file. docs/fuzzing.md, "The mutation run".
//
// Usage: dtsim-mutation-run --dtsim BIN --root SRC [--seed S] [--count N] [--case I] [--timeout SEC]
//                           [--max-base SEC] [--only SUBSTRING] [--out DIR] [--memory-mb MB]
// Exit status: 0 when every case is clean, 1 when something was found, 2 on a usage error.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "mutate.hpp"

namespace {

namespace fs = std::filesystem;
using dtsim::mutation::Base;

struct Options {
  std::string dtsim;
  fs::path root;
  std::uint64_t seed = 1;
  long count = 1000;
  long only_case = -1;
  double timeout_s = 10;
  double max_base_s = 5;
  std::string only;
  fs::path out = "mutation-run";
  long memory_mb = 4096;
  bool asan = false;  // dtsim built with AddressSanitizer: its memory limit is ASan's own
};

struct Outcome {
  bool signaled = false;
  int signal = 0;
  bool timed_out = false;
  int status = 0;
  double seconds = 0;
  std::string err;
};

// What the child writes when dtsim could not be started (a binary being relinked, say): the run
// stops rather than count it as dtsim's silent exit.
constexpr const char* kExecFailed = "dtsim-mutation-run: cannot start dtsim: ";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Runs dtsim with `args` from the source tree, stderr to `err_file`, killed after `timeout_s`.
Outcome run(const Options& opt, const std::vector<std::string>& args, const fs::path& err_file, double timeout_s) {
  Outcome o;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(err, 2);
    if (opt.asan) {
      // ASan reserves terabytes of address space: RLIMIT_AS would stop it; its RSS limit instead.
      const char* given = std::getenv("ASAN_OPTIONS");
      const std::string asan = std::string(given ? given : "") + ":hard_rss_limit_mb=" + std::to_string(opt.memory_mb);
      setenv("ASAN_OPTIONS", asan.c_str(), 1);
    } else if (opt.memory_mb > 0) {
      const rlim_t bytes = static_cast<rlim_t>(opt.memory_mb) << 20U;
      const rlimit limit{bytes, bytes};
      setrlimit(RLIMIT_AS, &limit);
    }
    if (chdir(opt.root.c_str()) != 0) _exit(126);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(opt.dtsim.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(opt.dtsim.c_str(), argv.data());
    const std::string why = std::string(kExecFailed) + std::strerror(errno) + "\n";
    (void)!write(2, why.data(), why.size());
    _exit(127);
  }
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == pid) {
      o.seconds = elapsed;
      break;
    }
    if (elapsed > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.timed_out = true;
      o.seconds = elapsed;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(elapsed < 0.05 ? 1 : 10));
  }
  o.signaled = !o.timed_out && WIFSIGNALED(status);
  o.signal = o.signaled ? WTERMSIG(status) : 0;
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = read_text(err_file);
  return o;
}

// What is wrong with a run of the mutated file `name`; empty when nothing is.
std::string verdict(const Outcome& o, const std::string& name, const std::string& accepted_field) {
  if (o.timed_out) return "hang";
  if (o.err.find("AddressSanitizer") != std::string::npos || o.err.find("LeakSanitizer") != std::string::npos ||
      o.err.find("runtime error:") != std::string::npos)
    return "sanitizer";
  if (o.signaled) return "signal " + std::to_string(o.signal);
  if (o.status == 0) return o.err.find("error:") != std::string::npos ? "exit 0 with an error" : "";
  if (o.err.find_first_not_of(" \t\r\n") == std::string::npos) return "silent exit " + std::to_string(o.status);
  if (o.err.find(name) == std::string::npos && (accepted_field.empty() || o.err.find(accepted_field) == std::string::npos))
    return "message without the file";
  return "";
}

// A copy of the source tree in `dest` made of symbolic links, except for the directories on the way
// to `file` (real, so that `..` from the mutated file leads back into the copy) and `file` itself,
// which the caller writes. Relative paths inside the mutated file then resolve as in the original.
void mirror(const fs::path& root, const fs::path& file, const fs::path& dest) {
  fs::remove_all(dest);
  fs::path src = root;
  fs::path dst = dest;
  fs::create_directories(dst);
  std::vector<fs::path> parts(file.begin(), file.end());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    for (const auto& e : fs::directory_iterator(src)) {
      if (e.path().filename() != parts[i]) fs::create_symlink(e.path(), dst / e.path().filename());
    }
    if (i + 1 < parts.size()) {
      src /= parts[i];
      dst /= parts[i];
      fs::create_directory(dst);
    }
  }
}

std::vector<std::string> expand(const Base& base, const fs::path& mutant, const fs::path& scratch) {
  std::vector<std::string> args;
  for (std::string a : base.args) {
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"{wrap}", (scratch / "wrap.yaml").string()},
                                     {"{out}", (scratch / "out.yaml").string()},
                                     {"{}", mutant.string()}})
      if (const auto at = a.find(key); at != std::string::npos) a.replace(at, key.size(), value);
    args.push_back(a);
  }
  return args;
}

std::string command_line(const Options& opt, const std::vector<std::string>& args) {
  std::string s = opt.dtsim;
  for (const auto& a : args) s += " '" + a + "'";
  return s;
}

bool parse(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--dtsim") opt.dtsim = v;
    else if (a == "--root") opt.root = v;
    else if (a == "--seed") opt.seed = std::stoull(v);
    else if (a == "--count") opt.count = std::stol(v);
    else if (a == "--case") opt.only_case = std::stol(v);
    else if (a == "--timeout") opt.timeout_s = std::stod(v);
    else if (a == "--max-base") opt.max_base_s = std::stod(v);
    else if (a == "--only") opt.only = v;
    else if (a == "--out") opt.out = v;
    else if (a == "--memory-mb") opt.memory_mb = std::stol(v);
    else return false;
  }
  return !opt.dtsim.empty() && !opt.root.empty();
}

struct Prepared {
  Base base;
  std::string original;
  fs::path scratch;
  fs::path mutant;
  double timeout_s = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    if (!parse(argc, argv, opt)) {
      std::cerr << "usage: dtsim-mutation-run --dtsim BIN --root SRC [--seed S] [--count N] [--case I] [--timeout SEC]\n"
                   "                          [--max-base SEC] [--only SUBSTRING] [--out DIR] [--memory-mb MB]\n";
      return 2;
    }
  } catch (const std::exception&) {
    std::cerr << "dtsim-mutation-run: a numeric option is not a number\n";
    return 2;
  }
  opt.dtsim = fs::absolute(opt.dtsim).string();
  opt.root = fs::absolute(opt.root);
  opt.out = fs::absolute(opt.out);
  // GCC links libasan dynamically: its entry point is named in the binary either way.
  opt.asan = read_text(opt.dtsim).find("__asan_init") != std::string::npos;
  fs::create_directories(opt.out);

  // The bases (cases.cpp; --only keeps those whose label contains its text); case i edits base
  // i mod their count, so that a case is the same edit on every machine.
  std::vector<Base> all;
  for (const auto& base : dtsim::mutation::bundled_bases(opt.root))
    if (opt.only.empty() || (base.file + " (" + base.args[0] + ")").find(opt.only) != std::string::npos) all.push_back(base);
  if (all.empty()) {
    std::cerr << "dtsim-mutation-run: no base file to mutate\n";
    return 2;
  }
  std::fprintf(stderr, "%zu base files; seed %llu\n", all.size(), static_cast<unsigned long long>(opt.seed));

  // A base is run unmutated before its first edit: it must succeed; one slower than --max-base is
  // left out (its edits would be as slow), and an edit may take the timeout or 5 times the
  // original, the longer.
  std::map<std::size_t, std::optional<Prepared>> prepared;
  const auto prepare = [&](std::size_t index) -> const std::optional<Prepared>& {
    auto it = prepared.find(index);
    if (it != prepared.end()) return it->second;
    const Base& base = all[index];
    const std::string label = base.file + " (" + base.args[0] + ")";
    Prepared p{base, read_text(opt.root / base.file), opt.out / ("base-" + std::to_string(index)), {}, 0};
    mirror(opt.root, base.file, p.scratch / "tree");
    p.mutant = p.scratch / "tree" / base.file;
    write_text(p.mutant, p.original);
    if (!base.wrapper.empty()) {
      std::string w = base.wrapper;
      w.replace(w.find("{}"), 2, p.mutant.string());
      write_text(p.scratch / "wrap.yaml", w);
    }
    // Stopped once it is over --max-base: it would be left out anyway.
    const Outcome o = run(opt, expand(base, p.mutant, p.scratch), p.scratch / "stderr", opt.max_base_s + 0.5);
    std::optional<Prepared> result;
    if (o.timed_out || o.seconds > opt.max_base_s) {
      std::fprintf(stderr, "base takes over %.1f s (--max-base), left out: %s\n", opt.max_base_s, label.c_str());
    } else if (o.signaled || o.status != 0) {
      std::cerr << "base fails, left out: " << label << ": " << o.err.substr(0, 300) << "\n";
    } else {
      p.timeout_s = std::max(opt.timeout_s, 5 * o.seconds);
      result = std::move(p);
    }
    return prepared.emplace(index, std::move(result)).first->second;
  };

  std::map<std::string, long> tally;
  long findings = 0;
  const long first = opt.only_case >= 0 ? opt.only_case : 0;
  const long last = opt.only_case >= 0 ? opt.only_case + 1 : opt.count;
  for (long i = first; i < last; ++i) {
    const auto& prep = prepare(static_cast<std::size_t>(i) % all.size());
    if (!prep) {
      ++tally["left out (base fails or is slow)"];
      continue;
    }
    const Prepared& p = *prep;
    dtsim::mutation::Rng rng(opt.seed * 0x100000001B3ULL + static_cast<std::uint64_t>(i));
    const auto m = dtsim::mutation::mutate(p.original, p.base.format, rng);
    write_text(p.mutant, m.text);
    const auto args = expand(p.base, p.mutant, p.scratch);
    const Outcome o = run(opt, args, p.scratch / "stderr", p.timeout_s);
    if (o.err.rfind(kExecFailed, 0) == 0) {
      std::cerr << o.err;
      return 2;
    }
    const std::string bad = verdict(o, p.mutant.filename().string(), p.base.accepted_field);
    ++tally[bad.empty() ? (o.status == 0 ? "ok (ran)" : "ok (refused with a message)") : bad];
    if (!bad.empty()) {
      ++findings;
      const fs::path dir = opt.out / "findings" / ("case-" + std::to_string(i));
      fs::create_directories(dir);
      write_text(dir / p.mutant.filename(), m.text);
      write_text(dir / "stderr", o.err);
      write_text(dir / "command", command_line(opt, args) + "\n");
      std::string first_line = o.err.substr(0, o.err.find('\n'));
      std::fprintf(stderr, "case %ld: %s: %s [%s] %s\n  %s\n", i, bad.c_str(), p.base.file.c_str(), p.base.args[0].c_str(),
                   m.edit.c_str(), first_line.substr(0, 240).c_str());
    }
    write_text(p.mutant, p.original);
    if ((i + 1) % 250 == 0) std::fprintf(stderr, "%ld cases run, %ld findings\n", i + 1 - first, findings);
  }
  std::fprintf(stderr, "%ld cases:", last - first);
  for (const auto& [what, n] : tally) std::fprintf(stderr, " %s %ld;", what.c_str(), n);
  std::fprintf(stderr, "\n%ld findings%s\n", findings, findings ? (" in " + (opt.out / "findings").string()).c_str() : "");
  if (tally.size() == 1 && tally.begin()->first.rfind("left out", 0) == 0) {
    std::cerr << "dtsim-mutation-run: every base was left out (does the dtsim binary run?)\n";
    return 2;
  }
  return findings == 0 ? 0 : 1;
}
