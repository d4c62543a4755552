#include "wheelforge/util/strings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <utility>

namespace wf {
namespace {

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr std::string_view kHexDigits = "0123456789abcdef";
constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// The UTF-8 sequence at s[i]: its code point and length, or a length of 0 when the bytes there
// are not UTF-8 (a stray continuation byte, a truncated or overlong sequence, a surrogate, a
// code point above U+10FFFF).
struct Utf8Char {
  std::uint32_t code = 0;
  std::size_t length = 0;
};

Utf8Char utf8_at(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  std::uint32_t code = 0;
  std::uint32_t lowest = 0;
  if ((lead & 0xE0U) == 0xC0U) {
    length = 2;
    code = lead & 0x1FU;
    lowest = 0x80;
  } else if ((lead & 0xF0U) == 0xE0U) {
    length = 3;
    code = lead & 0x0FU;
    lowest = 0x800;
  } else if ((lead & 0xF8U) == 0xF0U) {
    length = 4;
    code = lead & 0x07U;
    lowest = 0x10000;
  } else {
    return {};
  }
  if (i + length > s.size()) return {};
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0U) != 0x80U) return {};
    code = (code << 6U) | (byte(i + k) & 0x3FU);
  }
  if (code < lowest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {code, length};
}

bool is_control(std::uint32_t code) {
  return code < 0x20 || (code >= 0x7F && code <= 0x9F);
}

}  // namespace

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower(c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string hex_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) {
    const auto u = static_cast<unsigned char>(b);
    out.push_back(kHexDigits[u >> 4U]);
    out.push_back(kHexDigits[u & 0x0FU]);
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]);
    const int lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return out;
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::optional<std::string> percent_decode(std::string_view s) {
  if (s.find('%') == std::string_view::npos) return std::string(s);  // the common case
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex_value(s[i + 1]);
    const int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const char c = static_cast<char>((hi << 4) | lo);
    if (c == '\0') return std::nullopt;
    out.push_back(c);
    i += 2;
  }
  return out;
}

std::string percent_encode_path(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (is_unreserved(u) || c == '/') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(static_cast<char>(std::toupper(kHexDigits[u >> 4U])));
      out.push_back(static_cast<char>(std::toupper(kHexDigits[u & 0x0FU])));
    }
  }
  return out;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

namespace {

// Tokens are "wf_" and 43 URL-safe base64 characters (auth::generate_token). A run of at least
// this many of them after the prefix is taken for a token, also when cut short.
constexpr std::string_view kTokenPrefix = "wf_";
constexpr std::size_t kMinTokenTail = 32;

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

/// A secret that starts at `s[i]`: where it ends, and how many of its first characters (its
/// name or prefix) are kept before "[redacted]".
struct Secret {
  std::size_t end;
  std::size_t keep;
};

std::optional<Secret> secret_at(std::string_view s, std::size_t i) {
  const char c = s[i];
  if (c == 'w' && s.substr(i, kTokenPrefix.size()) == kTokenPrefix) {
    std::size_t end = i + kTokenPrefix.size();
    while (end < s.size() && is_token_char(s[end])) ++end;
    if (end - i - kTokenPrefix.size() >= kMinTokenTail) return Secret{end, kTokenPrefix.size()};
  } else if ((c == 't' || c == 'T') && starts_with_icase(s.substr(i), "token=")) {
    // A query (or form) value named token, or ending in it (access_token=...).
    std::size_t end = i + 6;
    while (end < s.size() && s[end] != '&' && s[end] != ';' && s[end] != '#' && s[end] != ' ') {
      ++end;
    }
    if (end > i + 6) return Secret{end, 6};
  }
  return std::nullopt;
}

}  // namespace

