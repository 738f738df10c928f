#include "trace/reader.hpp"
#include "sim/text.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <istream>
#include <memory>
#include <streambuf>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dtsim::trace {

std::size_t Trace::skipped_total() const {
  std::size_t n = 0;
  for (const auto& [cat, count] : skipped) n += count;
  return n;
}

const Annotation* Trace::profiler_step() const {
  for (const auto& a : annotations) {
    if (!a.gpu && a.name.rfind("ProfilerStep#", 0) == 0) return &a;
  }
  return nullptr;
}

namespace {

// A read-only stream buffer over zlib's gz reader, which reads gzip and plain files alike.
class GzStreamBuf : public std::streambuf {
 public:
  explicit GzStreamBuf(gzFile f) : file_(f) {}
  std::uint64_t delivered() const { return delivered_; }
  bool failed() const { return failed_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) failed_ = true;
    if (n <= 0) return traits_type::eof();
    delivered_ += static_cast<std::uint64_t>(n);
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  std::array<char, 1 << 16> buf_{};
  std::uint64_t delivered_ = 0;
  bool failed_ = false;
};

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Beyond +-9e15 us (285 years) a time is nonsense; it saturates there instead of overflowing, and
// the limits on ts and dur refuse it.
constexpr double kMaxAbsNs = 9e18;
std::int64_t saturated_ns(double ns) { return std::llround(std::clamp(ns, -kMaxAbsNs, kMaxAbsNs)); }

// Microseconds as written ("4559490965629.471") to integer nanoseconds, without a round trip
// through double (16 significant digits do not survive one exactly).

std::int64_t us_text_to_ns(const std::string& text, double value) {
  const auto dot = text.find('.');
  const std::string whole = dot == std::string::npos ? text : text.substr(0, dot);
  if (text.find_first_of("eE") != std::string::npos || text.empty() || whole.size() > 15) return saturated_ns(value * 1000.0);
  std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  const bool neg = !whole.empty() && whole[0] == '-';
  std::int64_t w = 0;
  for (char c : whole) {
    if (c >= '0' && c <= '9') w = w * 10 + (c - '0');
  }
  std::int64_t f = 0;
  for (std::size_t i = 0; i < 3; ++i) f = f * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  if (frac.size() > 3 && frac[3] >= '5') ++f;  // round half up on the fourth decimal
  const std::int64_t ns = w * 1000 + f;
  return neg ? -ns : ns;
}

struct Value {
  enum class Kind { null, boolean, integer, floating, string } kind = Kind::null;
  std::int64_t i = 0;
  double f = 0;
  const std::string* text = nullptr;  // strings, and floats as written
  std::int64_t as_int() const { return kind == Kind::integer ? i : kind == Kind::floating ? std::llround(f) : 0; }
  std::int64_t as_ns() const {
    if (kind == Kind::integer) return saturated_ns(static_cast<double>(i) * 1000.0);
    if (kind == Kind::floating) return us_text_to_ns(*text, f);
    return 0;
  }
  bool numeric() const { return kind == Kind::integer || kind == Kind::floating; }
};

// One event being read.
struct RawEvent {
  std::string ph, cat, name;
  std::int64_t ts = 0, dur = 0, tid = 0;
  bool has_ts = false, has_dur = false;
  std::int64_t stream = 0, correlation = -1, external_id = -1, bytes = 0;
  std::int64_t id = -1;  // flow events
  bool has_id = false;
  std::array<std::int64_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  std::size_t grid_n = 0, block_n = 0;
  std::vector<std::vector<std::int64_t>> dims;
  std::vector<std::string> types;
};

class Handler {
 public:
  explicit Handler(Trace& t) : t_(t) {}

