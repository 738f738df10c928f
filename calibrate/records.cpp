#include "calibrate/records.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dtsim::calibrate {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Expected<Record> parse_record(const std::string& line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    const auto p = what.find("parse error");
    return Error("not valid JSON (" + (p == std::string::npos ? what : what.substr(p)) + ")");
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax that nlohmann cannot hold, e.g. a number beyond a double (4.3e1765024).
    std::string what = e.what();
    const auto close = what.find("] ");
    return Error("not a usable JSON value (" + (close == std::string::npos ? what : what.substr(close + 2)) + ")");
  }
  if (!j.is_object()) return Error("a record must be a JSON object");
  Record r;
  auto text = [&](const char* key, std::string& out, bool required) -> Status {
    const auto it = j.find(key);
    if (it == j.end()) {
      if (required) return Error(std::string("the record has no \"") + key + "\"");
      return {};
    }
    if (!it->is_string()) return Error(std::string("\"") + key + "\" must be a string");
    out = it->get<std::string>();
    return {};
  };
  for (auto [key, out, required] : {std::tuple{"schema", &r.schema, true}, std::tuple{"suite", &r.suite, true},
                                    std::tuple{"point", &r.point, true}, std::tuple{"status", &r.status, false}}) {
    if (auto st = text(key, *out, required); !st) return st.error();
  }
  if (r.schema != kCalibrateSchema && r.schema != kValidateSchema) {
    return Error("unknown schema \"" + r.schema + "\" (this dtsim reads " + kCalibrateSchema + " and " + kValidateSchema + ")");
  }
  if (r.status.empty()) r.status = "ok";
  if (r.status != "ok" && r.status != "error" && r.status != "skipped") {
    return Error("\"status\" must be ok, error or skipped (got \"" + r.status + "\")");
  }
  if (const auto it = j.find("error"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Error("\"error\" must be a string");
    r.error = it->get<std::string>();
  }
  for (auto [key, out] : {std::pair{"params", &r.params}, std::pair{"result", &r.result}, std::pair{"device", &r.device},
                          std::pair{"run", &r.run}}) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_object()) return Error(std::string("\"") + key + "\" must be an object");
    *out = *it;
  }
  r.raw = std::move(j);
  return r;
}

Expected<std::vector<Record>> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open the file");
  std::vector<Record> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    auto r = parse_record(line);
    if (!r) return Error(path + ":" + std::to_string(lineno) + ": " + r.error().message);
    r->file = path;
    r->line = lineno;
    out.push_back(std::move(*r));
  }
  if (out.empty()) return Error(path + ": no records (the file is empty)");
  return out;
}

ResultLog::ResultLog(ResultLog&& o) noexcept
    : path_(std::move(o.path_)), f_(o.f_), status_(std::move(o.status_)), repaired_(o.repaired_) {
  o.f_ = nullptr;
}

ResultLog& ResultLog::operator=(ResultLog&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    path_ = std::move(o.path_);
    f_ = o.f_;
    status_ = std::move(o.status_);
    repaired_ = o.repaired_;
    o.f_ = nullptr;
  }
  return *this;
}

ResultLog::~ResultLog() {
  if (f_) std::fclose(f_);
}

Expected<ResultLog> ResultLog::open(const std::string& path, bool resume) {
  ResultLog log;
  log.path_ = path;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (exists) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error(path + ": cannot read the existing result file");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (!trim(text).empty() && !resume) {
      return Error(path + ": already holds results; pass --resume to continue it, or choose another file");
    }
    // Complete lines end with '\n'; anything after the last one is a torn write.
    const auto last_nl = text.rfind('\n');
    const std::size_t complete = last_nl == std::string::npos ? 0 : last_nl + 1;
    std::istringstream lines(text.substr(0, complete));
    std::string line;
    int lineno = 0;
    while (std::getline(lines, line)) {
      ++lineno;
      if (trim(line).empty()) continue;
      auto r = parse_record(line);
      if (!r) {
        return Error(path + ":" + std::to_string(lineno) + ": " + r.error().message +
                     " (only a torn last line is repaired; fix or remove this line to resume)");
      }
      log.status_[r->point] = r->status;
    }
    if (complete < text.size()) {
      std::filesystem::resize_file(path, complete, ec);
      if (ec) return Error(path + ": cannot cut off the torn last line: " + ec.message());
      log.repaired_ = !trim(text.substr(complete)).empty();
    }
  }
  log.f_ = std::fopen(path.c_str(), "ab");
  if (!log.f_) return Error(path + ": cannot open for appending");
  return log;
}

bool ResultLog::done(const std::string& point, bool retry_errors) const {
  const auto it = status_.find(point);
  if (it == status_.end()) return false;
  return !(retry_errors && it->second == "error");
}

Status ResultLog::append(const nlohmann::json& record) {
  if (!f_) return Error("the result file is not open");
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0) {
    return Error(path_ + ": write failed (disk full?)");
  }
  ::fsync(fileno(f_));
  const auto p = record.find("point");
  const auto s = record.find("status");
  if (p != record.end() && p->is_string()) status_[p->get<std::string>()] = (s != record.end() && s->is_string()) ? s->get<std::string>() : "ok";
  return {};
}

}  // namespace dtsim::calibrate
