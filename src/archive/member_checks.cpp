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

std::string_view top_component(std::string_view name) {
  return name.substr(0, name.find('/'));
}

}  // namespace wf::archive
