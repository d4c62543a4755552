#include "wheelforge/core/upstream.hpp"

#include <algorithm>
#include <ctime>

#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::core {
namespace {

bool is_header_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

/// The attributes of one tag, from just after its name to its '>'; `pos` ends after the '>'.
struct Attribute {
  std::string name;  ///< lower-case
  std::string value;
  bool has_value = false;
};

/// `closed` tells whether the tag ended in '>' (an unterminated tag at the end of the page is not
/// read as one).
std::vector<Attribute> read_attributes(std::string_view body, std::size_t& pos, bool& closed) {
  std::vector<Attribute> attrs;
  closed = false;
  const std::size_t n = body.size();
  while (pos < n) {
    while (pos < n && (is_header_space(body[pos]) || body[pos] == '/')) ++pos;
    if (pos >= n) break;
    if (body[pos] == '>') {
      ++pos;
      closed = true;
      break;
    }
    Attribute a;
    while (pos < n && !is_header_space(body[pos]) && body[pos] != '=' && body[pos] != '>' &&
           body[pos] != '/') {
      a.name += ascii_lower(body[pos]);
      ++pos;
    }
    if (a.name.empty()) {
      ++pos;  // a stray character such as '"': skipped, the parser always moves on
      continue;
    }
    while (pos < n && is_header_space(body[pos])) ++pos;
    if (pos < n && body[pos] == '=') {
      ++pos;
      while (pos < n && is_header_space(body[pos])) ++pos;
      a.has_value = true;
      if (pos < n && (body[pos] == '"' || body[pos] == '\'')) {
        const char quote = body[pos++];
        const auto close = body.find(quote, pos);
        const std::size_t end = close == std::string_view::npos ? n : close;
        a.value = decode_html_entities(body.substr(pos, end - pos));
        pos = end == n ? n : end + 1;
      } else {
        const std::size_t start = pos;
        while (pos < n && !is_header_space(body[pos]) && body[pos] != '>') ++pos;
        a.value = decode_html_entities(body.substr(start, pos - start));
      }
    }
    attrs.push_back(std::move(a));
  }
  return attrs;
}

const Attribute* find_attr(const std::vector<Attribute>& attrs, std::string_view name) {
  for (const auto& a : attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

/// "sha256=<hex>" (a fragment or a metadata attribute's value): the hex, lower-cased, or "".
std::string sha256_of(std::string_view text) {
  text = trim(text);
  if (!starts_with_icase(text, "sha256=")) return {};
  std::string hex = to_lower(text.substr(7));
  return is_sha256_hex(hex) ? hex : std::string{};
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0U | (cp >> 6U));
    out += static_cast<char>(0x80U | (cp & 0x3FU));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0U | (cp >> 12U));
    out += static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU));
    out += static_cast<char>(0x80U | (cp & 0x3FU));
  } else {
    out += static_cast<char>(0xF0U | (cp >> 18U));
    out += static_cast<char>(0x80U | ((cp >> 12U) & 0x3FU));
    out += static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU));
    out += static_cast<char>(0x80U | (cp & 0x3FU));
  }
}

}  // namespace

bool serves_every_name(const std::vector<UpstreamConfig>& upstreams) {
  return std::any_of(upstreams.begin(), upstreams.end(),
                     [](const UpstreamConfig& u) { return u.all_projects; });
}

bool may_serve(const UpstreamConfig& upstream, std::string_view project, bool local) {
  const auto listed = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), project) != names.end();
  };
  if (local) return listed(upstream.serve_local);
  return upstream.all_projects || listed(upstream.projects);
}

