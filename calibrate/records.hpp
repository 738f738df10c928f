// Calibration results as JSON Lines: one JSON object per finished measurement, appended and
// flushed at once, so that a crash loses at most the point in flight. Shared by the CUDA harness
// (which writes) and `dtsim fit` / `dtsim validate` (which read). Standard library and
// nlohmann-json only (header-only), so that the harness carries to machines without dtsim's
// other dependencies.
//
// Record (docs/calibration.md has every field):
//   {"schema": "dtsim-calibrate/1", "suite": "gemm", "point": "gemm/bf16/TN/4096x4096x4096",
//    "status": "ok" | "error" | "skipped", "error": "file.cu:120: cublasLtMatmul: ...",
//    "params": {...}, "result": {...}, "device": {...}, "run": {...}}
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::calibrate {

inline constexpr const char* kCalibrateSchema = "dtsim-calibrate/1";
inline constexpr const char* kValidateSchema = "dtsim-validate/1";

struct Record {
  std::string file;  // where it was read from
  int line = 0;
  std::string schema;
  std::string suite;
  std::string point;   // unique key of the measurement within its suite
  std::string status;  // "ok", "error" or "skipped"
  std::string error;   // when status is not "ok"
  nlohmann::json params = nlohmann::json::object();
  nlohmann::json result = nlohmann::json::object();
  nlohmann::json device = nlohmann::json::object();
  nlohmann::json run = nlohmann::json::object();
  nlohmann::json raw;  // the whole object (suites with their own layout, e.g. dtsim-validate)
  bool ok() const { return status == "ok"; }
  std::string where() const { return file + ":" + std::to_string(line); }
};

// Parses one line. Errors say what is wrong (the caller adds file:line).
Expected<Record> parse_record(const std::string& line);

// Reads every record of a JSON Lines file. Blank lines are skipped; any other line that is not a
// record (bad JSON, no "schema", "suite" or "point") is an error naming file:line. An empty file
// (no records) is an error too.
Expected<std::vector<Record>> read_records(const std::string& path);

// The append-only result file of one harness run.
//
// open(path, resume=false) refuses a file that already holds records (expensive results are
// never overwritten by accident); resume=true keeps them, remembers their points, and cuts off a
// torn last line (a crash in the middle of a write) so that appending continues cleanly.
class ResultLog {
 public:
  ResultLog() = default;
  ResultLog(const ResultLog&) = delete;
  ResultLog& operator=(const ResultLog&) = delete;
  ResultLog(ResultLog&& o) noexcept;
  ResultLog& operator=(ResultLog&& o) noexcept;
  ~ResultLog();

  static Expected<ResultLog> open(const std::string& path, bool resume);

  // True when `point` is already recorded: with status ok or skipped, or with an error unless
  // `retry_errors`.
  bool done(const std::string& point, bool retry_errors = false) const;
  std::size_t recorded() const { return status_.size(); }
  const std::map<std::string, std::string>& statuses() const { return status_; }  // point -> status
  bool repaired() const { return repaired_; }  // a torn last line was cut off
  const std::string& path() const { return path_; }

  // Writes one record as one line and flushes it to the disk before returning.
  Status append(const nlohmann::json& record);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::map<std::string, std::string> status_;  // point -> status
  bool repaired_ = false;
};

}  // namespace dtsim::calibrate