  // SAX interface (nlohmann::json_sax).
  bool null() { return value(Value{}); }
  bool boolean(bool b) { return value(Value{Value::Kind::boolean, b ? 1 : 0, 0, nullptr}); }
  bool number_integer(std::int64_t v) { return value(Value{Value::Kind::integer, v, 0, nullptr}); }
  bool number_unsigned(std::uint64_t v) {
    return value(Value{Value::Kind::integer, static_cast<std::int64_t>(std::min<std::uint64_t>(v, INT64_MAX)), 0, nullptr});
  }
  bool number_float(double v, const std::string& s) { return value(Value{Value::Kind::floating, 0, v, &s}); }
  bool string(std::string& s) { return value(Value{Value::Kind::string, 0, 0, &s}); }
  bool binary(nlohmann::json::binary_t&) { return value(Value{}); }
  bool key(std::string& k) {
    stack_.back().key = k;
    return true;
  }
  bool start_object(std::size_t) {
    if (stack_.empty()) top_object_ = true;
    stack_.push_back(Frame{false, {}});
    if (stack_.size() == 3 && event_open()) {
      ev_ = RawEvent{};
      ++t_.events;
    }
    return true;
  }
  bool end_object() {
    if (stack_.size() == 3 && event_open()) finish_event();
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    if (stack_.empty()) {
      top_array_ = true;
      return false;  // a Chrome trace in array form, not a profiler trace: stop here
    }
    if (stack_.size() == 1 && stack_[0].key == "traceEvents") saw_events_ = true;
    // "Input Dims": [[8192, 768], [768], []]: each inner array (opened at depth 5) is one input.
    if (stack_.size() == 5 && in_args() && iequals(arg_key(), "Input Dims")) ev_.dims.emplace_back();
    stack_.push_back(Frame{true, {}});
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& ex) {
    error_pos_ = pos;
    error_token_ = token;
    error_what_ = ex.what();
    has_error_ = true;
    return false;
  }

  bool top_object() const { return top_object_; }
  bool top_array() const { return top_array_; }
  bool saw_events() const { return saw_events_; }
  bool has_error() const { return has_error_; }
  // The first event time beyond its limit ("event N: ts ..."); empty when none.
  const std::string& bad_time() const { return bad_time_; }
  std::size_t error_pos() const { return error_pos_; }
  const std::string& error_what() const { return error_what_; }

 private:
  struct Frame {
    bool array = false;
    std::string key;  // current key (objects)
  };

  // An event object of traceEvents is open: stack = [top, events, event, ...].
  bool event_open() const { return stack_.size() >= 3 && stack_[0].key == "traceEvents" && stack_[1].array && !stack_[2].array; }
  bool in_event_field() const { return stack_.size() == 3 && event_open(); }
  // Inside an event's args: stack = [top, events, event, args, ...].
  bool in_args() const { return stack_.size() >= 4 && event_open() && stack_[2].key == "args" && !stack_[3].array; }
  const std::string& arg_key() const { return stack_[3].key; }

  // Times are kept as integer nanoseconds: a timestamp beyond 4e15 us (epoch microseconds reach
  // year 2096) or a duration beyond 1e11 us (28 hours) would overflow them, or their sums, and is
  // refused (found by the issue-15 mutation run: ts 99999999999999999999 overflowed in us_text_to_ns).
  bool time_fits(const std::string& k, const Value& v) {
    const double us = v.kind == Value::Kind::integer ? static_cast<double>(v.i) : v.f;
    const double limit = k == "ts" ? 4e15 : 1e11;
    if (std::fabs(us) <= limit) return true;
    if (bad_time_.empty()) {
      bad_time_ = fmt::format("event {}: '{}' of {} us is beyond the {:g} us dtsim reads", t_.events, k,
                              v.kind == Value::Kind::integer ? std::to_string(v.i) : *v.text, limit);
    }
    return false;
  }

  bool value(const Value& v) {
    if (stack_.size() == 1) {
      if (stack_[0].key == "schemaVersion" && v.numeric()) t_.schema_version = v.as_int();
      return true;
    }
    if (stack_.size() == 3 && stack_[0].key == "deviceProperties" && stack_[2].key == "name" && t_.device.empty() &&
        v.kind == Value::Kind::string) {
      t_.device = *v.text;
      return true;
    }
    if (in_event_field()) {
      event_field(stack_[2].key, v);
    } else if (in_args()) {
      arg_value(v);
    }
    return true;
  }

