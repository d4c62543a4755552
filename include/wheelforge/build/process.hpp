#pragma once
// The process layer of the build runner: one build command as a passive object.
//
// A Process owns a child started in its own process group. Nothing happens behind the caller's
// back: no threads, no SIGCHLD handler. The owner drives it by calling poll() (non-blocking) or
// wait() (blocking); those calls also enforce the timeout and escalate a cancellation from
// SIGTERM to SIGKILL. The whole group is the unit: when the leader exits, whatever it left
// running in its group is killed, so a build never leaves compilers behind that eat the memory
// the scheduler believes is free.
//
// Linux only (process groups, /proc, sched_getaffinity). Requires that SIGCHLD is not set to
// SIG_IGN in the server, which would make the kernel reap children before we can.
// Processes that leave the group (setsid, setpgid) escape it; containing those needs cgroups.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::build {

/// Default time between SIGTERM and SIGKILL when a process group is cancelled or times out.
inline constexpr std::chrono::milliseconds kDefaultKillGrace{5000};

/// How MAX_JOBS and NVCC_THREADS follow from a grant of cores and memory
/// (core::compute_parallelism, then core::halve `halvings` times): carried by a build command
/// for executors that learn the grant only where the command runs (a Slurm job).
struct BuildSizing {
  double gb_per_job = 4.0;
  unsigned arch_count = 1;
  unsigned halvings = 0;  ///< OOM retries before this attempt
};

/// Which build job a command belongs to and where it should run. Read by executors that run
/// commands somewhere other than this host's process table (a container, a cluster);
/// Process::start ignores it, and so does the local executor.
struct CommandPlacement {
  enum class Where {
    server,  ///< on the server's host whatever the executor: commands that only touch files
    build,   ///< the cell's toolchain: checks, its environment, the build
    test,    ///< the smoke test (a GPU)
  };
  Where where = Where::server;
  std::int64_t job_id = 0;
  std::string job_tag;             ///< WHEELFORGE_JOB's value (<builds dir>#<job id>)
  std::filesystem::path work_dir;  ///< the job's work directory (DATA_DIR/builds/job-<id>)
  std::filesystem::path log;       ///< the job's log, for the executor's own notes
  std::filesystem::path envs_dir;  ///< where build environments live (DATA_DIR/builds/envs)
  /// The pip cache the install commands use (DATA_DIR/builds/pip-cache); empty: none.
  std::filesystem::path pip_cache;
  /// The recipe's compile cache directory its build uses (mounted read-write into containers
  /// at the same path); empty: none.
  std::filesystem::path compile_cache;
  std::string python;  ///< the cell's Python ("3.12")
  std::string cuda;    ///< the cell's CUDA ("12.8")
  /// What the job may use: the admission grant (limits of a container) or what its batch jobs
  /// ask a cluster for. 0: not set.
  std::uint64_t memory_bytes = 0;
  unsigned cpus = 0;
  /// On the build command only.
  std::optional<BuildSizing> sizing;
  /// What becomes of the command when the server stops or dies while it runs.
  enum class Lifetime {
    server,    ///< it ends with the server (cancelled when the server stops)
    detached,  ///< it goes on, and a restarted server re-attaches to it (the build)
  };
  Lifetime lifetime = Lifetime::server;
};

/// "server", "build" or "test".
[[nodiscard]] std::string_view where_name(CommandPlacement::Where where);

struct ProcessSpec {
  /// argv[0] is the program: a path (relative ones are taken from `cwd`), or a bare name looked
  /// up in the PATH of `env` (not the server's PATH). Empty PATH entries are ignored.
  std::vector<std::string> argv;
  /// The complete environment of the child: nothing is inherited from the server.
  std::vector<std::pair<std::string, std::string>> env;
  /// Working directory of the child; empty keeps the server's working directory.
  std::filesystem::path cwd;
  /// stdout and stderr are appended here (created 0640 if missing; the directory must exist).
  std::filesystem::path log_file;
  /// Wall-clock limit from start(); 0 means none.
  std::chrono::milliseconds timeout{0};
  /// Time between SIGTERM and SIGKILL on cancellation or timeout.
  std::chrono::milliseconds kill_grace{kDefaultKillGrace};
  /// For executors (see CommandPlacement); Process::start ignores it.
  CommandPlacement placement;
};

struct ExitStatus {
  bool exited = false;  ///< the leader called exit(); `code` is valid
  int code = 0;         ///< exit code when `exited`
  int signal = 0;       ///< terminating signal when !exited (0 if unknown)
  bool timed_out = false;
  bool cancelled = false;
  std::chrono::milliseconds timeout{0};  ///< the limit that was exceeded, when timed_out
  /// What an executor knows beyond the status ("Slurm job 12: OUT_OF_MEMORY"); empty for
  /// local processes.
  std::string note;

  /// True for exit 0 without timeout or cancellation.
  [[nodiscard]] bool success() const { return exited && code == 0 && !timed_out && !cancelled; }
  /// For logs and job records: "exit 137", "killed by SIGKILL", "timed out after 5s",
  /// "cancelled". Cancellation and timeout take precedence over how the leader died. A note
  /// follows in parentheses; when nothing else is known, the note alone.
  [[nodiscard]] std::string describe() const;
};

