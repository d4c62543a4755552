// The values of settings as text (app/app.hpp): sizes, durations, booleans, listen addresses,
// blob store URLs, and TOML's quoting of a string.

#include <array>
#include <cstdint>
#include <cstdio>

#include "setting_values.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

using std::chrono::seconds;

std::optional<BlobStoreUrl> parse_blob_store_url(std::string_view text) {
  constexpr std::string_view kScheme = "s3://";
  if (!text.starts_with(kScheme)) return std::nullopt;
  text.remove_prefix(kScheme.size());
  const auto slash = text.find('/');
  BlobStoreUrl out;
  out.bucket = std::string(text.substr(0, slash));
  if (slash != std::string_view::npos) out.prefix = std::string(text.substr(slash + 1));
  while (out.prefix.ends_with('/')) out.prefix.pop_back();
  // S3 bucket names: 3 to 63 of lower-case letters, digits, '.' and '-'.
  if (out.bucket.size() < 3 || out.bucket.size() > 63) return std::nullopt;
  for (const char c : out.bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return std::nullopt;
    }
  }
  for (const char c : out.prefix) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '\\') return std::nullopt;
  }
  if (out.prefix.starts_with('/') || out.prefix.find("//") != std::string::npos) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  // K, M, G and T are binary: 2^10, 2^20, 2^30, 2^40.
  std::uint64_t multiplier = 1;
  switch (text.back()) {
    case 'K':
    case 'k':
      multiplier = 1ULL << 10U;
      break;
    case 'M':
    case 'm':
      multiplier = 1ULL << 20U;
      break;
    case 'G':
    case 'g':
      multiplier = 1ULL << 30U;
      break;
    case 'T':
    case 't':
      multiplier = 1ULL << 40U;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  const auto n = parse_u64(text);
  if (!n || *n > UINT64_MAX / multiplier) return std::nullopt;
  return *n * multiplier;
}

std::optional<seconds> parse_duration(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (const auto n = parse_u64(text)) {
    if (*n > static_cast<std::uint64_t>(INT32_MAX)) return std::nullopt;
    return seconds{static_cast<seconds::rep>(*n)};
  }
  // A sequence of NUMBER UNIT parts, largest unit first as in "1h30m" or "2m30s".
  std::uint64_t total = 0;
  std::uint64_t last_unit = UINT64_MAX;
  while (!text.empty()) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits == text.size()) return std::nullopt;
    const auto n = parse_u64(text.substr(0, digits));
    std::uint64_t unit = 0;
    switch (text[digits]) {
      case 'h':
        unit = 3600;
        break;
      case 'm':
        unit = 60;
        break;
      case 's':
        unit = 1;
        break;
      default:
        return std::nullopt;
    }
    if (!n || unit >= last_unit || *n > static_cast<std::uint64_t>(INT32_MAX) / unit) {
      return std::nullopt;
    }
    last_unit = unit;
    total += *n * unit;
    if (total > static_cast<std::uint64_t>(INT32_MAX)) return std::nullopt;
    text.remove_prefix(digits + 1);
  }
  return seconds{static_cast<seconds::rep>(total)};
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = to_lower(trim(text));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return std::nullopt;
}

Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return make_error(Errc::invalid,
                      "listen: expected HOST:PORT, got '" + sanitize_for_log(text) + "'");
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port = parse_u64(text.substr(colon + 1));
  if (!port || *port > 65535) {
    return make_error(Errc::invalid, "listen: invalid port in '" + sanitize_for_log(text) + "'");
  }
  return std::pair{host, static_cast<std::uint16_t>(*port)};
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\u%04X", static_cast<unsigned>(u));
      out += buf.data();
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

namespace detail {

std::string format_size(std::uint64_t bytes) {
  for (const auto& [unit, suffix] :
       {std::pair{kTiB, 'T'}, std::pair{kGiB, 'G'}, std::pair{kMiB, 'M'}, std::pair{kKiB, 'K'}}) {
    if (bytes >= unit && bytes % unit == 0)
      return toml_quote(std::to_string(bytes / unit) + suffix);
  }
  return toml_quote(std::to_string(bytes));
}

std::string format_duration(seconds d) {
  const auto n = d.count();
  if (n != 0 && n % 3600 == 0) return toml_quote(std::to_string(n / 3600) + "h");
  if (n != 0 && n % 60 == 0) return toml_quote(std::to_string(n / 60) + "m");
  return toml_quote(std::to_string(n) + "s");
}

std::string quoted(std::string_view value) {
  return "'" + sanitize_for_log(value) + "'";
}

std::optional<std::string> apply_count(std::size_t& field, std::string_view text, std::uint64_t min,
                                       std::uint64_t max) {
  const auto n = parse_u64(trim(text));
  if (!n || *n < min || *n > max) {
    return "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
           ", got " + quoted(text);
  }
  field = static_cast<std::size_t>(*n);
  return std::nullopt;
}

/// A byte count ("1048576", "64K", "8G") of at least `min`; `expected` names the form in the
/// error message.
std::optional<std::string> apply_size(std::uint64_t& field, std::string_view text,
                                      std::uint64_t min, std::string_view expected) {
  const auto n = parse_size(text);
  if (!n || *n < min) return "expected " + std::string(expected) + ", got " + quoted(text);
  field = *n;
  return std::nullopt;
}

std::optional<std::string> apply_bool(bool& field, std::string_view text) {
  const auto b = parse_bool(text);
  if (!b) return "expected true or false, got " + quoted(text);
  field = *b;
  return std::nullopt;
}

std::optional<std::string> apply_duration(seconds& field, std::string_view text, seconds min,
                                          seconds max) {
  const auto d = parse_duration(text);
  if (!d) return "expected a duration such as 30s, 2m or 1h, got " + quoted(text);
  if (*d < min || *d > max) {
    return "expected a duration from " + std::to_string(min.count()) + "s to " +
           std::to_string(max.count()) + "s, got " + quoted(text);
  }
  field = *d;
  return std::nullopt;
}

}  // namespace detail

}  // namespace wf::app