  void event_field(const std::string& k, const Value& v) {
    if (k == "ph" && v.kind == Value::Kind::string) ev_.ph = *v.text;
    else if (k == "cat" && v.kind == Value::Kind::string) ev_.cat = *v.text;
    else if (k == "name" && v.kind == Value::Kind::string) ev_.name = *v.text;
    else if ((k == "ts" || k == "dur") && v.numeric() && !time_fits(k, v)) return;
    else if (k == "ts" && v.numeric()) ev_.ts = v.as_ns(), ev_.has_ts = true;
    else if (k == "dur" && v.numeric()) ev_.dur = v.as_ns(), ev_.has_dur = true;
    else if (k == "tid" && v.numeric()) ev_.tid = v.as_int();
    else if (k == "id" && v.numeric()) ev_.id = v.as_int(), ev_.has_id = true;
  }

  void arg_value(const Value& v) {
    const std::string& k = arg_key();
    const std::size_t depth = stack_.size();
    if (depth == 4) {
      if (!v.numeric()) return;
      if (iequals(k, "stream")) ev_.stream = v.as_int();
      else if (iequals(k, "correlation")) ev_.correlation = v.as_int();
      else if (iequals(k, "External id")) ev_.external_id = v.as_int();
      else if (iequals(k, "bytes")) ev_.bytes = v.as_int();
    } else if (depth == 5) {
      if (k == "grid" && v.numeric() && ev_.grid_n < 3) ev_.grid[ev_.grid_n++] = v.as_int();
      else if (k == "block" && v.numeric() && ev_.block_n < 3) ev_.block[ev_.block_n++] = v.as_int();
      else if (iequals(k, "Input type") && v.kind == Value::Kind::string) ev_.types.push_back(*v.text);
    } else if (depth == 6 && iequals(k, "Input Dims") && v.numeric() && !ev_.dims.empty()) {
      ev_.dims.back().push_back(v.as_int());
    }
  }

  void finish_event() {
    const std::string cat = ascii_lower(ev_.cat);
    const std::size_t index = t_.events - 1;
    const bool complete = ev_.ph == "X" && ev_.has_ts;
    const Interval when{ev_.ts, ev_.dur};
    auto skip = [&] { ++t_.skipped[ev_.cat.empty() ? "(ph " + ev_.ph + ")" : ev_.cat]; };
    if (cat == "fwdbwd" && (ev_.ph == "s" || ev_.ph == "f") && ev_.has_ts && ev_.has_id) {
      t_.autograd_flows.push_back(FlowPoint{ev_.id, ev_.ts, ev_.ph == "s"});
      return;
    }
    if (!complete) return skip();
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "memcpy" || cat == "gpu_memset" || cat == "memset") {
      GpuOp g;
      g.name = std::move(ev_.name);
      g.kind = cat == "kernel" ? GpuOpKind::kernel : (cat.find("memcpy") != std::string::npos ? GpuOpKind::memcpy : GpuOpKind::memset);
      g.time = when;
      g.stream = ev_.stream;
      g.correlation = ev_.correlation;
      g.external_id = ev_.external_id;
      g.grid = ev_.grid;
      g.block = ev_.block;
      g.bytes = ev_.bytes;
      t_.gpu.push_back(std::move(g));
    } else if (cat == "cpu_op" || cat == "operator") {
      if (ev_.name.rfind("ProfilerStep#", 0) == 0) t_.annotations.push_back(Annotation{ev_.name, when, false, index});
      t_.cpu.push_back(CpuOp{std::move(ev_.name), when, ev_.tid, ev_.external_id, std::move(ev_.dims), std::move(ev_.types)});
    } else if (cat == "cuda_runtime" || cat == "runtime" || cat == "cuda_driver") {
      t_.runtime.push_back(RuntimeCall{std::move(ev_.name), when, ev_.tid, ev_.correlation});
    } else if (cat == "user_annotation" || cat == "gpu_user_annotation") {
      t_.annotations.push_back(Annotation{std::move(ev_.name), when, cat == "gpu_user_annotation", index});
    } else if (cat == "overhead") {
      t_.profiler_overhead.push_back(when);
    } else {
      skip();
    }
  }

