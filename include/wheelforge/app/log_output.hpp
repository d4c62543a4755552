#pragma once
// Where the process's log lines go: formatted on the thread that logs them into a buffer of that
// thread's own, and written to a file descriptor in batches by one writer thread. Logging a
// line takes no lock another logging thread holds, makes no system call and wakes no thread
// (warnings and errors excepted: they wake the writer at once).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "wheelforge/util/log.hpp"

namespace wf::app {

using LogLevel = log::Level;

class LogOutput {
 public:
  enum class Style {
    /// "2026-11-22T10:11:12.123456Z info message": for files and terminals.
    text,
    /// "<6>message": journald stamps each line itself and reads the priority from "<N>".
    journal,
  };

  /// Writes to `fd` (not owned). `max_pending` bounds the bytes a thread may have waiting;
  /// above it, that thread's lines are dropped and counted, and the count is written once
  /// the writer catches up: a stalled descriptor never stalls a caller.
  LogOutput(int fd, Style style, std::size_t max_pending = kDefaultMaxPending);
  ~LogOutput();
  LogOutput(const LogOutput&) = delete;
  LogOutput& operator=(const LogOutput&) = delete;

  void line(LogLevel level, std::chrono::system_clock::time_point time, std::string_view message);

  /// Returns once every line given so far (by any thread) is written.
  void flush();

  /// How often the writer thread writes what has gathered when nothing asks it sooner.
  static constexpr std::chrono::milliseconds kInterval{100};
  static constexpr std::size_t kDefaultMaxPending = 4 * 1024 * 1024;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wf::app
