#pragma once
// Where a build step's command runs. The runner only talks to this interface; the local
// executor runs commands as processes on this host (own process group, explicit environment);
// a container executor (podman/docker) or a cluster executor (Slurm, a Kubernetes command
// template) implements the same operations.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/build/process.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::build {

/// One running command.
class Execution {
 public:
  virtual ~Execution() = default;
  /// The exit status once the command (and everything it started) has ended; enforces the
  /// spec's timeout. Never blocks for long.
  [[nodiscard]] virtual std::optional<ExitStatus> poll() = 0;
  /// Stops the command and everything it started (returns at once; poll() reports the end).
  virtual void cancel() = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Makes a job's work directory usable by the commands (creates it; a container executor
  /// would also arrange its mount).
  [[nodiscard]] virtual Status prepare(const std::filesystem::path& work_dir) = 0;
  /// Starts a command; its output is appended to spec.log_file.
  [[nodiscard]] virtual Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) = 0;
  /// Up to `max` bytes of a log from `offset` (the log lives on this host for every executor).
  [[nodiscard]] virtual std::string read_log(const std::filesystem::path& log, std::uint64_t offset,
                                             std::size_t max) = 0;
};

/// Runs commands as local processes.
[[nodiscard]] std::unique_ptr<Executor> make_local_executor();

/// Starts a command on `executor` and waits for it, cancelling it when `should_cancel` says so.
[[nodiscard]] Result<ExitStatus> run_on(
    Executor& executor, const ProcessSpec& spec, const std::function<bool()>& should_cancel,
    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));

}  // namespace wf::build