/// One running (or finished) process group. Move-only; not thread-safe: one owner drives it.
class Process {
 public:
  /// Starts spec.argv in a new session and process group whose id is the child's pid (no
  /// controlling terminal: a tool that would prompt on one fails instead), stdin from
  /// /dev/null, stdout and stderr appended to spec.log_file, exactly spec.env, spec.cwd, every
  /// signal at its default disposition and unblocked (except glibc's two reserved signals 32
  /// and 33, which its posix_spawn leaves ignored), no descriptor inherited beyond 0-2.
  /// Does not block beyond the exec itself.
  /// Fails with: invalid (empty argv, no log file, malformed environment entry, a program that
  /// is not executable), not_found (program or working directory missing), io / storage_full
  /// (the log cannot be opened), unavailable (fork limits), internal (anything else).
  [[nodiscard]] static Result<Process> start(const ProcessSpec& spec);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  /// If the group is still running: SIGKILL to the group and reap the leader (blocks briefly).
  ~Process();

  /// The leader's pid, which is also the process group id.
  [[nodiscard]] pid_t pid() const { return pid_; }

  /// Non-blocking. Returns the status once the process is finished, nullopt while it runs.
  /// Enforces the timeout (SIGTERM to the group, SIGKILL after the grace) and escalates a
  /// cancellation whose grace has run out. When the leader exits by itself, the rest of its
  /// group is SIGKILLed at once. After a cancellation or timeout, "finished" means the leader is
  /// reaped and nothing alive is left in the group (or SIGKILL has been sent to it).
  /// Once finished, every further call returns the same status.
  [[nodiscard]] std::optional<ExitStatus> poll();

  /// Blocks until poll() would return a status, and returns it.
  ExitStatus wait();

  /// Asks the group to stop: SIGTERM to every member now, SIGKILL once the grace has passed
  /// if anything in the group is still alive (the escalation happens in poll() / wait()).
  /// Non-blocking. No effect once finished or when termination is already under way.
  void cancel();

  /// Sends `sig` to every member of the group. No effect once finished.
  void kill_group(int sig);

  /// Stops owning the group: it goes on running, the destructor leaves it alone and poll()
  /// reports nothing any more. The leader is not reaped here (whoever inherits it when this
  /// process ends does). For commands that outlive the server (detached.hpp).
  void disown();

  [[nodiscard]] bool timed_out() const { return timed_out_; }
  [[nodiscard]] bool cancelled() const { return cancelled_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class State { running, terminating, finished };

  Process() = default;
  void begin_termination();
  [[nodiscard]] bool leader_exited();
  void reap_leader() noexcept;
  ExitStatus finish();
  void kill_now() noexcept;

  pid_t pid_ = -1;
  State state_ = State::finished;
  bool leader_reaped_ = false;
  int leader_wait_status_ = 0;
  bool leader_lost_ = false;  // reaped by someone else: the exit status is unknown
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool sigkill_sent_ = false;
  std::chrono::milliseconds timeout_{0};
  std::chrono::milliseconds grace_{kDefaultKillGrace};
  std::optional<Clock::time_point> deadline_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<ExitStatus> status_;
};

/// Starts the process and polls it every `poll_interval` until it is finished, enforcing the
/// timeout and cancelling the group as soon as should_cancel() returns true (should_cancel may
/// be empty). Blocks for the whole run. Fails only when start() fails (same errors); a process
/// that ran and failed is a successful Result holding its ExitStatus.
[[nodiscard]] Result<ExitStatus> run_to_completion(
    const ProcessSpec& spec, const std::function<bool()>& should_cancel,
    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));

/// The last max_bytes of a log file (the whole file if it is shorter), starting at a UTF-8
/// character boundary. Empty if the file is missing or unreadable.
[[nodiscard]] std::string read_log_tail(const std::filesystem::path& path, std::size_t max_bytes);
/// The same, setting `offset` to where the returned bytes start in the file (0 when missing).
[[nodiscard]] std::string read_log_tail(const std::filesystem::path& path, std::size_t max_bytes,
                                        std::uint64_t& offset);

/// The program spec.argv[0] names, as Process::start() finds it: a path (relative ones from
/// spec.cwd), or a bare name looked up in the PATH of spec.env. Fails with not_found or
/// invalid naming the program (as Process::start does).
[[nodiscard]] Result<std::filesystem::path> resolve_program(const ProcessSpec& spec);

/// True while some member of the process group `pgid` can still run (zombies do not count).
[[nodiscard]] bool group_has_live_members(pid_t pgid) noexcept;

/// When the process `pid` started (in clock ticks after boot, /proc/PID/stat), so that a pid
/// read from a file can be checked to still name the same process; nullopt when there is no
/// such process or it is a zombie.
[[nodiscard]] std::optional<std::uint64_t> process_start_ticks(pid_t pid);

/// Sends SIGKILL to every process whose environment holds the entry `entry` (such as
/// "WHEELFORGE_JOB=/var/lib/wheelforge/builds#7") and returns how many it reached. Blocks
/// while it reads /proc.
int kill_processes_with_env(std::string_view entry);

/// PATH=/usr/local/bin:/usr/bin:/bin, HOME (the server's, or /tmp), LANG=C.UTF-8: the base
/// that the runner adds its own variables to.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> minimal_environment();

/// Memory a build may use now: MemAvailable from /proc/meminfo, lowered to the headroom under
/// the memory.max of our cgroup (v2) and its ancestors where one is set. 0 if unknown.
[[nodiscard]] std::uint64_t available_memory_bytes();

/// CPUs this process may run on (sched_getaffinity); hardware_concurrency if that fails.
/// At least 1.
[[nodiscard]] unsigned available_cores();

}  // namespace wf::build
