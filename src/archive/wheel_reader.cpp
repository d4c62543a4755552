#include <archive.h>
#include <archive_entry.h>

#include <set>
#include <string>
#include <string_view>

#include "archive/archive_source.hpp"
#include "archive/member_checks.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/reader.hpp"

namespace wf::archive {
namespace {

constexpr std::string_view kDistInfoSuffix = ".dist-info";

char lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// PEP 503, kept local so that this module does not wait on core: lower-case, and every run of
// '-', '_', '.' becomes one '-'.
std::string normalize_project_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  bool in_separator_run = false;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_separator_run) out += '-';
      in_separator_run = true;
    } else {
      out += lower_ascii(c);
      in_separator_run = false;
    }
  }
  return out;
}

// Wheel file names and .dist-info directories both escape '-' in a version as '_'; the caller
// compares the versions properly (PEP 440) against METADATA, so text equality up to case and
// that escape is enough to tie the directory to the file name.
std::string fold_version(std::string_view version) {
  std::string out;
  out.reserve(version.size());
  for (const char c : version) out += c == '_' ? '-' : lower_ascii(c);
  return out;
}

// The directory stem is "{name}-{version}"; the name should contain no '-' (it is escaped as
// '_'), but old tools were not consistent, so every split point is tried.
bool dist_info_matches(std::string_view dir, std::string_view expected_name,
                       std::string_view expected_version) {
  const std::string_view stem = dir.substr(0, dir.size() - kDistInfoSuffix.size());
  const std::string want_name = normalize_project_name(expected_name);
  const std::string want_version = fold_version(expected_version);
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos;
       dash = stem.find('-', dash + 1)) {
    if (normalize_project_name(stem.substr(0, dash)) == want_name &&
        fold_version(stem.substr(dash + 1)) == want_version) {
      return true;
    }
  }
  return false;
}

std::string expected_dist_info(std::string_view name, std::string_view version) {
  std::string escaped = normalize_project_name(name);
  for (char& c : escaped) c = c == '-' ? '_' : c;
  return escaped + "-" + std::string(version) + std::string(kDistInfoSuffix);
}

// Checks the .dist-info directory against the file name and the presence of METADATA and WHEEL.
// Returns the directory name (empty when there is no single one).
std::string check_dist_info(const std::vector<ZipMember>& members, std::string_view expected_name,
                            std::string_view expected_version, CappedProblems& problems) {
  std::set<std::string_view> dirs;
  for (const auto& m : members) {
    const std::size_t slash = m.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string_view top = std::string_view(m.name).substr(0, slash);
    if (top.size() > kDistInfoSuffix.size() && top.ends_with(kDistInfoSuffix)) dirs.insert(top);
  }
  if (dirs.empty()) {
    problems.add("no .dist-info directory");
    return {};
  }
  if (dirs.size() > 1) {
    std::string list;
    for (const auto dir : dirs) list += (list.empty() ? "" : ", ") + quote_name(dir);
    problems.add("several .dist-info directories: " + list);
    return {};
  }
  std::string dir(*dirs.begin());
  if (!dist_info_matches(dir, expected_name, expected_version)) {
    problems.add(".dist-info directory " + quote_name(dir) +
                 " does not match the file name (expected " +
                 quote_name(expected_dist_info(expected_name, expected_version)) + ")");
  }
  bool has_metadata = false;
  bool has_wheel = false;
  for (const auto& m : members) {
    has_metadata = has_metadata || m.name == dir + "/METADATA";
    has_wheel = has_wheel || m.name == dir + "/WHEEL";
  }
  if (!has_metadata) problems.add(dir + "/METADATA is missing");
  if (!has_wheel) problems.add(dir + "/WHEEL is missing");
  return dir;
}

}  // namespace

Result<WheelContents> read_wheel(const std::filesystem::path& path, std::string_view expected_name,
                                 std::string_view expected_version, const Limits& limits) {
  auto file = open_archive_file(path);
  if (!file) return file.error();

  // Layout and names first, from our own reading of the zip structure, so that nothing is
  // decompressed from an archive that zip readers could disagree about.
  CappedProblems problems;
  auto members = scan_zip_layout(file->fd.get(), file->size, limits.max_members, problems);
  if (!members) return members.error();
  const std::string dir = check_dist_info(*members, expected_name, expected_version, problems);
  if (!problems.empty()) return problems.to_error();

  // libarchive in seekable mode starts from the central directory and visits members in file
  // order; skipping a member is a seek, so reaching METADATA near the end of a multi-gigabyte
  // wheel costs one local-header read per member, not a pass over the data.
  const ArchiveReader reader = new_archive_reader();
  archive_read_support_format_zip_seekable(reader.get());
  FdSource source(file->fd.get(), file->size);
  if (source.open(reader.get(), Seeking::yes) != ARCHIVE_OK) {
    return make_error(Errc::invalid, "not a zip archive (" + archive_error(reader.get()) + ")");
  }

  WheelContents contents;
  contents.dist_info_dir = dir;
  const std::string metadata_name = dir + "/METADATA";
  const std::string wheel_name = dir + "/WHEEL";
  bool have_metadata = false;
  bool have_wheel = false;
  while (!have_metadata || !have_wheel) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(reader.get(), &entry);
    if (status == ARCHIVE_EOF) break;
    // Warnings repeat what the layout scan has already checked against the raw headers, or
    // concern converting a non-ASCII name to the C locale; neither affects the two members
    // we read, whose names are ASCII.
    if (status < ARCHIVE_WARN) {
      return make_error(Errc::invalid,
                        "cannot read the zip archive: " + archive_error(reader.get()));
    }
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) continue;
    const std::string_view name(raw_name);
    std::string* target = nullptr;
    bool* seen = nullptr;
    if (name == metadata_name) {
      target = &contents.metadata;
      seen = &have_metadata;
    } else if (name == wheel_name) {
      target = &contents.wheel;
      seen = &have_wheel;
    } else {
      if (archive_read_data_skip(reader.get()) < ARCHIVE_WARN) {
        return make_error(Errc::invalid,
                          "cannot read the zip archive: " + archive_error(reader.get()));
      }
      continue;
    }
    if (archive_entry_filetype(entry) != AE_IFREG) {
      return make_error(Errc::invalid, std::string(name) + " is not a regular file");
    }
    auto data = read_member_data(reader.get(), entry, name, limits.max_metadata_bytes);
    if (!data) return data.error();
    *target = std::move(*data);
    *seen = true;
  }
  if (!have_metadata || !have_wheel) {
    return make_error(Errc::invalid, "the zip reader did not find " +
                                         (have_metadata ? wheel_name : metadata_name));
  }
  return contents;
}

}  // namespace wf::archive
