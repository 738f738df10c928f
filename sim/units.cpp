#include "sim/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace dtsim {
namespace {

struct Scaled {
  std::string_view unit;
  double factor;
};

// Splits "12.5 GB/s" into 12.5 and "GB/s". Rejects negative numbers, NaN, infinities.
struct NumberAndUnit {
  double number;
  std::string_view unit;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Expected<NumberAndUnit> split(std::string_view text, std::string_view what) {
  std::string_view s = trim(text);
  if (s.empty()) return Error{fmt::format("empty {} (expected e.g. {})", what, what == "size" ? "\"80 GiB\"" : "a number with a unit")};
  if (s.front() == '-') return Error{fmt::format("'{}' is negative; a {} must be >= 0", text, what)};
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data()) {
    return Error{fmt::format("'{}' is not a {}: it does not start with a number", text, what)};
  }
  if (!std::isfinite(v)) return Error{fmt::format("'{}' is not a finite {}", text, what)};
  std::string_view unit = trim(std::string_view(ptr, static_cast<std::size_t>(s.data() + s.size() - ptr)));
  return NumberAndUnit{v, unit};
}

template <std::size_t N>
const Scaled* find_unit(const std::array<Scaled, N>& table, std::string_view unit) {
  for (const auto& s : table) {
    if (s.unit == unit) return &s;
  }
  return nullptr;
}

template <std::size_t N>
std::string unit_list(const std::array<Scaled, N>& table) {
  std::string out;
  for (const auto& s : table) {
    if (s.unit.empty()) continue;
    if (!out.empty()) out += ", ";
    out += s.unit;
  }
  return out;
}

// A quantity that must carry one of `table`'s units: its number times the unit's factor.
template <std::size_t N>
Expected<double> parse_scaled(std::string_view text, std::string_view what, const std::array<Scaled, N>& table, std::string_view example) {
  auto nu = split(text, what);
  if (!nu) return nu.error();
  if (nu->unit.empty()) return Error{fmt::format("'{}' has no unit; write a {} like \"{}\"", text, what, example)};
  const Scaled* u = find_unit(table, nu->unit);
  if (u == nullptr) {
    return Error{fmt::format("'{}' has an unknown {} unit '{}' (use one of {})", text, what, nu->unit, unit_list(table))};
  }
  return nu->number * u->factor;
}

constexpr double kKi = 1024.0, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024, kPi = kTi * 1024;

constexpr std::array<Scaled, 19> kSizeUnits{{
    {"", 1}, {"B", 1},
    {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
    {"KiB", kKi}, {"MiB", kMi}, {"GiB", kGi}, {"TiB", kTi}, {"PiB", kPi},
    {"K", kKi}, {"M", kMi}, {"G", kGi}, {"T", kTi},
    {"k", kKi}, {"m", kMi}, {"g", kGi},
}};

constexpr std::array<Scaled, 26> kRateUnits{{
    {"B/s", 1}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
    {"KiB/s", kKi}, {"MiB/s", kMi}, {"GiB/s", kGi}, {"TiB/s", kTi},
    {"Bps", 1}, {"KBps", 1e3}, {"MBps", 1e6}, {"GBps", 1e9}, {"TBps", 1e12},
    {"b/s", 1.0 / 8}, {"Kb/s", 1e3 / 8}, {"Mb/s", 1e6 / 8}, {"Gb/s", 1e9 / 8}, {"Tb/s", 1e12 / 8},
    {"bps", 1.0 / 8}, {"Kbps", 1e3 / 8}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8},
    {"kb/s", 1e3 / 8}, {"kbps", 1e3 / 8},
}};

constexpr std::array<Scaled, 10> kTimeUnits{{
    {"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3},
    {"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}, {"sec", 1},
}};

constexpr std::array<Scaled, 16> kFlopUnits{{
    {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}, {"EFLOP/s", 1e18},
    {"FLOPS", 1}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}, {"EFLOPS", 1e18},
    {"MFLOP/s", 1e6}, {"MFLOPS", 1e6}, {"KFLOP/s", 1e3}, {"kFLOP/s", 1e3},
    {"TFlop/s", 1e12}, {"PFlop/s", 1e15},
}};

constexpr std::array<Scaled, 4> kFrequencyUnits{{{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}}};

constexpr std::array<Scaled, 3> kPowerUnits{{{"W", 1}, {"kW", 1e3}, {"MW", 1e6}}};

}  // namespace

Time Time::from_seconds(double seconds) {
  const double ps = std::round(seconds * 1e12);
  if (!(ps < 9.2e18)) return Time::max();
  if (ps <= -9.2e18) return Time(std::numeric_limits<std::int64_t>::min());
  return Time(static_cast<std::int64_t>(ps));
}

Time transfer_time(double bytes, Bandwidth bw) {
  DTSIM_ASSERT(bw.bytes_per_s() > 0, "transfer_time needs a positive bandwidth");
  const double ps = std::ceil(bytes / bw.bytes_per_s() * 1e12);
  if (!(ps < 9.2e18)) return Time::max();
  return Time::ps(static_cast<std::int64_t>(ps));
}

Expected<Bytes> parse_bytes(std::string_view text) {
  auto nu = split(text, "size");
  if (!nu) return nu.error();
  const Scaled* u = find_unit(kSizeUnits, nu->unit);
  if (u == nullptr) {
    return Error{fmt::format("'{}' has an unknown size unit '{}' (use one of {})", text, nu->unit,
                             unit_list(kSizeUnits))};
  }
  const double v = std::round(nu->number * u->factor);
  if (v > 9.0e18) return Error{fmt::format("'{}' is too large a size", text)};
  return Bytes(static_cast<std::int64_t>(v));
}

Expected<Bandwidth> parse_bandwidth(std::string_view text) {
  auto nu = split(text, "bandwidth");
  if (!nu) return nu.error();
  if (nu->unit.empty()) {
    return Error{fmt::format("'{}' has no unit; write a bandwidth like \"900 GB/s\" or \"400 Gb/s\"", text)};
  }
  const Scaled* u = find_unit(kRateUnits, nu->unit);
  if (u == nullptr) {
    return Error{fmt::format("'{}' has an unknown bandwidth unit '{}' (use one of {})", text, nu->unit,
                             unit_list(kRateUnits))};
  }
  return Bandwidth::bytes_per_s(nu->number * u->factor);
}

Expected<Time> parse_time(std::string_view text) {
  auto nu = split(text, "time");
  if (!nu) return nu.error();
  if (nu->unit.empty()) {
    return Error{fmt::format("'{}' has no unit; write a time like \"1.5 us\" or \"2 ms\"", text)};
  }
  const Scaled* u = find_unit(kTimeUnits, nu->unit);
  if (u == nullptr) {
    return Error{fmt::format("'{}' has an unknown time unit '{}' (use one of {})", text, nu->unit,
                             unit_list(kTimeUnits))};
  }
  const double seconds = nu->number * u->factor;
  if (seconds * 1e12 > 9.2e18) {
    return Error{fmt::format("'{}' is too long a time (the limit is about 106 days)", text)};
  }
  return Time::from_seconds(seconds);
}

Expected<FlopRate> parse_flop_rate(std::string_view text) {
  auto v = parse_scaled(text, "compute rate", kFlopUnits, "989 TFLOP/s");
  if (!v) return v.error();
  return FlopRate::flops_per_s(*v);
}

Expected<double> parse_frequency(std::string_view text) { return parse_scaled(text, "frequency", kFrequencyUnits, "1980 MHz"); }

Expected<double> parse_power(std::string_view text) { return parse_scaled(text, "power", kPowerUnits, "700 W"); }

std::string to_string(Time t) {
  const double ps = static_cast<double>(t.picoseconds());
  const double a = std::fabs(ps);
  if (a < 1e3) return fmt::format("{} ps", t.picoseconds());
  if (a < 1e6) return fmt::format("{:.3g} ns", ps * 1e-3);
  if (a < 1e9) return fmt::format("{:.4g} us", ps * 1e-6);
  if (a < 1e12) return fmt::format("{:.4g} ms", ps * 1e-9);
  return fmt::format("{:.4g} s", ps * 1e-12);
}

std::string to_string(Bytes b) {
  const double v = b.as_double();
  if (v < kKi) return fmt::format("{} B", b.count());
  if (v < kMi) return fmt::format("{:.4g} KiB", v / kKi);
  if (v < kGi) return fmt::format("{:.4g} MiB", v / kMi);
  if (v < kTi) return fmt::format("{:.4g} GiB", v / kGi);
  return fmt::format("{:.4g} TiB", v / kTi);
}

std::string to_string(Bandwidth bw) {
  const double v = bw.bytes_per_s();
  if (v >= 1e12) return fmt::format("{:.4g} TB/s", v * 1e-12);
  if (v >= 1e9) return fmt::format("{:.4g} GB/s", v * 1e-9);
  if (v >= 1e6) return fmt::format("{:.4g} MB/s", v * 1e-6);
  return fmt::format("{:.4g} B/s", v);
}

std::string to_string(FlopRate r) {
  const double v = r.flops_per_s();
  if (v >= 1e15) return fmt::format("{:.4g} PFLOP/s", v * 1e-15);
  if (v >= 1e12) return fmt::format("{:.4g} TFLOP/s", v * 1e-12);
  return fmt::format("{:.4g} GFLOP/s", v * 1e-9);
}

}  // namespace dtsim
