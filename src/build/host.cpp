// What the runner reads of the machine it runs on: the memory and cores a build may use (the
// cgroup's limits included), the environment a command starts from, and the tail of a log.

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include "wheelforge/build/process.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {
namespace fs = std::filesystem;

namespace {

std::optional<std::uint64_t> read_u64_file(const fs::path& path) {
  auto text = read_small_file(path, 4096);
  if (!text.ok()) return std::nullopt;
  return parse_u64(trim(text.value()));
}

// The headroom under memory.max of our cgroup and every ancestor that sets one. The working
// set excludes inactive page cache, which the kernel reclaims before it OOM-kills a compiler;
// memory.current alone would count every wheel the server has recently read.
std::optional<std::uint64_t> cgroup_memory_headroom() {
  auto membership = read_small_file("/proc/self/cgroup", 65536);
  if (!membership.ok()) return std::nullopt;
  std::string relative;
  for (const std::string_view line : split(membership.value(), '\n')) {
    if (line.substr(0, 3) == "0::") relative = std::string(trim(line.substr(3)));
  }
  if (relative.empty()) return std::nullopt;  // cgroup v1 only: not handled
  const fs::path root = "/sys/fs/cgroup";
  fs::path dir = root;
  for (const auto& part : fs::path(relative).relative_path()) {
    if (part == "..") return std::nullopt;
    if (!part.empty()) dir /= part;
  }
  std::optional<std::uint64_t> headroom;
  while (true) {
    const auto limit = read_u64_file(dir / "memory.max");  // "max" (no limit) does not parse
    const auto current = read_u64_file(dir / "memory.current");
    if (limit && current) {
      std::uint64_t used = *current;
      if (auto stat = read_small_file(dir / "memory.stat", 65536); stat.ok()) {
        for (const std::string_view line : split(stat.value(), '\n')) {
          if (line.substr(0, 14) != "inactive_file ") continue;
          if (auto inactive = parse_u64(trim(line.substr(14)))) {
            used -= std::min(used, *inactive);
          }
        }
      }
      const std::uint64_t room = *limit > used ? *limit - used : 0;
      headroom = headroom ? std::min(*headroom, room) : room;
    }
    if (dir == root) break;
    dir = dir.parent_path();
  }
  return headroom;
}

}  // namespace

std::string read_log_tail(const fs::path& path, std::size_t max_bytes) {
  std::uint64_t offset = 0;
  return read_log_tail(path, max_bytes, offset);
}

std::string read_log_tail(const fs::path& path, std::size_t max_bytes, std::uint64_t& offset) {
  offset = 0;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return {};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  offset = size;
  if (max_bytes == 0) return {};
  const std::uint64_t start = size > max_bytes ? size - max_bytes : 0;
  offset = start;
  // The log may grow while we read: stop at the size we saw.
  std::string out(static_cast<std::size_t>(size - start), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n =
        ::pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(start + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  if (start > 0) {
    // Cut in the middle of a multi-byte character: drop its continuation bytes so that the
    // tail can go into JSON and HTML as valid UTF-8.
    std::size_t skip = 0;
    while (skip < 3 && skip < out.size() &&
           (static_cast<unsigned char>(out[skip]) & 0xC0U) == 0x80U) {
      ++skip;
    }
    out.erase(0, skip);
    offset += skip;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> minimal_environment() {
  const char* home = std::getenv("HOME");
  return {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", home != nullptr && *home != '\0' ? home : "/tmp"},
      {"LANG", "C.UTF-8"},
  };
}

std::uint64_t available_memory_bytes() {
  std::optional<std::uint64_t> available;
  if (auto meminfo = read_small_file("/proc/meminfo", 1 << 20); meminfo.ok()) {
    for (const std::string_view line : split(meminfo.value(), '\n')) {
      if (line.substr(0, 13) != "MemAvailable:") continue;
      std::string_view number = trim(line.substr(13));
      number = number.substr(0, number.find(' '));
      if (auto kib = parse_u64(number)) available = *kib * 1024;
    }
  }
  if (!available) {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      available = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
    }
  }
  if (const auto headroom = cgroup_memory_headroom()) {
    available = available ? std::min(*available, *headroom) : *headroom;
  }
  return available.value_or(0);
}

unsigned available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return static_cast<unsigned>(count);
  }
  return std::max(1U, std::thread::hardware_concurrency());
}

}  // namespace wf::build
