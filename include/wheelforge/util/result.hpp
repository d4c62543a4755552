#pragma once
// Expected failures are values: every fallible operation returns Result<T>.
// The error code says what kind of failure it is; exactly one place (status_for, beside the
// HTTP handlers) turns a code into an HTTP status.

#include <cassert>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace wf {

enum class Errc {
  invalid,                // the input is malformed or inconsistent (HTTP 400)
  unauthorized,           // no or unknown credentials (401)
  forbidden,              // valid credentials without the right scope (403)
  not_found,              // (404)
  not_acceptable,         // content negotiation found nothing acceptable (406)
  conflict,               // same name, other content, or a reserved name (409)
  gone,                   // an API that no longer exists (410)
  too_large,              // above a configured size limit (413)
  too_slow,               // a client sending its request too slowly (408)
  storage_full,           // ENOSPC / EDQUOT while writing (507)
  io,                     // any other filesystem failure (500)
  internal,               // a bug or an unexpected third-party failure (500)
  unavailable,            // shutting down or overloaded (503)
  method_not_allowed,     // the resource does not answer this method (405)
  uri_too_long,           // a request target above the limit (414)
  range_not_satisfiable,  // a byte range outside the file (416)
  header_too_large,       // a request head above the limit (431)
  upstream,               // an upstream index failed or sent what does not check out (502)
};

struct Error {
  Errc code = Errc::internal;
  std::string message;
};

inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

/// Either a value or an Error. Minimal by design: check ok(), then value() or error().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  [[nodiscard]] const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation without a value.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() {
  return Ok{};
}

/// Collects validation problems so that a user sees every reason at once.
class Problems {
 public:
  void add(std::string problem) { list_.push_back(std::move(problem)); }
  [[nodiscard]] bool empty() const { return list_.empty(); }
  [[nodiscard]] const std::vector<std::string>& list() const { return list_; }
  /// All problems joined with "; ", as one Error of the given code.
  [[nodiscard]] Error to_error(Errc code = Errc::invalid) const;

 private:
  std::vector<std::string> list_;
};

}  // namespace wf
