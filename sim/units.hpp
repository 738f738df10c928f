// Physical quantities as types. Simulated time is an integer count of picoseconds so that event
// order is exact; sizes are integer bytes; rates are doubles (bytes or FLOP per second).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "sim/expected.hpp"

namespace dtsim {

// Simulated time (or a duration) in picoseconds.
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ps(std::int64_t v) { return Time(v); }
  static constexpr Time ns(std::int64_t v) { return Time(v * 1'000); }
  static constexpr Time us(std::int64_t v) { return Time(v * 1'000'000); }
  static constexpr Time ms(std::int64_t v) { return Time(v * 1'000'000'000); }
  static constexpr Time s(std::int64_t v) { return Time(v * 1'000'000'000'000); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }
  // Rounds to the nearest picosecond; saturates at Time::max() for out-of-range values.
  static Time from_seconds(double seconds);

  constexpr std::int64_t picoseconds() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const { return Time(ps_ + o.ps_); }
  constexpr Time operator-(Time o) const { return Time(ps_ - o.ps_); }
  constexpr Time& operator+=(Time o) { ps_ += o.ps_; return *this; }
  constexpr Time& operator-=(Time o) { ps_ -= o.ps_; return *this; }
  constexpr Time operator*(std::int64_t k) const { return Time(ps_ * k); }
  constexpr Time operator/(std::int64_t k) const { return Time(ps_ / k); }

 private:
  constexpr explicit Time(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

// A size in bytes.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t v) : v_(v) {}
  static constexpr Bytes KiB(std::int64_t v) { return Bytes(v << 10); }
  static constexpr Bytes MiB(std::int64_t v) { return Bytes(v << 20); }
  static constexpr Bytes GiB(std::int64_t v) { return Bytes(v << 30); }
  constexpr std::int64_t count() const { return v_; }
  constexpr double as_double() const { return static_cast<double>(v_); }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return Bytes(v_ + o.v_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(v_ - o.v_); }
  constexpr Bytes& operator+=(Bytes o) { v_ += o.v_; return *this; }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(v_ * k); }
  constexpr Bytes operator/(std::int64_t k) const { return Bytes(v_ / k); }

 private:
  std::int64_t v_ = 0;
};

// A data rate in bytes per second (one direction of a link).
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_s(double v) { return Bandwidth(v); }
  static constexpr Bandwidth GBps(double v) { return Bandwidth(v * 1e9); }    // 1e9 bytes/s
  static constexpr Bandwidth Gbps(double v) { return Bandwidth(v * 1e9 / 8); } // 1e9 bits/s
  constexpr double bytes_per_s() const { return v_; }
  constexpr double GBps() const { return v_ * 1e-9; }
  constexpr bool is_zero() const { return v_ == 0.0; }
  constexpr auto operator<=>(const Bandwidth&) const = default;
  constexpr Bandwidth operator*(double k) const { return Bandwidth(v_ * k); }
  constexpr Bandwidth operator+(Bandwidth o) const { return Bandwidth(v_ + o.v_); }

 private:
  constexpr explicit Bandwidth(double v) : v_(v) {}
  double v_ = 0.0;
};

// A compute rate in floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate flops_per_s(double v) { return FlopRate(v); }
  static constexpr FlopRate TFLOPs(double v) { return FlopRate(v * 1e12); }
  constexpr double flops_per_s() const { return v_; }
  constexpr double TFLOPs() const { return v_ * 1e-12; }
  constexpr auto operator<=>(const FlopRate&) const = default;
  constexpr FlopRate operator*(double k) const { return FlopRate(v_ * k); }

 private:
  constexpr explicit FlopRate(double v) : v_(v) {}
  double v_ = 0.0;
};

// Time to move `bytes` at `bw`, rounded up to a whole picosecond. `bw` must be positive.
Time transfer_time(double bytes, Bandwidth bw);

// Parsers for quantities written with units, e.g. "900 GB/s", "400 Gb/s", "1.5 us", "80 GiB",
// "989 TFLOP/s". Conventions (docs/config.md):
//  - sizes: B, KB/MB/GB/TB/PB (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024), and the bare
//    suffixes K/M/G/T (powers of 1024, as nccl-tests' -b/-e options); a bare number is bytes.
//  - rates: B/s with SI or IEC prefixes (GB/s, GiB/s, also GBps); lower-case b is bits (Gb/s, Gbps).
//  - times: ps, ns, us (or µs), ms, s, min, h, d.
//  - compute: FLOP/s or FLOPS with SI prefixes (TFLOP/s, PFLOPS).
//  - frequencies: Hz, kHz, MHz, GHz (returned in Hz).
//  - powers: W, kW, MW (returned in watts).
// Negative values, missing numbers and unknown units are errors that quote the text.
Expected<Bytes> parse_bytes(std::string_view text);
Expected<Bandwidth> parse_bandwidth(std::string_view text);
Expected<Time> parse_time(std::string_view text);
Expected<FlopRate> parse_flop_rate(std::string_view text);
Expected<double> parse_frequency(std::string_view text);
Expected<double> parse_power(std::string_view text);

// Human-readable forms for console output ("1.5 us", "8 GiB", "450 GB/s").
std::string to_string(Time t);
std::string to_string(Bytes b);
std::string to_string(Bandwidth bw);
std::string to_string(FlopRate r);

}  // namespace dtsim
