#include "wheelforge/http/client_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "framing.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

constexpr std::size_t kMaxAddressText = 64;

/// RFC 7230 tchar.
bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

/// A port after a node's ':' : digits (1 to 5) or an obfuscated port ("_" and letters,
/// digits, '.', '_', '-').
bool is_node_port(std::string_view p) {
  if (p.empty()) return false;
  if (p.front() == '_') {
    return std::all_of(p.begin() + 1, p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    });
  }
  return p.size() <= 5 &&
         std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// A node as the headers write it ("192.0.2.7", "192.0.2.7:4711", "[2001:db8::1]",
/// "[2001:db8::1]:4711", "2001:db8::1", "unknown", "_hidden") without its port and brackets;
/// nothing when it has a bracket or port that does not parse.
std::optional<std::string_view> bare_node(std::string_view node) {
  if (node.starts_with('[')) {
    const auto close = node.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const auto rest = node.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && is_node_port(rest.substr(1))))
      return std::nullopt;
    return node.substr(1, close - 1);
  }
  const auto colon = node.find(':');
  // One colon: IPv4 (or a name) with a port; more: a bare IPv6 address.
  if (colon != std::string_view::npos && node.find(':', colon + 1) == std::string_view::npos) {
    if (!is_node_port(node.substr(colon + 1))) return std::nullopt;
    return node.substr(0, colon);
  }
  return node;
}

/// Reads a quoted-string at the start of `s` (past its opening quote), unescaping it into
/// `out`; advances `s` past the closing quote. False when it does not end.
bool read_quoted(std::string_view& s, std::string& out) {
  s.remove_prefix(1);
  while (!s.empty()) {
    const char c = s.front();
    s.remove_prefix(1);
    if (c == '"') return true;
    if (c == '\\') {
      if (s.empty()) return false;
      out.push_back(s.front());
      s.remove_prefix(1);
      continue;
    }
    out.push_back(c);
  }
  return false;
}

}  // namespace

std::optional<IpBytes> parse_ip(std::string_view text) {
  if (text.empty() || text.size() >= kMaxAddressText) return std::nullopt;
  char buf[kMaxAddressText];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpBytes out{};
  if (text.find(':') == std::string_view::npos) {
    std::array<unsigned char, 4> v4{};
    if (::inet_pton(AF_INET, buf, v4.data()) != 1) return std::nullopt;
    out[10] = 0xff;
    out[11] = 0xff;
    std::copy(v4.begin(), v4.end(), out.begin() + 12);
    return out;
  }
  if (::inet_pton(AF_INET6, buf, out.data()) != 1) return std::nullopt;
  return out;
}

bool is_ipv4(const IpBytes& ip) {
  return std::all_of(ip.begin(), ip.begin() + 10, [](unsigned char b) { return b == 0; }) &&
         ip[10] == 0xff && ip[11] == 0xff;
}

std::string ip_to_string(const IpBytes& ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_ipv4(ip)) {
    ::inet_ntop(AF_INET, ip.data() + 12, buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, ip.data(), buf, sizeof buf);
  }
  return buf;
}

bool IpRange::contains(const IpBytes& ip) const {
  const unsigned whole = bits / 8;
  if (!std::equal(base.begin(), base.begin() + whole, ip.begin())) return false;
  const unsigned rest = bits % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<unsigned char>(0xffU << (8 - rest));
  return (base[whole] & mask) == (ip[whole] & mask);
}

Result<IpRange> parse_ip_range(std::string_view text) {
  const std::string_view t = trim_ows(text);
  const auto bad = [&](std::string_view why) {
    return make_error(Errc::invalid, "'" + sanitize_for_log(t) + "' " + std::string(why));
  };
  const auto slash = t.find('/');
  const auto ip = parse_ip(t.substr(0, slash));
  if (!ip) return bad("is not an IPv4 or IPv6 address or range (such as 10.0.0.0/8 or fd00::/8)");
  IpRange r{*ip, 128, std::string(t)};
  if (slash != std::string_view::npos) {
    const unsigned max = is_ipv4(*ip) ? 32U : 128U;
    const auto n = parse_u64(t.substr(slash + 1));
    if (!n || *n > max) {
      return bad("has a bad prefix length: expected 0 to " + std::to_string(max));
    }
    r.bits = static_cast<unsigned>(*n) + (is_ipv4(*ip) ? 96U : 0U);
  }
  IpBytes masked{};
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned keep = r.bits >= (i + 1) * 8 ? 8 : (r.bits > i * 8 ? r.bits - i * 8 : 0);
    masked[i] = static_cast<unsigned char>(r.base[i] & (0xffU << (8 - keep)));
  }
  if (masked != r.base) return bad("has address bits set beyond its prefix length");
  return r;
}

