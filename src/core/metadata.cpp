#include "wheelforge/core/metadata.hpp"

#include <cstdint>

#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

// Offset of the first byte that breaks strict UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF), or nullopt when every byte is fine.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    // The valid range of the second byte narrows for E0, ED, F0 and F4 (docs/formats.md,
    // "UTF-8").
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      length = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      length = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + length > bytes.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      const unsigned char min = k == 1 ? lo : 0x80;
      const unsigned char max = k == 1 ? hi : 0xBF;
      if (b < min || b > max) return i;
    }
    i += length;
  }
  return std::nullopt;
}

struct Field {
  std::string name;
  std::string value;
  std::vector<std::string_view> continuation;  ///< continuation lines, untrimmed
};

// Python's email parser (which pip and the packaging tools use) accepts these bytes in a
// field name: printable ASCII except ':' (docs/packaging.md, "Core metadata").
bool is_field_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7E) return false;
  }
  return true;
}

// The header block: fields up to the first empty line. Like Python's email parser, a line
// that is neither a field nor a continuation also ends the block (it starts the body), and a
// continuation before the first field is dropped. Continuation lines join the value with '\n'.
std::vector<Field> parse_header_block(std::string_view bytes, std::size_t* body = nullptr) {
  std::vector<Field> fields;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    // Python's email parser (what pip reads METADATA with) ends a line at CRLF, a lone CR or
    // LF; so must we, or a CR inside a line would hide fields that pip sees (docs/packaging.md,
    // "Core metadata").
    const std::size_t eol = bytes.find_first_of("\r\n", pos);
    const std::size_t end = eol == std::string_view::npos ? bytes.size() : eol;
    const std::string_view line = bytes.substr(pos, end - pos);
    pos = end;
    if (pos < bytes.size()) {
      pos += bytes.substr(pos, 2) == "\r\n" ? std::size_t{2} : std::size_t{1};
    }
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      if (!fields.empty()) {
        fields.back().value += '\n';
        fields.back().value += trim(line);
        fields.back().continuation.push_back(line);
      }
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_field_name(line.substr(0, colon))) {
      pos = end - line.size();  // the body starts with this line
      break;
    }
    fields.push_back(
        Field{std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)), {}});
  }
  for (auto& field : fields) field.value = std::string(trim(field.value));
  if (body != nullptr) *body = pos;
  return fields;
}

// The Description field with its folding undone: each continuation line loses up to 8 spaces
// of indentation and then one '|' (setuptools' way of keeping blank and indented lines).
std::string unfold_description(const Field& field) {
  std::string out(trim(field.value.substr(0, field.value.find('\n'))));
  for (std::string_view line : field.continuation) {
    std::size_t cut = 0;
    while (cut < line.size() && cut < 8 && (line[cut] == ' ' || line[cut] == '\t')) ++cut;
    line.remove_prefix(cut);
    if (line.starts_with('|')) line.remove_prefix(1);
    out += '\n';
    out += line;
  }
  return out;
}

std::string not_utf8_message(std::string_view what, std::size_t offset) {
  return std::string(what) + " is not valid UTF-8 (first bad byte at offset " +
         std::to_string(offset) + ")";
}

// The value of a field that may appear at most once. Two different values would let tools
// that read the first and tools that read the last disagree, so a repeat is a problem.
std::optional<std::string> single_field(const std::vector<Field>& fields, std::string_view name,
                                        Problems& problems) {
  std::optional<std::string> value;
  std::size_t count = 0;
  for (const auto& field : fields) {
    if (!iequals(field.name, name)) continue;
    if (++count == 1) value = field.value;
  }
  if (count > 1) {
    problems.add("field " + std::string(name) + " appears " + std::to_string(count) +
                 " times, at most once is allowed");
  }
  return value;
}

std::string required_field(const std::vector<Field>& fields, std::string_view name,
                           Problems& problems) {
  auto value = single_field(fields, name, problems);
  if (!value) {
    problems.add("required field " + std::string(name) + " is missing");
    return {};
  }
  if (value->empty()) problems.add("required field " + std::string(name) + " is empty");
  return std::move(*value);
}

// Metadata versions this parser understands: 1.0, 1.1, 1.2 and every 2.x. The specification
// says a tool must refuse a major version it does not know and may read a newer minor version
// of one it knows (2.x only adds fields), so "3.0" is refused and "2.5" accepted.
bool is_known_metadata_version(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view major = text.substr(0, dot);
  const std::string_view minor = text.substr(dot + 1);
  if (!parse_u64(minor)) return false;
  if (major == "1") return minor == "0" || minor == "1" || minor == "2";
  return major == "2";
}

}  // namespace

