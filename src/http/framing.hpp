#pragma once
// What HTTP/1.1 asks a server to check in a request head before it reads anything after it:
// how the body is framed and the Host field (docs/formats.md, "Request heads"). A head that
// fails is answered 400 and the connection closed: a server that guesses where a body ends can
// be made to run the rest of it as another request (request smuggling).
//
// Pure functions over the head's values: the session gathers them while it copies the fields
// (no allocation), and unit tests call them directly.

#include <cstddef>
#include <optional>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::http {

/// The fields of a request head that decide its framing and authority.
struct HeadFraming {
  unsigned version = 11;               ///< 10 for HTTP/1.0, 11 for HTTP/1.1
  std::size_t transfer_encodings = 0;  ///< Transfer-Encoding field lines
  std::string_view transfer_encoding;  ///< the first one's value
  std::size_t hosts = 0;               ///< Host field lines
  std::string_view host;               ///< the first one's value
};

/// `s` without the optional whitespace (spaces and tabs, RFC 9110 OWS) at either end.
[[nodiscard]] std::string_view trim_ows(std::string_view s);

/// True when a Transfer-Encoding value names the chunked coding and nothing else (any case,
/// optional whitespace, empty list elements ignored). wheelforge decodes no other coding, so
/// "gzip, chunked" is refused as well as "chunked, gzip" (whose body length is unknowable).
[[nodiscard]] bool is_chunked_alone(std::string_view value);

/// True for a Host value of the form `uri-host [":" port]`: a bracketed IP literal or a
/// reg-name of unreserved, percent-encoded and sub-delim characters, then an optional port of
/// digits. The empty value is valid (docs/formats.md, "Request heads" and "Host values and
/// percent-encoding").
[[nodiscard]] bool is_valid_host(std::string_view value);

/// Nothing when the head may be served; otherwise Errc::invalid with a message that names the
/// problem: a Transfer-Encoding other than chunked alone, any Transfer-Encoding in HTTP/1.0,
/// HTTP/1.1 without Host, more than one Host, or an invalid Host. HTTP/1.0 without Host is
/// fine.
[[nodiscard]] std::optional<Error> check_head(const HeadFraming& head);

}  // namespace wf::http
