#pragma once
// Commands that outlive the server that started them (CommandPlacement::Lifetime::detached:
// the build), on this host: the local executor's build, and the container executor's engine
// client. The same shape as the Slurm executor's agent: the command runs under a small
// supervisor (/bin/sh) that records how it ended in a file, and the server learns everything
// through files in the command's control directory (DATA_DIR/builds/job-<id>/detached/<id>/):
//
//   record  written by the server (atomically) right after the start: the command's identity
//           (a hash of its argv, environment, directory and log), the supervisor's pid, its
//           start time in clock ticks after boot and the boot's id (so that a pid read back is
//           known to still name the supervisor), when it started, and executor notes (the
//           container's name);
//   exit    written by the supervisor (atomically) once the command has ended: its exit
//           status as the shell reports it (128 + N for a command killed by signal N).
//
// The supervisor leads its own session and process group; the command runs in the
// foreground of it, in the same group, with every signal at its default. Signals to the
// group (a cancel, a timeout) reach the command; the supervisor waits for it through them.
// The command's output goes to its log file directly, so nothing is lost while no server
// watches. The server that started it also reaps it; a restarted server watches it through
// /proc (it is no longer its child) and the exit file, signals its group to cancel it, and
// kills what the command left in its group once it has ended.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "wheelforge/build/executor.hpp"

namespace wf::build {

/// A hash of what makes a command the same command: argv, environment, working directory and
/// log file (not its limits: a restarted server may grant other ones).
[[nodiscard]] std::string command_identity(const ProcessSpec& spec);

/// The control directory of the command `identity` of the job whose work directory is
/// `work_dir`.
[[nodiscard]] std::filesystem::path detached_dir(const std::filesystem::path& work_dir,
                                                 std::string_view identity);

/// What the server recorded when it started a detached command.
struct DetachedRecord {
  std::string identity;
  pid_t pid = -1;  ///< the supervisor's, which is also its process group's id
  std::uint64_t start_ticks = 0;
  std::string boot_id;
  std::int64_t started_at = 0;  ///< seconds since the epoch
  std::map<std::string, std::string> notes;
};

/// Reads `dir`'s record. not_found when there is none (the server died before it wrote it).
[[nodiscard]] Result<DetachedRecord> read_detached_record(const std::filesystem::path& dir);

/// Starts `spec` under a supervisor with `dir` (made afresh) as its control directory, and
/// records it with `identity` and `notes`. The timeout and the cancellation apply as
/// Process::start's do. Fails as Process::start does, or with io when the directory or the
/// record cannot be written (the command is then killed).
[[nodiscard]] Result<std::unique_ptr<Execution>> start_detached(
    const ProcessSpec& spec, const std::filesystem::path& dir, const std::string& identity,
    const std::map<std::string, std::string>& notes = {});

/// Attaches to the command `record` describes: still running (its supervisor is the process
/// recorded), or ended while no server watched (its exit file). `timeout` counts from when it
/// started (0: none); `grace` is the time between SIGTERM and SIGKILL of a cancel. Fails with
/// not_found when there is nothing to attach to: the supervisor is gone without an exit
/// status (killed, or the host restarted).
[[nodiscard]] Result<std::unique_ptr<Execution>> reattach_detached(
    const std::filesystem::path& dir, const DetachedRecord& record,
    std::chrono::milliseconds timeout, std::chrono::milliseconds grace);

/// The supervisor's text (/bin/sh; $1 the control directory, the command after it).
[[nodiscard]] std::string_view supervisor_script();

}  // namespace wf::build
