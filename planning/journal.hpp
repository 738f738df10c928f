// A sweep's results file, in JSON Lines: a header line that identifies the sweep (its points'
// fingerprint), then one row per finished point, appended (and flushed) as each point finishes, in
// any order. An interrupted sweep loses no finished point; `--resume` reads the rows back and
// skips their points. When the sweep completes the file is rewritten in point order, so that a
// resumed, a parallel and an MPI run all leave the same bytes.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::planning {

struct JournalContents {
  nlohmann::json header;
  std::map<std::size_t, nlohmann::json> rows;  // by point
  std::size_t dropped = 0;                     // lines that did not parse (a run killed mid-line)
};

// Reads a results file. The header is the first line; rows need an integer "point".
Expected<JournalContents> read_journal(const std::string& path);

class Journal {
 public:
  // Starts `path` with `header` (replacing any file), or with resume = true keeps the rows of a
  // file whose header has the same "fingerprint" (a missing file starts anew) and returns them in
  // `kept`. A file of another sweep is an error.
  static Expected<Journal> open(const std::string& path, const nlohmann::json& header, bool resume,
                                std::map<std::size_t, nlohmann::json>& kept);
  Journal(Journal&& o) noexcept;
  Journal& operator=(Journal&&) = delete;
  ~Journal();

  // Appends one row (one write, flushed to the file).
  Status append(const nlohmann::json& row);
  // Rewrites the file (atomically) as the header and `rows` in the given order.
  Status finish(const std::vector<nlohmann::json>& rows);

 private:
  Journal(std::string path, nlohmann::json header, int fd) : path_(std::move(path)), header_(std::move(header)), fd_(fd) {}
  std::string path_;
  nlohmann::json header_;
  int fd_ = -1;
};

// The JSON Lines text of a header and rows.
std::string journal_text(const nlohmann::json& header, const std::vector<nlohmann::json>& rows);

}  // namespace dtsim::planning
