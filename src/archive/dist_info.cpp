#include "archive/dist_info.hpp"

#include <set>

namespace wf::archive {
namespace {

char lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Name normalization (docs/packaging.md, "Project names"), kept local so that this module does
// not wait on core: lower-case, and every run of '-', '_', '.' becomes one '-'.
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
// compares the versions properly against METADATA, so text equality up to case and that escape
// is enough to tie the directory to the file name (docs/packaging.md, "Inside a wheel").
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

}  // namespace

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
  // RECORD is what installers check every file against: a wheel without one cannot be
  // verified, and pip refuses it at install time (docs/packaging.md, "Inside a wheel").
  bool has_metadata = false;
  bool has_wheel = false;
  bool has_record = false;
  for (const auto& m : members) {
    has_metadata = has_metadata || m.name == dir + "/METADATA";
    has_wheel = has_wheel || m.name == dir + "/WHEEL";
    has_record = has_record || m.name == dir + "/RECORD";
  }
  if (!has_metadata) problems.add(dir + "/METADATA is missing");
  if (!has_wheel) problems.add(dir + "/WHEEL is missing");
  if (!has_record) problems.add(dir + "/RECORD is missing");
  return dir;
}

}  // namespace wf::archive
