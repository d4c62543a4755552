#include "wheelforge/util/url.hpp"

#include <utility>

#include "wheelforge/util/strings.hpp"

namespace wf {

namespace {

std::uint16_t default_port(std::string_view scheme) {
  return scheme == "https" ? 443 : 80;
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string_view in) {
  std::string out;
  while (!in.empty()) {
    if (in.starts_with("../")) {
      in.remove_prefix(3);
    } else if (in.starts_with("./") || in.starts_with("/./")) {
      in.remove_prefix(2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.starts_with("/../") || in == "/..") {
      in = in.size() == 3 ? std::string_view("/") : in.substr(3);
      const auto slash = out.rfind('/');
      out.resize(slash == std::string::npos ? 0 : slash);
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      const auto next = in.find('/', 1);
      const auto segment = in.substr(0, next);
      out += segment;
      in.remove_prefix(segment.size());
    }
  }
  return out;
}

/// The parts of a reference: each absent one is nullopt.
struct Parts {
  std::optional<std::string_view> scheme;
  std::optional<std::string_view> authority;
  std::string_view path;
  std::optional<std::string_view> query;
};

Parts split_reference(std::string_view ref) {
  Parts p;
  if (const auto hash = ref.find('#'); hash != std::string_view::npos) ref = ref.substr(0, hash);
  // A scheme is letters, digits, '+', '-', '.' before a ':' that comes before any '/', '?'.
  if (!ref.empty() && is_alpha(ref[0])) {
    for (std::size_t i = 1; i < ref.size(); ++i) {
      const char c = ref[i];
      if (c == ':') {
        p.scheme = ref.substr(0, i);
        ref.remove_prefix(i + 1);
        break;
      }
      if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') break;
    }
  }
  if (ref.starts_with("//")) {
    ref.remove_prefix(2);
    const auto end = ref.find_first_of("/?");
    p.authority = ref.substr(0, end);
    ref.remove_prefix(p.authority->size());
  }
  const auto q = ref.find('?');
  p.path = ref.substr(0, q);
  if (q != std::string_view::npos) p.query = ref.substr(q + 1);
  return p;
}

bool valid_host_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '%' || c == '~';
}

}  // namespace

bool Url::host_is_ip() const {
  if (host.find(':') != std::string::npos) return true;  // IPv6 (brackets were removed)
  if (host.empty()) return false;
  int dots = 0;
  for (const char c : host) {
    if (c == '.') {
      ++dots;
    } else if (!is_digit(c)) {
      return false;
    }
  }
  return dots == 3;
}

std::string Url::authority() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != default_port(scheme)) out += ":" + std::to_string(port);
  return out;
}

std::string Url::target() const {
  std::string out = path.empty() ? "/" : path;
  if (query) out += "?" + *query;
  return out;
}

std::string Url::str() const {
  return scheme + "://" + authority() + target();
}

std::string Url::with_userinfo() const {
  if (userinfo.empty()) return str();
  return scheme + "://" + userinfo + "@" + authority() + target();
}

std::string Url::redacted() const {
  return scheme + "://" + authority() + (path.empty() ? "/" : path);
}

std::optional<std::pair<std::string, std::string>> Url::credentials() const {
  if (userinfo.empty()) return std::nullopt;
  const auto colon = userinfo.find(':');
  auto user = percent_decode(std::string_view(userinfo).substr(0, colon));
  std::optional<std::string> password = std::string();
  if (colon != std::string::npos)
    password = percent_decode(std::string_view(userinfo).substr(colon + 1));
  if (!user || !password) return std::nullopt;
  return std::pair{std::move(*user), std::move(*password)};
}

bool Url::same_origin(const Url& other) const {
  return scheme == other.scheme && host == other.host && port == other.port;
}

Result<Url> parse_url(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return make_error(Errc::invalid, "URL contains a space or a control character");
    }
  }
  const auto parts = split_reference(text);
  if (!parts.scheme) {
    return make_error(Errc::invalid, "not an absolute URL (expected http:// or https://)");
  }
  Url url;
  url.scheme = to_lower(*parts.scheme);
  if (url.scheme != "http" && url.scheme != "https") {
    return make_error(Errc::invalid, "URL scheme '" + sanitize_for_log(url.scheme, 20) +
                                         "' is not supported (expected http or https)");
  }
  if (!parts.authority || parts.authority->empty()) {
    return make_error(Errc::invalid, "URL has no host");
  }
  std::string_view authority = *parts.authority;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    url.userinfo = std::string(authority.substr(0, at));
    authority.remove_prefix(at + 1);
  }
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return make_error(Errc::invalid, "URL has an unterminated IPv6 host");
    }
    url.host = to_lower(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !authority.starts_with(':')) {
      return make_error(Errc::invalid, "URL has text after its IPv6 host");
    }
    if (!authority.empty()) port_text = authority.substr(1);
    for (const char c : url.host) {
      if (!is_digit(c) && !(c >= 'a' && c <= 'f') && c != ':' && c != '.') {
        return make_error(Errc::invalid, "URL has an invalid IPv6 host");
      }
    }
  } else {
    const auto colon = authority.find(':');
    url.host = to_lower(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
    for (const char c : url.host) {
      if (!valid_host_char(c)) {
        return make_error(Errc::invalid,
                          "URL host '" + sanitize_for_log(url.host, 100) + "' is not valid");
      }
    }
  }
  if (url.host.empty()) return make_error(Errc::invalid, "URL has no host");
  url.port = default_port(url.scheme);
  if (!port_text.empty()) {
    const auto port = parse_u64(port_text);
    if (!port || *port == 0 || *port > 65535) {
      return make_error(Errc::invalid,
                        "URL port '" + sanitize_for_log(port_text, 20) + "' is not valid");
    }
    url.port = static_cast<std::uint16_t>(*port);
  }
  url.path = remove_dot_segments(parts.path);
  if (url.path.empty()) url.path = "/";
  if (parts.query) url.query = std::string(*parts.query);
  return url;
}

Result<Url> resolve_url(const Url& base, std::string_view reference) {
  for (const char c : reference) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return make_error(Errc::invalid, "URL contains a space or a control character");
    }
  }
  const auto parts = split_reference(reference);
  if (parts.scheme) return parse_url(reference);
  if (parts.authority) return parse_url(base.scheme + ":" + std::string(reference));
  Url url = base;
  if (parts.path.empty()) {
    if (parts.query) url.query = std::string(*parts.query);
    return url;
  }
  url.query.reset();
  if (parts.query) url.query = std::string(*parts.query);
  if (parts.path.starts_with('/')) {
    url.path = remove_dot_segments(parts.path);
  } else {
    const auto slash = base.path.rfind('/');
    const std::string merged =
        (slash == std::string::npos ? std::string("/") : base.path.substr(0, slash + 1)) +
        std::string(parts.path);
    url.path = remove_dot_segments(merged);
  }
  if (url.path.empty()) url.path = "/";
  return url;
}

}  // namespace wf
