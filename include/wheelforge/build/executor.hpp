#pragma once
// Where a build step's command runs. The runner only talks to this interface; the local
// executor runs commands as processes on this host (own process group, explicit environment);
// the container executor runs each in a container of the cell's image (podman or docker); the
// Slurm executor runs a job's commands in batch jobs on a cluster, optionally in containers
// there. Tests use a fake that records every command and plays back scripted outcomes.
// A command's ProcessSpec::placement says which job it belongs to and where it belongs
// (server, build, test); the local executor ignores it.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/build/executor_config.hpp"
#include "wheelforge/build/process.hpp"
#include "wheelforge/catalog/jobs.hpp"
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
  /// The id of the batch job the command runs in (a Slurm job id), for the job record; empty
  /// for commands of this host.
  [[nodiscard]] virtual std::string remote_id() const { return {}; }
  /// True when the command goes on running once its watcher is gone (a server that stops or
  /// dies), for the executor's reattach() to find: the build of an executor that re-attaches.
  /// Destroying such an execution leaves the command running.
  [[nodiscard]] virtual bool detached() const { return false; }
  /// What ran the command beyond its argv, for the job record: the container image (and its
  /// digest) and the engine's command line; nullopt for commands that run directly on a host.
  [[nodiscard]] virtual std::optional<catalog::Provenance> provenance() const {
    return std::nullopt;
  }
};

/// What a build job asks a cluster for (Admission::cluster): CPUs and memory of one batch job.
struct ResourceRequest {
  unsigned cpus = 1;
  std::uint64_t memory_bytes = 0;
  /// Where the figures come from: the recipe's own `cpus` (a demand no node holds is refused)
  /// or the executor's default (lowered to what a node holds).
  enum class Source { recipe, defaults };
  Source source = Source::defaults;
  friend bool operator==(const ResourceRequest&, const ResourceRequest&) = default;
};

/// A request fitted to a cluster's nodes, and what the fitting found (for the job's log).
struct FittedRequest {
  ResourceRequest request;
  std::string note;  ///< what was lowered and why, or why nothing could be checked; may be empty
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

  /// How the runner admits jobs to this executor.
  enum class Admission {
    host,     ///< by the budget of this host's memory and cores (the shared admission ledger)
    cluster,  ///< by max_concurrent_jobs only: a cluster's scheduler places and sizes jobs
  };
  [[nodiscard]] virtual Admission admission() const { return Admission::host; }
  /// CPUs a job asks a cluster for when its recipe names none (Admission::cluster).
  [[nodiscard]] virtual unsigned default_cpus() const { return 4; }
  /// `request` fitted to the nodes the build jobs run on (Admission::cluster): a default
  /// request is lowered to what the node that holds most of it offers (CPUs first, then memory
  /// in proportion); a recipe's own request that no node holds fails with invalid, naming what
  /// was asked and the largest nodes. When the nodes cannot be read, the request stands (the
  /// note says why). Blocks on the cluster's client. Default: the request unchanged.
  [[nodiscard]] virtual Result<FittedRequest> fit_request(const ResourceRequest& request);
  /// True when commands go on running while the server is down, and reattach() finds them:
  /// the detached ones (CommandPlacement::Lifetime::detached, the build) on this host and in
  /// containers, every one on a cluster.
  [[nodiscard]] virtual bool reattaches() const { return false; }
  /// Attaches to the command `spec` as an earlier process started it for the same job (same
  /// command line, environment and directory): still running, or ended while no server
  /// watched (poll() then reports how). Fails with not_found when there is none to attach to
  /// (the caller starts it anew). Default: not_found.
  [[nodiscard]] virtual Result<std::unique_ptr<Execution>> reattach(const ProcessSpec& spec);
  enum class Release {
    finished,   ///< the job is over: what waits for more commands ends by itself
    abandoned,  ///< the job's work is discarded (it runs again from the start): ended now
  };
  /// Ends what the executor still holds for the job `job` names (job_id, job_tag, work_dir):
  /// batch jobs waiting for commands, containers left by a server that died. Blocks on the
  /// cluster's or engine's client. Default: nothing.
  virtual void release(const CommandPlacement& job, Release how);
  /// What can be checked before jobs run (`wheelforge config check`): for a cluster, that a
  /// batch job of the size `probe` (what build jobs ask for) starts and sees a file the server
  /// writes into `builds_dir` (made absolute); for containers, that the engine answers and the
  /// images exist. Blocks up to about `limit`. Returns the problems found, and in `notes` what
  /// was checked.
  [[nodiscard]] virtual std::vector<std::string> check(const std::filesystem::path& builds_dir,
                                                       const ResourceRequest& probe,
                                                       std::chrono::seconds limit,
                                                       std::vector<std::string>& notes);
};

/// Runs commands as local processes; capacity() is available_memory_bytes() and
/// available_cores(). A detached command (the build) runs under a supervisor that records how
/// it ended, so that a restarted server re-attaches to it (src/build/detached.hpp).
[[nodiscard]] std::unique_ptr<Executor> make_local_executor();

/// The executor `config` describes: local, containers (podman/docker) or Slurm.
[[nodiscard]] std::unique_ptr<Executor> make_executor(const ExecutorConfig& config);

/// Starts a command on `executor` and waits for it, cancelling it when `should_cancel` says so.
[[nodiscard]] Result<ExitStatus> run_on(
    Executor& executor, const ProcessSpec& spec, const std::function<bool()>& should_cancel,
    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));

}  // namespace wf::build
