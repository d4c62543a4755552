#include "wheelforge/core/filename.hpp"

#include <algorithm>

#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

constexpr std::string_view kWheelSuffix = ".whl";
constexpr std::string_view kSdistSuffix = ".tar.gz";
constexpr std::string_view kZipSuffix = ".zip";
// Long enough to recognise a value in a message, short enough to keep the message readable.
constexpr std::size_t kQuoteLength = 80;

std::string quoted(std::string_view s, std::size_t max_len = kQuoteLength) {
  return "\"" + sanitize_for_log(s, max_len) + "\"";
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_tag_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

std::vector<std::string> split_tag_set(const std::string& set) {
  std::vector<std::string> out;
  if (set.empty()) return out;
  for (const auto part : split(set, '.')) out.emplace_back(part);
  return out;
}

// Character-level checks that apply to every file name before it is split into parts. These
// guard the file system and the logs, so each is reported even when later parts also fail.
void check_characters(std::string_view filename, Problems& problems) {
  if (filename.size() > kMaxFilenameLength) {
    problems.add("file name is " + std::to_string(filename.size()) + " bytes long, the limit is " +
                 std::to_string(kMaxFilenameLength));
  }
  bool separator = false;
  bool control = false;
  bool non_ascii = false;
  bool space = false;
  for (const char c : filename) {
    const auto u = static_cast<unsigned char>(c);
    separator = separator || c == '/' || c == '\\';
    control = control || u < 0x20 || u == 0x7F;
    non_ascii = non_ascii || u >= 0x80;
    space = space || c == ' ';
  }
  if (separator) problems.add("file name contains a path separator ('/' or '\\')");
  if (control) problems.add("file name contains a control character");
  if (non_ascii) problems.add("file name contains non-ASCII characters");
  if (space) problems.add("file name contains a space");
  if (filename.find("..") != std::string_view::npos) problems.add("file name contains \"..\"");
  if (filename.front() == '.') problems.add("file name starts with '.'");
}

void check_name(std::string_view name, Problems& problems) {
  if (!is_valid_project_name(name)) {
    problems.add("project name " + quoted(name) +
                 " is not valid (letters, digits, and '.', '_', '-' inside)");
  }
}

std::optional<Version> check_version(std::string_view text, Problems& problems) {
  // Version::parse tolerates surrounding whitespace, a file name must not carry any.
  const bool has_space = text.find_first_of(" \t\n\r\f\v") != std::string_view::npos;
  auto version = Version::parse(text);
  if (!version || has_space) {
    problems.add("version " + quoted(text) + " is not a valid PEP 440 version");
    return std::nullopt;
  }
  return std::move(version).value();
}

void check_tag(std::string_view what, std::string_view tag, Problems& problems) {
  bool ok = !tag.empty();
  for (const char c : tag) ok = ok && is_tag_char(c);
  for (const auto part : split(tag, '.')) ok = ok && !part.empty();
  if (!ok) {
    problems.add(std::string(what) + " " + quoted(tag) +
                 " is not valid (letters, digits and '_', sets joined by '.')");
  }
}

void check_build_tag(std::string_view tag, Problems& problems) {
  bool ok = !tag.empty() && tag.front() >= '0' && tag.front() <= '9';
  for (const char c : tag) ok = ok && is_tag_char(c);
  if (!ok) {
    problems.add("build tag " + quoted(tag) +
                 " is not valid (a digit first, then letters, digits, '_' and '.')");
  }
}

void check_variant_label(std::string_view label, Problems& problems) {
  if (!is_valid_variant_label(label)) {
    problems.add("variant label " + quoted(label) +
                 " is not valid (PEP 825: lower-case letters, digits, '_' and '.', not empty)");
  }
}

// `{name}-{version}(-{build})?-{python}-{abi}-{platform}(-{variant label})?.whl`: six parts
// are a build tag when the third starts with a digit (or is empty, a broken build tag), else a
// variant label, since a python tag never starts with a digit (docs/variants.md, "File names").
void parse_wheel(std::string_view stem, DistFilename& out, Problems& problems) {
  const auto parts = split(stem, '-');
  if (parts.size() < 5 || parts.size() > 7) {
    problems.add(
        "a wheel name has 5 or 6 dash-separated parts (7 with a PEP 825 variant label), got " +
        std::to_string(parts.size()));
    return;
  }
  const auto starts_with_digit = [](std::string_view s) {
    return !s.empty() && s.front() >= '0' && s.front() <= '9';
  };
  const bool build =
      parts.size() == 7 || (parts.size() == 6 && (parts[2].empty() || starts_with_digit(parts[2])));
  const bool variant = parts.size() == 7 || (parts.size() == 6 && !build);
  out.name = std::string(parts[0]);
  out.version_text = std::string(parts[1]);
  check_name(parts[0], problems);
  if (auto version = check_version(parts[1], problems)) out.version = std::move(*version);
  const std::size_t tags_at = build ? 3 : 2;
  if (build) {
    check_build_tag(parts[2], problems);
    out.tags.build_tag = std::string(parts[2]);
  }
  out.tags.python_tag = std::string(parts[tags_at]);
  out.tags.abi_tag = std::string(parts[tags_at + 1]);
  out.tags.platform_tag = std::string(parts[tags_at + 2]);
  check_tag("python tag", out.tags.python_tag, problems);
  check_tag("abi tag", out.tags.abi_tag, problems);
  check_tag("platform tag", out.tags.platform_tag, problems);
  if (variant) {
    // Every tag of a compressed set: the key sorts the set (canonical_file_key), and a sorted
    // set that began with a digit would read back as a build tag.
    for (const auto tag : split(out.tags.python_tag, '.')) {
      if (starts_with_digit(tag)) {
        problems.add("python tag " + quoted(tag) +
                     " starts with a digit: a wheel name has at most one build tag");
        break;
      }
    }
    out.tags.variant_label = std::string(parts[tags_at + 3]);
    check_variant_label(*out.tags.variant_label, problems);
  }
}

void parse_sdist(std::string_view stem, DistFilename& out, Problems& problems) {
  // Escaped names never contain '-', but legacy sdists ("foo-bar-1.0.tar.gz") do; versions
  // never contain '-' in a file name, so the last one separates name and version
  // (docs/packaging.md, "Source distribution file names").
  const auto dash = stem.rfind('-');
  if (dash == std::string_view::npos) {
    problems.add("an sdist name is {name}-{version}.tar.gz, got no '-'");
    return;
  }
  const std::string_view name = stem.substr(0, dash);
  const std::string_view version = stem.substr(dash + 1);
  out.name = std::string(name);
  out.version_text = std::string(version);
  check_name(name, problems);
  if (auto parsed = check_version(version, problems)) out.version = std::move(*parsed);
}

// Build tags compare as (number, rest): leading zeros of the number carry nothing
// (docs/packaging.md, "Build tags").
std::string canonical_build_tag(std::string_view tag) {
  std::size_t zeros = 0;
  while (zeros + 1 < tag.size() && tag[zeros] == '0' && tag[zeros + 1] >= '0' &&
         tag[zeros + 1] <= '9') {
    ++zeros;
  }
  return std::string(tag.substr(zeros));
}

// A compressed tag set as a set: lower-case (tags are case-insensitive), sorted, no repeats.
std::string canonical_tag_set(std::string_view set) {
  std::vector<std::string> tags;
  for (const auto part : split(set, '.')) tags.push_back(to_lower(part));
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  std::string out;
  for (const auto& tag : tags) {
    if (!out.empty()) out += '.';
    out += tag;
  }
  return out;
}

}  // namespace