void append_for_log(std::string& out, std::string_view s, std::size_t max_len) {
  // The cap counts what is written, and a secret is recognised over the whole input, so that
  // cutting never leaves part of one behind.
  const std::size_t limit = out.size() + max_len;
  std::size_t i = 0;
  bool cut = false;
  while (i < s.size() && !cut) {
    const std::size_t room = limit - out.size();
    if (const auto secret = secret_at(s, i)) {
      std::string shown(s.substr(i, secret->keep));
      shown += "[redacted]";
      cut = shown.size() > room;
      out.append(shown, 0, room);
      i = secret->end;
      continue;
    }
    cut = room == 0;
    if (cut) break;
    const auto u = static_cast<unsigned char>(s[i]);
    out.push_back(u < 0x20 || u >= 0x7F ? '?' : s[i]);
    ++i;
  }
  if (cut || i < s.size()) out += "...";
}

std::string sanitize_for_log(std::string_view s, std::size_t max_len) {
  std::string out;
  append_for_log(out, s, max_len);
  return out;
}

Status check_free_text(std::string_view field, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    const Utf8Char c = utf8_at(value, i);
    if (c.length == 0) {
      return make_error(Errc::invalid, std::string(field) + " is not UTF-8 text (byte " +
                                           std::to_string(i + 1) + ")");
    }
    if (is_control(c.code)) {
      std::string shown;
      if (c.code == '\n') {
        shown = "a line feed";
      } else if (c.code == '\r') {
        shown = "a carriage return";
      } else if (c.code == '\t') {
        shown = "a tab";
      } else {
        shown = "the control character U+00";
        shown.push_back(kHexDigits[c.code >> 4U]);
        shown.push_back(kHexDigits[c.code & 15U]);
      }
      return make_error(Errc::invalid, std::string(field) +
                                           " must not contain control characters (" + shown +
                                           " at byte " + std::to_string(i + 1) + ")");
    }
    i += c.length;
  }
  return ok_status();
}

std::string escape_control(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [&](std::string_view prefix, unsigned value) {
    out += prefix;
    if (prefix == "\\u") out += "00";
    out.push_back(kHexDigits[(value >> 4U) & 15U]);
    out.push_back(kHexDigits[value & 15U]);
  };
  for (std::size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_at(s, i);
    if (c.length == 0) {
      hex("\\x", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (c.code == '\t') {
      out += "\\t";
    } else if (c.code == '\n') {
      out += "\\n";
    } else if (c.code == '\r') {
      out += "\\r";
    } else if (c.code < 0x80 && is_control(c.code)) {
      hex("\\x", c.code);
    } else if (is_control(c.code)) {
      hex("\\u", c.code);
    } else {
      out.append(s.substr(i, c.length));
    }
    i += c.length;
  }
  return out;
}

void append_decimal(std::string& out, std::uint64_t value, std::size_t min_width) {
  std::array<char, 20> digits{};
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  (void)ec;  // 20 digits hold every uint64
  const auto n = static_cast<std::size_t>(end - digits.data());
  if (n < min_width) out.append(min_width - n, '0');
  out.append(digits.data(), end);
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16U) |
                   (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8U) |
                   static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kBase64[(n >> 18U) & 63U]);
    out.push_back(kBase64[(n >> 12U) & 63U]);
    out.push_back(kBase64[(n >> 6U) & 63U]);
    out.push_back(kBase64[n & 63U]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16U;
    if (rest == 2) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8U;
    out.push_back(kBase64[(n >> 18U) & 63U]);
    out.push_back(kBase64[(n >> 12U) & 63U]);
    out.push_back(rest == 2 ? kBase64[(n >> 6U) & 63U] : '=');
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view s) {
  std::array<int, 256> table{};
  table.fill(-1);
  for (std::size_t i = 0; i < kBase64.size(); ++i) {
    table[static_cast<unsigned char>(kBase64[i])] = static_cast<int>(i);
  }
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : s) {
    const int v = table[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6U) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> static_cast<unsigned>(bits)) & 0xFFU));
    }
  }
  return out;
}

std::string base64url_nopad_encode(std::string_view bytes) {
  std::string out = base64_encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (auto& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

}  // namespace wf
