#pragma once
// The parts of the systemd service protocol wheelforge speaks, without libsystemd:
// sd_notify(3) messages over $NOTIFY_SOCKET, the watchdog interval from $WATCHDOG_USEC, and
// socket activation through $LISTEN_FDS. Every function is a no-op (or returns nothing) when
// not running under systemd.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace wf::app {

class Notifier {
 public:
  /// Reads $NOTIFY_SOCKET (a path, or '@' for the abstract namespace). Unset: disabled.
  static Notifier from_environment();

  [[nodiscard]] bool enabled() const { return !socket_path_.empty(); }

  /// Sends one datagram such as "READY=1\nSTATUS=Serving". Never blocks for long (the
  /// socket is non-blocking); returns false when it could not be sent.
  bool notify(std::string_view state) const;

  /// Half of $WATCHDOG_USEC when the watchdog is enabled for this process (WATCHDOG_PID
  /// unset or equal to our pid): the interval at which to send WATCHDOG=1.
  [[nodiscard]] static std::optional<std::chrono::microseconds> watchdog_interval();

 private:
  std::string socket_path_;
};

/// The listening socket passed by systemd socket activation ($LISTEN_PID == getpid(),
/// $LISTEN_FDS >= 1: the first fd, 3), or nullopt. Unsets the variables so that children do
/// not inherit them, and marks the fd close-on-exec.
[[nodiscard]] std::optional<int> activated_socket();

}  // namespace wf::app