bool is_valid_variant_label(std::string_view label) {
  if (label.empty()) return false;
  return std::all_of(label.begin(), label.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

std::vector<std::string> WheelTags::python_tags() const {
  return split_tag_set(python_tag);
}
std::vector<std::string> WheelTags::abi_tags() const {
  return split_tag_set(abi_tag);
}
std::vector<std::string> WheelTags::platform_tags() const {
  return split_tag_set(platform_tag);
}

Result<DistFilename> parse_dist_filename(std::string_view filename) {
  if (filename.empty()) return make_error(Errc::invalid, "invalid file name: it is empty");

  Problems problems;
  check_characters(filename, problems);

  DistFilename out;
  out.filename = std::string(filename);
  if (ends_with(filename, kWheelSuffix)) {
    out.kind = DistKind::wheel;
    parse_wheel(filename.substr(0, filename.size() - kWheelSuffix.size()), out, problems);
  } else if (ends_with(filename, kSdistSuffix)) {
    out.kind = DistKind::sdist;
    parse_sdist(filename.substr(0, filename.size() - kSdistSuffix.size()), out, problems);
  } else if (ends_with(filename, kZipSuffix)) {
    problems.add("only .tar.gz sdists are accepted, not .zip (PEP 625)");
  } else {
    problems.add("file name must end in .whl or .tar.gz");
  }

  if (!problems.empty()) {
    Error error = problems.to_error(Errc::invalid);
    error.message =
        "invalid file name " + quoted(filename, kMaxFilenameLength) + ": " + error.message;
    return error;
  }
  out.normalized_name = normalize_name(out.name);
  return out;
}

std::string canonical_file_key(const DistFilename& name) {
  std::string escaped = name.normalized_name;
  std::replace(escaped.begin(), escaped.end(), '-', '_');
  std::string key = escaped + "-" + name.version.canonical_str();
  if (name.kind == DistKind::sdist) return key + std::string(kSdistSuffix);
  if (name.tags.build_tag) key += "-" + canonical_build_tag(*name.tags.build_tag);
  key += "-" + canonical_tag_set(name.tags.python_tag);
  key += "-" + canonical_tag_set(name.tags.abi_tag);
  key += "-" + canonical_tag_set(name.tags.platform_tag);
  if (name.tags.variant_label) key += "-" + *name.tags.variant_label;
  return key + std::string(kWheelSuffix);
}

std::string rebuild_key(const DistFilename& name) {
  if (name.kind == DistKind::sdist || !name.tags.build_tag) return canonical_file_key(name);
  DistFilename unnumbered = name;
  unnumbered.tags.build_tag.reset();
  return canonical_file_key(unnumbered);
}

std::uint64_t build_number(const WheelTags& tags) {
  if (!tags.build_tag) return 0;
  constexpr std::size_t kMaxDigits = 18;  // below 2^63
  std::uint64_t n = 0;
  std::size_t digits = 0;
  for (const char c : *tags.build_tag) {
    if (c < '0' || c > '9') break;
    if (++digits > kMaxDigits) return 0;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

std::string canonical_file_key(std::string_view filename) {
  auto parsed = parse_dist_filename(filename);
  if (!parsed) return std::string(filename);
  return canonical_file_key(*parsed);
}

}  // namespace wf::core