  Trace& t_;
  std::vector<Frame> stack_;
  RawEvent ev_;
  bool top_object_ = false, top_array_ = false, saw_events_ = false;
  bool has_error_ = false;
  std::string bad_time_;
  std::size_t error_pos_ = 0;
  std::string error_token_, error_what_;
};

}  // namespace

Expected<Trace> read_trace(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) return Error(fmt::format("{}: cannot open", path));
  GzStreamBuf buf(f.get());
  std::istream in(&buf);
  if (in.peek() == std::char_traits<char>::eof()) {
    if (buf.failed()) return Error(fmt::format("{}: not readable as gzip or plain text (corrupt gzip stream?)", path));
    return Error(fmt::format("{}: empty file (0 bytes): not a PyTorch profiler trace", path));
  }
  Trace t;
  t.file = path;
  Handler h(t);
  const bool ok = nlohmann::json::sax_parse(in, &h, nlohmann::json::input_format_t::json, true, true);
  const std::string gz_note = gzdirect(f.get()) ? "" : " of the uncompressed text";
  if (!ok && h.has_error()) {
    const bool at_end = h.error_what().find("end of input") != std::string::npos;
    if (buf.failed()) {
      return Error(fmt::format("{}: truncated or corrupt gzip stream (stopped after byte {}{})", path, h.error_pos(), gz_note));
    }
    if (at_end && h.top_object()) {
      return Error(fmt::format("{}: truncated: the JSON ends at byte {}{} inside event {} (was the profiler interrupted while writing?)", path,
                               h.error_pos(), gz_note, t.events));
    }
    if (!h.top_object() && !h.top_array()) {
      return Error(fmt::format("{}: not JSON, so not a PyTorch profiler trace (byte {}{}: {})", path, h.error_pos(), gz_note, h.error_what()));
    }
    return Error(fmt::format("{}: malformed JSON at byte {}{} (event {}): {}", path, h.error_pos(), gz_note, t.events, h.error_what()));
  }
  if (h.top_array()) {
    return Error(fmt::format("{}: not a PyTorch profiler trace: the top level is an array (Chrome's array form); the profiler "
                             "writes an object with 'traceEvents'",
                             path));
  }
  if (!h.saw_events()) {
    return Error(fmt::format("{}: not a PyTorch profiler trace: valid JSON of {} bytes{} but no 'traceEvents' array", path,
                             buf.delivered(), gz_note));
  }
  if (t.events == 0) return Error(fmt::format("{}: empty trace: 'traceEvents' holds no events", path));
  if (!h.bad_time().empty()) return Error(fmt::format("{}: {}", path, h.bad_time()));
  std::vector<const Annotation*> steps;
  for (const auto& a : t.annotations) {
    if (!a.gpu && a.name.rfind("ProfilerStep#", 0) == 0) steps.push_back(&a);
  }
  if (steps.size() > 1) {
    return Error(fmt::format("{}: holds {} profiler steps ({} at event {}, {} at event {}{}); dtsim reads one step: profile with "
                             "schedule(active=1) or cut the file to one step",
                             path, steps.size(), steps[0]->name, steps[0]->event_index, steps[1]->name, steps[1]->event_index,
                             steps.size() > 2 ? ", ..." : ""));
  }
  if (t.gpu.empty()) {
    return Error(fmt::format("{}: CPU-only trace: {} events, {} CPU operators and no GPU kernel, memcpy or memset (profile with "
                             "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
                             path, t.events, t.cpu.size()));
  }
  return t;
}

}  // namespace dtsim::trace
