#include "planning/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sim/file.hpp"

namespace dtsim::planning {

std::string journal_text(const nlohmann::json& header, const std::vector<nlohmann::json>& rows) {
  std::string out = header.dump() + "\n";
  for (const auto& r : rows) out += r.dump() + "\n";
  return out;
}

Expected<JournalContents> read_journal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  JournalContents c;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (first) return Error(fmt::format("'{}' is not a dtsim results file (its first line is not a JSON header)", path));
      ++c.dropped;
      continue;
    }
    if (first) {
      if (!j.contains("dtsim")) return Error(fmt::format("'{}' is not a dtsim results file (no header line)", path));
      c.header = std::move(j);
      first = false;
      continue;
    }
    if (!j.contains("point") || !j["point"].is_number_unsigned()) {
      ++c.dropped;
      continue;
    }
    const auto point = j["point"].get<std::size_t>();
    c.rows[point] = std::move(j);
  }
  if (first) return Error(fmt::format("'{}' is empty", path));
  return c;
}

Expected<Journal> Journal::open(const std::string& path, const nlohmann::json& header, bool resume,
                                std::map<std::size_t, nlohmann::json>& kept) {
  kept.clear();
  std::vector<nlohmann::json> rows;
  // An empty file (interrupted before its header was written) holds nothing to keep: start anew.
  std::error_code size_ec;
  const bool has_content = ::access(path.c_str(), F_OK) == 0 && std::filesystem::file_size(path, size_ec) > 0 && !size_ec;
  if (resume && has_content) {
    auto c = read_journal(path);
    if (!c) return c.error();
    if (c->header.value("fingerprint", std::string()) != header.value("fingerprint", std::string())) {
      return Error(fmt::format("'{}' holds the results of a different sweep (another spec, base or profile); "
                               "give another -o file, or remove it to start again",
                               path),
                   "-o");
    }
    const std::size_t points = header.value("points", std::size_t{0});
    for (auto& [i, row] : c->rows) {
      if (i < points) rows.push_back(row);
    }
    for (auto& r : rows) kept[r["point"].get<std::size_t>()] = r;
  }
  // Start from a clean file: the header and the kept rows (a line cut by a kill is dropped).
  if (auto st = write_file_atomic(path, journal_text(header, rows)); !st) return st.error();
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Error(fmt::format("cannot append to '{}': {}", path, std::strerror(errno)));
  return Journal(path, header, fd);
}

Journal::Journal(Journal&& o) noexcept : path_(std::move(o.path_)), header_(std::move(o.header_)), fd_(o.fd_) { o.fd_ = -1; }

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

Status Journal::append(const nlohmann::json& row) {
  const std::string line = row.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(fmt::format("cannot append to '{}': {}", path_, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status Journal::finish(const std::vector<nlohmann::json>& rows) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  return write_file_atomic(path_, journal_text(header_, rows));
}

}  // namespace dtsim::planning