Result<CoreMetadata> parse_core_metadata(std::string_view bytes) {
  if (const auto bad = first_invalid_utf8(bytes)) {
    return make_error(Errc::invalid, not_utf8_message("core metadata", *bad));
  }
  const auto fields = parse_header_block(bytes);

  Problems problems;
  CoreMetadata out;
  out.metadata_version = required_field(fields, "Metadata-Version", problems);
  if (!out.metadata_version.empty() && !is_known_metadata_version(out.metadata_version)) {
    problems.add("Metadata-Version \"" + sanitize_for_log(out.metadata_version, 40) +
                 "\" is not supported (known: 1.0, 1.1, 1.2 and 2.x)");
  }
  out.name = required_field(fields, "Name", problems);
  out.version = required_field(fields, "Version", problems);
  out.requires_python = single_field(fields, "Requires-Python", problems);
  out.summary = single_field(fields, "Summary", problems);
  for (const auto& field : fields) {
    if (iequals(field.name, "Requires-Dist")) out.requires_dist.push_back(field.value);
  }
  if (!problems.empty()) {
    Error error = problems.to_error(Errc::invalid);
    error.message = "invalid core metadata: " + error.message;
    return error;
  }
  return out;
}

DescriptionFormat description_format(std::string_view content_type) {
  std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  if (type.empty() || iequals(type, "text/x-rst")) return DescriptionFormat::rst;
  if (iequals(type, "text/markdown")) return DescriptionFormat::markdown;
  return DescriptionFormat::plain;
}

ProjectInfo parse_project_info(std::string_view bytes) {
  ProjectInfo info;
  if (first_invalid_utf8(bytes)) return info;
  std::size_t body = bytes.size();
  const auto fields = parse_header_block(bytes, &body);
  for (const auto& field : fields) {
    const std::string_view name = field.name;
    const std::string& value = field.value;
    const auto first = [&](std::string& into) {
      if (into.empty()) into = value;
    };
    if (iequals(name, "Summary")) {
      first(info.summary);
    } else if (iequals(name, "Description")) {
      if (info.description.empty()) info.description = unfold_description(field);
    } else if (iequals(name, "Description-Content-Type")) {
      first(info.description_content_type);
    } else if (iequals(name, "License")) {
      if (info.license.empty()) info.license = unfold_description(field);
    } else if (iequals(name, "License-Expression")) {
      first(info.license_expression);
    } else if (iequals(name, "Author")) {
      first(info.author);
    } else if (iequals(name, "Author-email")) {
      first(info.author_email);
    } else if (iequals(name, "Maintainer")) {
      first(info.maintainer);
    } else if (iequals(name, "Maintainer-email")) {
      first(info.maintainer_email);
    } else if (iequals(name, "Home-page")) {
      first(info.home_page);
    } else if (iequals(name, "Requires-Python")) {
      first(info.requires_python);
    } else if (iequals(name, "Keywords")) {
      first(info.keywords);
    } else if (iequals(name, "Requires-Dist")) {
      info.requires_dist.push_back(value);
    } else if (iequals(name, "Classifier")) {
      info.classifiers.push_back(value);
    } else if (iequals(name, "Project-URL")) {
      const auto comma = value.find(',');
      if (comma == std::string::npos) continue;
      info.project_urls.emplace_back(std::string(trim(std::string_view(value).substr(0, comma))),
                                     std::string(trim(std::string_view(value).substr(comma + 1))));
    }
  }
  // Metadata 2.1 puts the description in the message body, after the blank line.
  if (body < bytes.size()) {
    const std::string_view rest = bytes.substr(body);
    if (!trim(rest).empty()) info.description = std::string(rest);
  }
  return info;
}

Result<std::vector<std::string>> parse_wheel_file(std::string_view bytes) {
  if (const auto bad = first_invalid_utf8(bytes)) {
    return make_error(Errc::invalid, not_utf8_message("WHEEL file", *bad));
  }
  const auto fields = parse_header_block(bytes);

  Problems problems;
  const std::string wheel_version = required_field(fields, "Wheel-Version", problems);
  if (!wheel_version.empty()) {
    const auto parts = split(wheel_version, '.');
    bool numeric = true;
    for (const auto part : parts) numeric = numeric && parse_u64(part).has_value();
    if (!numeric) {
      problems.add("Wheel-Version \"" + sanitize_for_log(wheel_version, 40) +
                   "\" is not of the form MAJOR.MINOR");
    } else if (parse_u64(parts.front()) != 1U) {
      problems.add("Wheel-Version \"" + sanitize_for_log(wheel_version, 40) +
                   "\" is not supported (only 1.x)");
    }
  }
  if (!problems.empty()) {
    Error error = problems.to_error(Errc::invalid);
    error.message = "invalid WHEEL file: " + error.message;
    return error;
  }

  std::vector<std::string> tags;
  for (const auto& field : fields) {
    if (iequals(field.name, "Tag")) tags.push_back(field.value);
  }
  return tags;
}

}  // namespace wf::core
