#pragma once
// Absolute http:// and https:// URLs (RFC 3986): parsing, resolving a reference against a base
// (a Location header, a link in an upstream page), and the forms that may be shown or logged
// (never the credentials of the userinfo, never the query).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "wheelforge/util/result.hpp"

namespace wf {

struct Url {
  std::string scheme;                ///< "http" or "https", lower-case
  std::string userinfo;              ///< "user:password" as written (percent-encoded); empty: none
  std::string host;                  ///< lower-case; an IPv6 literal without its brackets
  std::uint16_t port = 0;            ///< as written, or the scheme's default (80, 443)
  std::string path;                  ///< as written; "/" when empty
  std::optional<std::string> query;  ///< without the '?'; the fragment is dropped

  [[nodiscard]] bool https() const { return scheme == "https"; }
  /// True when the host is an IPv4 or IPv6 literal.
  [[nodiscard]] bool host_is_ip() const;
  /// "host", "host:port" when the port is not the scheme's default; IPv6 in brackets (the
  /// Host header's form).
  [[nodiscard]] std::string authority() const;
  /// path and query: the request target.
  [[nodiscard]] std::string target() const;
  /// The whole URL without the userinfo: "https://host/path?query".
  [[nodiscard]] std::string str() const;
  /// The whole URL with its userinfo: what a fetch is given, never what is logged or shown.
  [[nodiscard]] std::string with_userinfo() const;
  /// For logs and messages: "https://host/path", no userinfo and no query.
  [[nodiscard]] std::string redacted() const;
  /// The userinfo's user and password, percent-decoded; nullopt without userinfo (or with a
  /// malformed escape).
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> credentials() const;
  /// Same scheme, host and port.
  [[nodiscard]] bool same_origin(const Url& other) const;
};

/// Parses an absolute http:// or https:// URL. Fails with invalid naming the problem: another
/// scheme, no host, a bad port, spaces or control characters (the message never repeats the
/// userinfo).
[[nodiscard]] Result<Url> parse_url(std::string_view text);

/// Resolves `reference` (absolute, "//host/path", "/path", "path", "?query", with dot segments)
/// against `base` as RFC 3986 section 5.2 says. The result keeps the base's userinfo only when
/// the reference has no authority of its own.
[[nodiscard]] Result<Url> resolve_url(const Url& base, std::string_view reference);

}  // namespace wf
