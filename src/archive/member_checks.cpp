#include "archive/member_checks.hpp"

#include "wheelforge/util/strings.hpp"

namespace wf::archive {

void CappedProblems::add(std::string problem) {
  if (problems_.list().size() < cap_) {
    problems_.add(std::move(problem));
  } else {
    ++dropped_;
  }
}

Error CappedProblems::to_error() const {
  Error error = problems_.to_error(Errc::invalid);
  if (dropped_ > 0) error.message += "; and " + std::to_string(dropped_) + " more problems";
  return error;
}

std::string quote_name(std::string_view name) {
  return "'" + sanitize_for_log(name) + "'";
}

bool check_member_name(std::string_view name, CappedProblems& problems) {
  bool clean = true;
  auto fail = [&](std::string_view why) {
    problems.add("member name " + quote_name(name) + " " + std::string(why));
    clean = false;
  };

  if (name.empty()) {
    fail("is empty");
    return false;
  }
  bool control = false;
  bool backslash = false;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    control = control || u < 0x20U || u == 0x7fU;
    backslash = backslash || c == '\\';
  }
  if (control) fail("contains a control character");
  if (backslash) fail("contains a backslash");

  const bool drive_letter =
      name.size() >= 2 && name[1] == ':' &&
      ((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z'));
  if (name.front() == '/' || drive_letter) {
    fail("is absolute");
    return false;
  }

  std::string_view rest = name;
  if (rest.back() == '/') rest.remove_suffix(1);
  bool dot = false;
  bool dotdot = false;
  bool empty_component = false;
  while (true) {
    const std::size_t slash = rest.find('/');
    const std::string_view component = rest.substr(0, slash);
    dot = dot || component == ".";
    dotdot = dotdot || component == "..";
    empty_component = empty_component || component.empty();
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (dotdot) fail("contains a '..' component");
  if (dot) fail("contains a '.' component");
  if (empty_component) fail("contains an empty path component");
  return clean;
}

std::optional<std::string> inflated_size_problem(std::string_view what, std::uint64_t inflated,
                                                 std::uint64_t archive_size, const Limits& limits,
                                                 Total total) {
  const std::string subject(what);
  if (inflated > limits.max_inflated_bytes) {
    const std::string limit = std::to_string(limits.max_inflated_bytes) + " bytes";
    if (total == Total::running) {
      return subject + " inflates to more than the limit of " + limit + " (max_inflated_size)";
    }
    return subject + " inflates to " + std::to_string(inflated) +
           " bytes, more than the limit of " + limit + " (max_inflated_size)";
  }
  const std::uint64_t ratio = limits.max_compression_ratio;
  // Saturating: a huge ratio setting must not wrap around to a small allowance.
  const std::uint64_t allowed =
      archive_size != 0 && ratio > UINT64_MAX / archive_size ? UINT64_MAX : ratio * archive_size;
  if (inflated <= limits.ratio_floor_bytes || inflated <= allowed) return std::nullopt;
  const std::string size = "its size of " + std::to_string(archive_size) + " bytes";
  if (total == Total::running) {
    return subject + " inflates to more than " + std::to_string(ratio) + " times " + size +
           ", the limit (max_compression_ratio)";
  }
  const std::uint64_t actual = archive_size == 0 ? inflated : inflated / archive_size;
  return subject + " inflates to " + std::to_string(inflated) + " bytes, " +
         std::to_string(actual) + " times " + size + ", more than the limit of " +
         std::to_string(ratio) + " times (max_compression_ratio)";
}

std::string too_many_members(std::optional<std::uint64_t> count, const Limits& limits) {
  const std::string limit = std::to_string(limits.max_members);
  if (!count) {
    return "the archive has more than " + limit + " members, the limit (max_archive_members)";
  }
  return "the archive has " + std::to_string(*count) + " members, more than the limit of " + limit +
         " (max_archive_members)";
}

std::string_view top_component(std::string_view name) {
  return name.substr(0, name.find('/'));
}

}  // namespace wf::archive
