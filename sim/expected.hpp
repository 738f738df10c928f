// Value-or-error results for user and hardware errors (invariants use DTSIM_ASSERT instead).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dtsim {

// A user-facing error. `field` is the dotted path of the offending setting when one is known
// (e.g. "fabric.oversubscription"); the config layer maps it back to a file and line.
struct Error {
  Error() = default;
  explicit Error(std::string msg, std::string fld = {}) : message(std::move(msg)), field(std::move(fld)) {}
  std::string message;
  std::string field;

  std::string to_string() const { return field.empty() ? message : field + ": " + message; }
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success or an error, for operations with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT(google-explicit-constructor)
  static Status ok_status() { return Status(); }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "dtsim: internal error: %s:%d: assertion '%s' failed: %s\n", file, line, expr, msg);
  std::abort();
}

}  // namespace dtsim

// Invariant check, active in every build type: a failure is a bug in dtsim, never bad input.
#define DTSIM_ASSERT(cond, msg) \
  ((cond) ? static_cast<void>(0) : ::dtsim::assert_fail(#cond, __FILE__, __LINE__, (msg)))
