#include "framing.hpp"

#include <string>

#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Unreserved and sub-delims, the characters of a reg-name besides percent-escapes
// (docs/formats.md, "Host values and percent-encoding").
bool is_reg_name_char(char c) {
  if (is_alnum(c)) return true;
  switch (c) {
    case '-':
    case '.':
    case '_':
    case '~':
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
      return true;
    default:
      return false;
  }
}

bool is_port(std::string_view s) {
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string_view trim_ows(std::string_view s) {
  const auto is_ows = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

bool is_chunked_alone(std::string_view value) {
  bool chunked = false;
  while (true) {
    const auto comma = value.find(',');
    const auto coding = trim_ows(value.substr(0, comma));
    if (!coding.empty()) {
      if (chunked || !iequals(coding, "chunked")) return false;
      chunked = true;
    }
    if (comma == std::string_view::npos) return chunked;
    value.remove_prefix(comma + 1);
  }
}

bool is_valid_host(std::string_view value) {
  std::string_view port;
  if (!value.empty() && value.front() == '[') {
    // IP-literal: an IPv6 address or IPvFuture, which use hex digits, '.', ':' and (IPvFuture)
    // unreserved and sub-delim characters.
    const auto close = value.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (const char c : value.substr(1, close - 1)) {
      if (!is_reg_name_char(c) && c != ':') return false;
    }
    const auto rest = value.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    port = rest.substr(1);
  } else {
    const auto colon = value.find(':');
    const auto name = value.substr(0, colon);
    for (std::size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '%') {
        if (i + 2 >= name.size() || !is_hex(name[i + 1]) || !is_hex(name[i + 2])) return false;
        i += 2;
      } else if (!is_reg_name_char(name[i])) {
        return false;
      }
    }
    if (colon == std::string_view::npos) return true;
    port = value.substr(colon + 1);
  }
  return is_port(port);
}

std::optional<Error> check_head(const HeadFraming& head) {
  if (head.transfer_encodings > 0) {
    // An HTTP/1.0 message with Transfer-Encoding has faulty framing whatever it says
    // (docs/formats.md, "Request heads").
    if (head.version < 11) {
      return make_error(Errc::invalid,
                        "malformed request: Transfer-Encoding is not allowed in HTTP/1.0");
    }
    // When chunked is not the final coding the body length cannot be determined; and
    // no other coding is decoded here, so chunked must be the only one.
    if (head.transfer_encodings > 1 || !is_chunked_alone(head.transfer_encoding)) {
      const std::string shown = head.transfer_encodings > 1
                                    ? std::string("several field lines")
                                    : "'" + sanitize_for_log(head.transfer_encoding, 100) + "'";
      return make_error(Errc::invalid, "malformed request: unsupported Transfer-Encoding (" +
                                           shown + "): only 'chunked' alone is accepted");
    }
  }
  // HTTP/1.1 requires exactly one Host; more than one, or an invalid one, is refused in
  // every version.
  if (head.hosts > 1) {
    return make_error(Errc::invalid, "malformed request: more than one Host header");
  }
  if (head.hosts == 0) {
    if (head.version >= 11) {
      return make_error(Errc::invalid,
                        "malformed request: an HTTP/1.1 request needs a Host header");
    }
    return std::nullopt;
  }
  if (!is_valid_host(head.host)) {
    return make_error(Errc::invalid, "malformed request: invalid Host header '" +
                                         sanitize_for_log(head.host, 100) + "'");
  }
  return std::nullopt;
}

}  // namespace wf::http
