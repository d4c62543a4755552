#pragma once
// Where a build step's command runs. The runner only talks to this interface; the local
// executor runs commands as processes on this host (own process group, explicit environment);
// a container executor (podman/docker) or a cluster executor (Slurm, a Kubernetes command
// template) implements the same operations, and tests use a fake that records every command
// and plays back scripted outcomes.

#include <chrono>
#include <cstdint>
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

/// What the machine that runs the builds offers, for admission (see Runner).
struct Capacity {
  std::uint64_t memory_bytes = 0;  ///< memory builds may use now (before the reserve)
  unsigned cores = 1;
};

/// A piece of a log: `data` read from `offset`.
struct LogChunk {
  std::uint64_t offset = 0;
  std::string data;
};

class Executor {
 public:
  virtual ~Executor() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Memory and cores available to builds now. Blocks briefly (reads /proc).
  [[nodiscard]] virtual Capacity capacity() = 0;
  /// Makes a job's work directory usable by the commands (creates it; a container executor
  /// would also arrange its mount). Fails with io / storage_full naming the directory.
  [[nodiscard]] virtual Status prepare(const std::filesystem::path& work_dir) = 0;
  /// Starts a command; its output is appended to spec.log_file. Fails as Process::start does.
  [[nodiscard]] virtual Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) = 0;
  /// Up to `max` bytes of a log (or a command's output file) from `offset`; empty when the
  /// file is missing or shorter. This is how every reader reaches a log (the runner, the HTTP
  /// API, the web UI): an executor whose logs live elsewhere serves them here.
  [[nodiscard]] virtual std::string read_log(const std::filesystem::path& log, std::uint64_t offset,
                                             std::size_t max) = 0;
  /// The last `max` bytes of a log (fewer when it is shorter), starting at a UTF-8 character
  /// boundary, with the offset they start at: offset + data.size() is the log's size when it
  /// was read. {0, ""} when the file is missing.
  [[nodiscard]] virtual LogChunk read_log_tail(const std::filesystem::path& log,
                                               std::size_t max) = 0;
};

/// Runs commands as local processes; capacity() is available_memory_bytes() and
/// available_cores().
[[nodiscard]] std::unique_ptr<Executor> make_local_executor();

/// Starts a command on `executor` and waits for it, cancelling it when `should_cancel` says so.
[[nodiscard]] Result<ExitStatus> run_on(
    Executor& executor, const ProcessSpec& spec, const std::function<bool()>& should_cancel,
    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));

}  // namespace wf::build
