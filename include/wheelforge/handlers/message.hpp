#pragma once
// Plain request/response values, independent of Boost.Beast, so that handlers are ordinary
// functions that unit tests can call directly; and the one mapping of error codes to HTTP
// statuses.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::handlers {

enum class Method : std::uint8_t { get, head, put, post, del, other };

/// The method's name as it appears on the request line ("DELETE"; "OTHER" for the rest).
[[nodiscard]] const char* method_name(Method m);

struct Request {
  Method method = Method::get;
  std::string target;                 ///< raw request target, for logs
  std::vector<std::string> segments;  ///< percent-decoded path segments ("" for a trailing '/')
  std::string query;                  ///< raw query string (after '?')
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-case
  bool tls = false;                                          ///< arrived over HTTPS
  std::string peer;      ///< the client's address, for the audit trail ("" when unknown)
  std::uint64_t id = 0;  ///< the server's request id, for log lines (0 outside the server)
  /// The body of a route whose body policy is `small` (admin requests, web forms), read in
  /// full before the handler runs; empty for the others.
  std::string body;

  /// First header with this (lower-case) name, or "".
  [[nodiscard]] std::string_view header(std::string_view name) const;
  /// Percent-decoded value of the first query parameter with this name, or "".
  [[nodiscard]] std::string query_param(std::string_view name) const;
  /// Like query_param, but nullopt when the parameter is absent ("?name" and "?name=" are
  /// present with an empty value).
  [[nodiscard]] std::optional<std::string> find_query_param(std::string_view name) const;
};

/// The scheme and authority clients used to reach us ("https://host:port"), for absolute URLs
/// in answers. The Host header is client-controlled: anything but a plain host[:port] is
/// replaced by "localhost".
[[nodiscard]] std::string base_url(const Request& req);

/// Splits a request target into decoded segments and query. Errc::invalid for malformed
/// percent-escapes, NUL bytes or a target that is not an absolute path.
[[nodiscard]] Result<std::pair<std::vector<std::string>, std::string>> parse_target(
    std::string_view target);

/// Decodes an application/x-www-form-urlencoded string ('+' is a space).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s);

/// A byte range of a file on disk, sent without loading it into memory.
struct FileRange {
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct Response {
  int status = 200;
  std::string reason;  ///< optional custom reason phrase (sanitized by the session)
  std::vector<std::pair<std::string, std::string>> headers;
  /// In-memory body; a shared one points into the page cache without copying.
  std::variant<std::string, std::shared_ptr<const std::string>, FileRange> body;
  bool close = false;  ///< close the connection after this response

  void set(std::string name, std::string value) {
    if (headers.capacity() == 0) headers.reserve(8);
    headers.emplace_back(std::move(name), std::move(value));
  }
  [[nodiscard]] std::string_view header(std::string_view name) const;
};

/// The HTTP status for an error code. The one place that maps the two.
[[nodiscard]] int status_for(Errc code);

/// A response carrying an error: status from the error code, text/plain body with the
/// message, and the message (sanitized) as the reason phrase so that clients that only show
/// the status line (twine) show the cause. Errc::io (500) says it is a server storage error,
/// not the client's; Errc::internal (500) only says "internal server error". No Retry-After
/// on 503: a read-only store or a damaged file waits for an administrator, and pip would
/// sleep for whatever it is told (docs/clients.md, "pip" and "twine, poetry, pdm").
[[nodiscard]] Response error_response(const Error& error);

/// The answer header that carries the catalog position a write reached (docs/scale.md,
/// "Read your writes"), and the request header (or query parameter `min_position`) that asks
/// a replica to answer only once it has applied a position.
inline constexpr const char* kPositionHeader = "X-Wheelforge-Position";
inline constexpr const char* kMinPositionHeader = "x-wheelforge-min-position";
/// The answer header of a replica whose change feed has not been read for a while (the
/// database is unreachable): `age=SECONDS` since it last was, how old its pages may be
/// (docs/scale.md, "Operations").
inline constexpr const char* kCatalogStaleHeader = "Wheelforge-Catalog-Stale";

/// The position a request asks for (header first, then the query parameter); nullopt when it
/// asks for none. Errc::invalid when the value is not a decimal number.
[[nodiscard]] Result<std::optional<std::uint64_t>> requested_position(const Request& req);

/// 503 with Retry-After for a request that waited for position `wanted` while this replica
/// had applied only `applied`: names the lag.
[[nodiscard]] Response position_lag_response(std::uint64_t applied, std::uint64_t wanted);

/// The 405 answer: an error response with the `Allow` header naming the methods the address
/// answers ("GET, HEAD").
[[nodiscard]] Response method_not_allowed(std::string_view allow);

/// The 413 for a request body above its limit, in the one wording every route uses:
/// "<what> of N bytes exceeds the limit of M bytes", without "of N bytes" when the size is not
/// known in advance (a chunked body that grew past the limit).
[[nodiscard]] Error body_too_large(std::string_view what, std::optional<std::uint64_t> size,
                                   std::uint64_t limit);

/// The 503 message for a file whose stored copy is damaged (quarantined by `fsck --repair`,
/// or gone): names the file and how it heals.
[[nodiscard]] std::string damaged_message(std::string_view filename);

}  // namespace wf::handlers
