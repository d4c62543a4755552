#pragma once
// The process's log: one line per event, with the request or job it belongs to. Every module
// logs through these functions; spdlog, which carries the lines, stays behind them (util is
// its one user). The composition root decides once where the lines go (set_output); until
// then they go to spdlog's default output (stdout).

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <iterator>
#include <string_view>
#include <utility>

namespace wf::log {

enum class Level { trace, debug, info, warn, error, critical };

/// True when lines of `level` are written; the others are not even formatted.
[[nodiscard]] bool enabled(Level level) noexcept;

/// Writes `line` as it is (no formatting) when lines of `level` are written, with URL userinfo
/// and registered secrets masked (util/redact.hpp).
void write(Level level, std::string_view line);

/// Formats the line (fmt's syntax: "job={} failed: {}") and writes it.
template <typename... Args>
void line(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (!enabled(level)) return;
  fmt::memory_buffer buffer;
  fmt::format_to(std::back_inserter(buffer), format, std::forward<Args>(args)...);
  write(level, std::string_view(buffer.data(), buffer.size()));
}

template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::debug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::info, format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::warn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::error, format, std::forward<Args>(args)...);
}

/// Receives each written line: its level, when it was logged and its text, on the thread that
/// logged it.
using Output =
    std::function<void(Level level, std::chrono::system_clock::time_point time, std::string_view)>;

/// Sends every line from now on to `output` (kept until shutdown()).
void set_output(Output output);

/// Lines below `level` are dropped from now on (the default: info).
void set_level(Level level);

/// Ends logging: lets go of the output set by set_output, which is destroyed once no line is
/// being written to it. Lines logged afterwards are dropped.
void shutdown();

}  // namespace wf::log
