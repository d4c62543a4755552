#include "wheelforge/util/log.hpp"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "wheelforge/util/redact.hpp"

namespace wf::log {
namespace {

spdlog::level::level_enum spdlog_level(Level level) {
  switch (level) {
    case Level::trace:
      return spdlog::level::trace;
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::critical:
      return spdlog::level::critical;
  }
  return spdlog::level::info;
}

Level level_of(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return Level::trace;
    case spdlog::level::debug:
      return Level::debug;
    case spdlog::level::warn:
      return Level::warn;
    case spdlog::level::err:
      return Level::error;
    case spdlog::level::critical:
      return Level::critical;
    default:
      return Level::info;
  }
}

/// Hands spdlog's lines to an Output as they are: the Output formats them itself.
class OutputSink final : public spdlog::sinks::sink {
 public:
  explicit OutputSink(Output output) : output_(std::move(output)) {}
  void log(const spdlog::details::log_msg& msg) override {
    output_(level_of(msg.level), msg.time,
            std::string_view(msg.payload.data(), msg.payload.size()));
  }
  void flush() override {}
  void set_pattern(const std::string& /*pattern*/) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter> /*formatter*/) override {}

 private:
  Output output_;
};

}  // namespace

bool enabled(Level level) noexcept {
  const auto* logger = spdlog::default_logger_raw();
  return logger != nullptr && logger->should_log(spdlog_level(level));
}

void write(Level level, std::string_view line) {
  auto* logger = spdlog::default_logger_raw();
  if (logger == nullptr) return;
  // No secret reaches the log, whoever wrote the line (a URL with credentials, a registered
  // password): util/redact.hpp.
  if (needs_redaction(line)) {
    const std::string masked = redact(line);
    logger->log(spdlog_level(level), spdlog::string_view_t(masked.data(), masked.size()));
    return;
  }
  logger->log(spdlog_level(level), spdlog::string_view_t(line.data(), line.size()));
}

void set_output(Output output) {
  auto sink = std::make_shared<OutputSink>(std::move(output));
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("wheelforge", std::move(sink)));
}

void set_level(Level level) {
  spdlog::set_level(spdlog_level(level));
}

void shutdown() {
  spdlog::shutdown();
}

}  // namespace wf::log
