// What /proc says about processes (build/process.hpp): whether a process group still has live
// members, when a process started, and which processes carry an environment entry.

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <system_error>

#include "wheelforge/build/process.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {
namespace fs = std::filesystem;

namespace {

// Scans /proc for a member of the group that is not a zombie.
bool any_live_member_in_proc(pid_t pgid) {
  std::error_code ec;
  fs::directory_iterator it("/proc", ec);
  if (ec) return true;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return true;
    const fs::path& proc_dir = it->path();
    const std::string name = proc_dir.filename().string();
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    auto stat = read_small_file(proc_dir / "stat", 4096);
    if (!stat.ok()) continue;  // the process is gone already
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so parse from
    // the last ')'.
    const std::string& s = stat.value();
    const auto close = s.rfind(')');
    if (close == std::string::npos) continue;
    const auto fields = split(std::string_view(s).substr(close + 1), ' ');
    // fields[0] is empty (the space after ')'), then state, ppid, pgrp.
    if (fields.size() < 4) continue;
    const auto pgrp = parse_u64(fields[3]);
    if (!pgrp || *pgrp != static_cast<std::uint64_t>(pgid)) continue;
    if (fields[1] != "Z" && fields[1] != "X") return true;
  }
  return false;
}

}  // namespace

// kill(-pgid, 0) alone is not enough: it also counts zombies, and orphans whose new parent
// never reaps them (a container whose PID 1 is not an init) stay zombies for ever, which would
// hold every cancellation for the full grace period. So when kill() finds members, /proc says
// whether any of them is alive.
bool group_has_live_members(pid_t pgid) noexcept {
  if (::kill(-pgid, 0) == -1 && errno == ESRCH) return false;
  try {
    return any_live_member_in_proc(pgid);
  } catch (...) {
    return true;  // out of memory: assume the worst, the caller then sends SIGKILL
  }
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  auto stat = read_small_file(fs::path("/proc") / std::to_string(pid) / "stat", 4096);
  if (!stat.ok()) return std::nullopt;
  // "pid (comm) state ppid ...": starttime is the 22nd field, the 20th after the comm.
  const std::string& s = stat.value();
  const auto close = s.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const auto fields = split(std::string_view(s).substr(close + 2), ' ');
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return std::nullopt;
  return parse_u64(fields[19]);
}

int kill_processes_with_env(std::string_view entry) {
  int killed = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    auto environ = read_small_file(it->path() / "environ", 1U << 20U);
    if (!environ.ok()) continue;
    const std::string_view env = environ.value();
    for (std::size_t pos = 0; pos < env.size();) {
      const std::size_t end = std::min(env.find('\0', pos), env.size());
      if (env.substr(pos, end - pos) == entry) {
        if (const auto n = parse_u64(pid); n && ::kill(static_cast<pid_t>(*n), SIGKILL) == 0) {
          ++killed;
        }
        break;
      }
      pos = end + 1;
    }
  }
  return killed;
}

}  // namespace wf::build