bool TrustedProxies::trusts(const IpBytes& ip) const {
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const IpRange& r) { return r.contains(ip); });
}

Result<TrustedProxies> parse_trusted_proxies(std::string_view text) {
  TrustedProxies out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = text.find_first_of(", \t\n", at);
    const auto item = text.substr(at, end == std::string_view::npos ? text.npos : end - at);
    if (!item.empty()) {
      auto r = parse_ip_range(item);
      if (!r) return r.error();
      out.ranges.push_back(std::move(*r));
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return out;
}

std::optional<std::vector<std::string>> forwarded_for_nodes(std::string_view value) {
  std::vector<std::string> nodes;
  std::string_view s = value;
  // 1#forwarded-element: elements separated by commas; pairs within one by ';'.
  while (true) {
    std::optional<std::string> node;
    while (true) {
      s = trim_ows(s);
      std::size_t name_end = 0;
      while (name_end < s.size() && is_tchar(s[name_end])) ++name_end;
      if (name_end == 0 || name_end == s.size() || s[name_end] != '=') return std::nullopt;
      const std::string_view name = s.substr(0, name_end);
      s.remove_prefix(name_end + 1);
      std::string v;
      if (!s.empty() && s.front() == '"') {
        if (!read_quoted(s, v)) return std::nullopt;
      } else {
        std::size_t end = 0;
        // Lenient: '[' ']' ':' unquoted, as some proxies write IPv6 nodes.
        while (end < s.size() &&
               (is_tchar(s[end]) || s[end] == ':' || s[end] == '[' || s[end] == ']')) {
          ++end;
        }
        if (end == 0) return std::nullopt;
        v = std::string(s.substr(0, end));
        s.remove_prefix(end);
      }
      if (name.size() == 3 && std::equal(name.begin(), name.end(), "for", [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == b;
          })) {
        if (node) return std::nullopt;  // two for= in one element
        node = std::move(v);
      }
      s = trim_ows(s);
      if (s.empty() || s.front() == ',') break;
      if (s.front() != ';') return std::nullopt;
      s.remove_prefix(1);
    }
    if (!node) return std::nullopt;
    const auto bare = bare_node(*node);
    if (!bare) return std::nullopt;
    nodes.emplace_back(*bare);
    if (s.empty()) break;
    s.remove_prefix(1);  // ','
  }
  return nodes;
}

ClientAddress client_address(const IpBytes& peer, const TrustedProxies& trusted,
                             ForwardedHeader which, const std::vector<std::string_view>& values) {
  if (values.empty() || !trusted.trusts(peer)) return {peer, ClientSource::peer};
  const ClientAddress fallback{peer, ClientSource::malformed};
  std::vector<std::string> nodes;
  for (const std::string_view line : values) {
    if (which == ForwardedHeader::forwarded) {
      auto more = forwarded_for_nodes(line);
      if (!more) return fallback;
      for (auto& n : *more) nodes.push_back(std::move(n));
      continue;
    }
    std::size_t at = 0;
    while (true) {
      const auto comma = line.find(',', at);
      const auto item = trim_ows(line.substr(at, comma == line.npos ? line.npos : comma - at));
      const auto bare = bare_node(item);
      if (!bare) return fallback;
      nodes.emplace_back(*bare);
      if (comma == line.npos) break;
      at = comma + 1;
    }
  }
  std::optional<IpBytes> leftmost;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const auto ip = parse_ip(*it);
    if (!ip) return fallback;
    if (!trusted.trusts(*ip)) return {*ip, ClientSource::forwarded};
    leftmost = ip;
  }
  if (!leftmost) return fallback;
  return {*leftmost, ClientSource::forwarded};
}

}  // namespace wf::http
