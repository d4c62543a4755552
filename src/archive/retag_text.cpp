#include "archive/retag_text.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "archive/member_checks.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::archive::retag_text {

std::optional<std::string> normalize_label(std::string_view label) {
  if (label.starts_with('+')) label.remove_prefix(1);
  std::string out;
  out.reserve(label.size());
  for (const char c : label) {
    if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out += c;
    } else if (c == '.' || c == '-' || c == '_') {
      if (out.empty() || out.back() == '.') return std::nullopt;
      out += '.';
    } else {
      return std::nullopt;
    }
  }
  if (out.empty() || out.back() == '.') return std::nullopt;
  return out;
}

bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (lead < 0x80U) {
      ++i;
      continue;
    }
    if ((lead & 0xE0U) == 0xC0U) {
      extra = 1;
      cp = lead & 0x1FU;
    } else if ((lead & 0xF0U) == 0xE0U) {
      extra = 2;
      cp = lead & 0x0FU;
    } else if ((lead & 0xF8U) == 0xF0U) {
      extra = 3;
      cp = lead & 0x07U;
    } else {
      return false;
    }
    if (s.size() - i <= extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0U) != 0x80U) return false;
      cp = (cp << 6U) | (b & 0x3FU);
    }
    constexpr std::uint32_t kMinForLength[] = {0, 0x80U, 0x800U, 0x10000U};
    if (cp < kMinForLength[extra] || cp > 0x10FFFFU || (cp >= 0xD800U && cp <= 0xDFFFU)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

namespace {

// One header line of an RFC 822-style block (docs/formats.md, "RFC 822-style header blocks"):
// [start, end) without the line break, `next` after it.
struct Line {
  std::size_t start = 0;
  std::size_t end = 0;
  std::size_t next = 0;
};

Line line_at(std::string_view text, std::size_t pos) {
  const std::size_t nl = text.find('\n', pos);
  Line line{pos, nl == std::string_view::npos ? text.size() : nl,
            nl == std::string_view::npos ? text.size() : nl + 1};
  if (line.end > line.start && text[line.end - 1] == '\r') --line.end;
  return line;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// The field name of a header line, or empty for a continuation or malformed line.
std::string_view field_name(std::string_view line) {
  if (line.empty() || is_blank(line[0])) return {};
  const std::size_t colon = line.find(':');
  return colon == std::string_view::npos ? std::string_view{} : line.substr(0, colon);
}

}  // namespace

Result<std::string> rewrite_metadata_version(std::string_view metadata,
                                             std::string_view new_version,
                                             std::string_view member) {
  std::vector<std::pair<std::size_t, std::size_t>> values;
  std::size_t pos = 0;
  while (pos < metadata.size()) {
    Line line = line_at(metadata, pos);
    const std::string_view text = metadata.substr(line.start, line.end - line.start);
    if (text.empty()) break;  // the description follows
    if (iequals(field_name(text), "Version")) {
      std::size_t value_start = line.start + text.find(':') + 1;
      while (value_start < line.end && is_blank(metadata[value_start])) ++value_start;
      std::size_t value_end = line.end;
      while (line.next < metadata.size() && is_blank(metadata[line.next])) {
        line = line_at(metadata, line.next);
        value_end = line.end;
      }
      values.emplace_back(value_start, value_end);
    }
    pos = line.next;
  }
  if (values.size() != 1) {
    return invalid(std::string(member) + " has " + std::to_string(values.size()) +
                   " Version headers, expected 1");
  }
  std::string out(metadata.substr(0, values[0].first));
  out += new_version;
  out += metadata.substr(values[0].second);
  return out;
}

std::string rewrite_wheel_tags(std::string_view wheel, const std::vector<std::string>& tags) {
  std::set<std::string> have;
  std::size_t pos = 0;
  std::string eol = "\n";
  bool first_line = true;
  while (pos < wheel.size()) {
    const Line line = line_at(wheel, pos);
    if (first_line && line.next > line.end + 1) eol = "\r\n";
    first_line = false;
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Tag")) have.emplace(trim(text.substr(text.find(':') + 1)));
    pos = line.next;
  }
  if (have == std::set<std::string>(tags.begin(), tags.end())) return std::string(wheel);

  std::string out;
  bool tags_written = false;
  const auto write_tags = [&] {
    for (const auto& tag : tags) out.append("Tag: ").append(tag).append(eol);
    tags_written = true;
  };
  pos = 0;
  while (pos < wheel.size()) {
    const Line line = line_at(wheel, pos);
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Tag")) {
      if (!tags_written) write_tags();
    } else if (text.empty() && !tags_written) {
      write_tags();
      out += wheel.substr(line.start, line.next - line.start);
    } else {
      out += wheel.substr(line.start, line.next - line.start);
      if (line.next == line.end) out += eol;  // a last line without a line break
    }
    pos = line.next;
  }
  if (!tags_written) write_tags();
  return out;
}

std::string rewrite_wheel_build(std::string_view wheel, std::string_view build) {
  std::string eol = "\n";
  std::size_t after_tags = std::string_view::npos;  // where a new Build line goes
  bool has_build = false;
  for (std::size_t pos = 0; pos < wheel.size();) {
    const Line line = line_at(wheel, pos);
    if (pos == 0 && line.next > line.end + 1) eol = "\r\n";
    const std::string_view name = field_name(wheel.substr(line.start, line.end - line.start));
    if (iequals(name, "Build")) has_build = true;
    if (iequals(name, "Tag")) after_tags = line.next;
    pos = line.next;
  }
  const std::string build_line = "Build: " + std::string(build);
  std::string out;
  bool written = false;
  for (std::size_t pos = 0; pos < wheel.size();) {
    const Line line = line_at(wheel, pos);
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Build")) {
      if (!written) out += build_line + eol;
      written = true;
    } else if (!has_build && !written && text.empty()) {
      // No Tag line: before the blank line that ends the headers.
      out += build_line + eol;
      written = true;
      out += wheel.substr(line.start, line.next - line.start);
    } else {
      out += wheel.substr(line.start, line.next - line.start);
      if (line.next == line.end) out += eol;  // a last line without a line break
    }
    pos = line.next;
    if (!has_build && !written && pos == after_tags) {
      out += build_line + eol;
      written = true;
    }
  }
  if (!written) out += build_line + eol;
  return out;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

bool valid_build_tag(std::string_view tag) {
  if (tag.empty() || tag.front() < '0' || tag.front() > '9') return false;
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}

void check_platform_tags(const std::vector<std::string>& tags, Problems& problems) {
  if (tags.empty()) problems.add("the platform tag set is empty");
  std::set<std::string_view> seen;
  for (const auto& tag : tags) {
    const bool ok = !tag.empty() && std::all_of(tag.begin(), tag.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!ok) {
      problems.add("platform tag " + quote_name(tag) + " is not valid (letters, digits and '_')");
    } else if (!seen.insert(tag).second) {
      problems.add("platform tag " + quote_name(tag) + " is given twice");
    }
  }
}

std::string escaped_name(std::string_view name) {
  std::string out = core::normalize_name(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::vector<std::string> expanded_tags(const core::WheelTags& tags) {
  std::vector<std::string> out;
  for (const auto& py : tags.python_tags()) {
    for (const auto& abi : tags.abi_tags()) {
      for (const auto& plat : tags.platform_tags()) {
        std::string tag = py;
        tag.append("-").append(abi).append("-").append(plat);
        out.push_back(std::move(tag));
      }
    }
  }
  return out;
}

}  // namespace wf::archive::retag_text
