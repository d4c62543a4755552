#include "store/s3_xml.hpp"

#include <cstdint>
#include <ctime>

#include "wheelforge/util/strings.hpp"

namespace wf::store::xml {

namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The code point of "#65" or "#x41"; nullopt when malformed or not a character.
std::optional<std::uint32_t> char_ref(std::string_view ref) {
  if (ref.size() < 2 || ref[0] != '#') return std::nullopt;
  const bool hex = ref[1] == 'x' || ref[1] == 'X';
  const std::string_view digits = ref.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  std::uint32_t cp = 0;
  for (const char c : digits) {
    std::uint32_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<std::uint32_t>(c - '0');
    } else if (hex && c >= 'a' && c <= 'f') {
      d = static_cast<std::uint32_t>(c - 'a' + 10);
    } else if (hex && c >= 'A' && c <= 'F') {
      d = static_cast<std::uint32_t>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    cp = cp * (hex ? 16 : 10) + d;
  }
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return cp;
}

}  // namespace

std::vector<std::string_view> elements(std::string_view doc, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  std::size_t pos = 0;
  while ((pos = doc.find(open, pos)) != std::string_view::npos) {
    const std::size_t after = pos + open.size();
    if (after >= doc.size()) break;
    if (doc.compare(after, 2, "/>") == 0) {
      out.emplace_back();
      pos = after + 2;
      continue;
    }
    if (doc[after] != '>') {  // another element whose name starts with `tag`
      pos = after;
      continue;
    }
    const std::size_t end = doc.find(close, after + 1);
    if (end == std::string_view::npos) break;
    out.push_back(doc.substr(after + 1, end - after - 1));
    pos = end + close.size();
  }
  return out;
}

std::optional<std::string> text(std::string_view doc, std::string_view tag) {
  const auto found = elements(doc, tag);
  if (found.empty()) return std::nullopt;
  return unescape(found.front());
}

std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const std::size_t semi = s.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += s[i];
      continue;
    }
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (const auto cp = char_ref(name)) {
      append_utf8(out, *cp);
    } else {
      out += s[i];
      continue;
    }
    i = semi;
  }
  return out;
}

std::string escape(std::string_view s) {
  return html_escape(s);  // its character references are XML's too
}

std::time_t parse_time(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (end == nullptr) {
    tm = {};
    end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  }
  if (end == nullptr) return 0;
  return timegm(&tm);
}

}  // namespace wf::store::xml