std::string decode_html_entities(std::string_view text) {
  if (text.find('&') == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '&') {
      out += text[i++];
      continue;
    }
    // A reference is at most a few characters long; look no further than that for its ';'.
    const auto semi = text.substr(i, 12).find(';');
    if (semi == std::string_view::npos) {
      out += text[i++];
      continue;
    }
    const std::string_view ref = text.substr(i + 1, semi - 1);
    bool decoded = true;
    if (ref == "amp") {
      out += '&';
    } else if (ref == "lt") {
      out += '<';
    } else if (ref == "gt") {
      out += '>';
    } else if (ref == "quot") {
      out += '"';
    } else if (ref == "apos") {
      out += '\'';
    } else if (ref == "nbsp") {
      append_utf8(out, 0xA0);
    } else if (ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x' || ref[1] == 'X';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      std::uint32_t cp = 0;
      decoded = !digits.empty() && digits.size() <= 8;
      for (const char c : digits) {
        if (!decoded) break;
        std::uint32_t d = 0;
        if (c >= '0' && c <= '9') {
          d = static_cast<std::uint32_t>(c - '0');
        } else if (hex && ascii_lower(c) >= 'a' && ascii_lower(c) <= 'f') {
          d = static_cast<std::uint32_t>(ascii_lower(c) - 'a' + 10);
        } else {
          decoded = false;
        }
        cp = cp * (hex ? 16U : 10U) + d;
      }
      if (decoded) append_utf8(out, cp);
    } else {
      decoded = false;
    }
    if (decoded) {
      i += semi + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::optional<std::string> resolve_link(const std::optional<Url>& base, std::string_view ref) {
  if (!base) return std::nullopt;
  auto url = resolve_url(*base, trim(ref));
  if (!url) return std::nullopt;
  return url->with_userinfo();
}

std::optional<std::string> url_filename(std::string_view url) {
  if (const auto q = url.find_first_of("?#"); q != std::string_view::npos) url = url.substr(0, q);
  const auto slash = url.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? url : url.substr(slash + 1);
  auto name = percent_decode(last);
  if (!name || name->empty() || *name == "." || *name == "..") return std::nullopt;
  for (const char c : *name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\' || u < 0x20 || u == 0x7f) return std::nullopt;
  }
  return name;
}

Result<UpstreamPage> parse_upstream_html(std::string_view body, std::string_view page_url) {
  if (body.size() > kMaxUpstreamPageBytes) {
    return make_error(Errc::invalid, "upstream page of " + std::to_string(body.size()) +
                                         " bytes is larger than the limit of " +
                                         std::to_string(kMaxUpstreamPageBytes));
  }
  UpstreamPage page;
  std::optional<Url> base;
  if (auto parsed = parse_url(page_url); parsed) base = std::move(*parsed);
  std::size_t pos = 0;
  const std::size_t n = body.size();
  while (pos < n) {
    const auto lt = body.find('<', pos);
    if (lt == std::string_view::npos) break;
    pos = lt + 1;
    if (body.substr(pos, 3) == "!--") {
      const auto end = body.find("-->", pos + 3);
      pos = end == std::string_view::npos ? n : end + 3;
      continue;
    }
    std::string tag;
    while (pos < n && tag.size() < 8 && !is_header_space(body[pos]) && body[pos] != '>' &&
           body[pos] != '/') {
      tag += ascii_lower(body[pos]);
      ++pos;
    }
    if (tag != "a" && tag != "base") {
      // Any other tag (or a closing one): skip to its end without reading its attributes.
      const auto gt = body.find('>', pos);
      pos = gt == std::string_view::npos ? n : gt + 1;
      continue;
    }
    bool closed = false;
    const auto attrs = read_attributes(body, pos, closed);
    const Attribute* href = find_attr(attrs, "href");
    if (href == nullptr || !closed) continue;
    if (tag == "base") {
      // Only an absolute <base href> counts (docs/packaging.md, "Simple API: HTML").
      if (auto b = parse_url(trim(href->value)); b) base = std::move(*b);
      continue;
    }
    UpstreamFile file;
    const auto hash = href->value.find('#');
    if (hash != std::string::npos) {
      file.sha256 = sha256_of(std::string_view(href->value).substr(hash + 1));
    }
    auto url = resolve_link(base, href->value);
    if (!url) continue;
    auto filename = url_filename(*url);
    if (!filename) continue;
    if (file.sha256.empty()) {
      ++page.dropped_without_hash;
      continue;
    }
    if (page.files.size() == kMaxUpstreamFiles) {
      return make_error(Errc::invalid, "upstream page lists more than " +
                                           std::to_string(kMaxUpstreamFiles) + " files");
    }
    file.url = std::move(*url);
    file.filename = std::move(*filename);
    if (const auto* rp = find_attr(attrs, "data-requires-python"); rp && rp->has_value) {
      file.requires_python = rp->value;
    }
    if (const auto* y = find_attr(attrs, "data-yanked")) file.yanked = y->value;
    for (const std::string_view name : {"data-core-metadata", "data-dist-info-metadata"}) {
      if (const auto* m = find_attr(attrs, name); m && file.metadata_sha256.empty()) {
        file.metadata_sha256 = sha256_of(m->value);
      }
    }
    page.files.push_back(std::move(file));
  }
  return page;
}

bool in_cooldown(const UpstreamFile& file, std::optional<std::uint32_t> days, Micros now) {
  if (!days || *days == 0) return false;
  if (!file.upload_time) return true;
  const Micros cooldown = static_cast<Micros>(*days) * 86'400 * 1'000'000;
  return now - *file.upload_time < cooldown;
}

std::optional<Micros> parse_upload_time(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS
  const auto number = [&](std::size_t at, std::size_t len) -> std::optional<int> {
    if (at + len > text.size()) return std::nullopt;
    int v = 0;
    for (std::size_t i = at; i < at + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  const auto year = number(0, 4);
  const auto month = number(5, 2);
  const auto day = number(8, 2);
  const auto hour = number(11, 2);
  const auto minute = number(14, 2);
  const auto second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  Micros frac = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 6) frac = frac * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (std::size_t d = digits; d < 6; ++d) frac *= 10;
  }
  const std::string_view zone = text.substr(pos);
  if (zone != "Z" && zone != "z" && zone != "+00:00") return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const std::time_t secs = timegm(&tm);
  return static_cast<Micros>(secs) * 1'000'000 + frac;
}

}  // namespace wf::core
