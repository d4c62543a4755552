#include "wheelforge/app/systemd.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

Notifier Notifier::from_environment() {
  Notifier n;
  if (const char* path = std::getenv("NOTIFY_SOCKET"); path != nullptr && *path != '\0') {
    n.socket_path_ = path;
  }
  return n;
}

bool Notifier::notify(std::string_view state) const {
  if (!enabled()) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return false;
  const ssize_t sent = ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&addr), len);
  return sent == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::microseconds> Notifier::watchdog_interval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr) {
    const auto p = parse_u64(pid);
    if (!p || *p != static_cast<std::uint64_t>(::getpid())) return std::nullopt;
  }
  const auto us = parse_u64(usec);
  if (!us || *us == 0) return std::nullopt;
  return std::chrono::microseconds(static_cast<std::int64_t>(*us / 2));
}

std::optional<int> activated_socket() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (pid == nullptr || fds == nullptr) return std::nullopt;
  const auto p = parse_u64(pid);
  const auto n = parse_u64(fds);
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!p || *p != static_cast<std::uint64_t>(::getpid()) || !n || *n < 1) return std::nullopt;
  constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START
  ::fcntl(kFirstFd, F_SETFD, FD_CLOEXEC);
  return kFirstFd;
}

}  // namespace wf::app
