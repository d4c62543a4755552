#pragma once
// What the steps of one job share: the job and the configuration it started with, the
// services it may use, the paths and environment of its work, and what earlier steps found.
// A job context lives on its job's thread; only `cancel` and `interrupted` are touched by
// other threads.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/archive/retag.hpp"
#include "wheelforge/auth/attestation.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/build.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"

namespace wf::build {

using Env = std::vector<std::pair<std::string, std::string>>;

/// Sets `key` in `env` (replacing an earlier value, keeping its position).
void set_env(Env& env, const std::string& key, std::string value);
/// `s` with every `from` replaced by `to`.
[[nodiscard]] std::string replace_all(std::string s, std::string_view from, std::string_view to);

/// The services a job uses besides its executor.
struct JobServices {
  catalog::JobStore& jobs;
  catalog::Catalog& catalog;
  store::BlobStore& store;
  ingest::Ingestor& ingestor;
  std::function<void()> on_ingested;
  /// Signs the provenance of the wheel the job ingests; null: none.
  std::shared_ptr<const auth::BuildSigner> signer;
};

/// What a job may use: the admission grant on this host, or what its batch jobs ask a cluster
/// for. Executors apply it as limits (containers) or requests (Slurm).
struct JobResources {
  unsigned cpus = 0;
  std::uint64_t memory_bytes = 0;
};

/// Set from other threads: the job is cancelled (record it cancelled) or the runner is stopping
/// (leave it resumable).
struct StopFlags {
  std::atomic<bool> cancel{false};
  std::atomic<bool> interrupted{false};
  /// The job's lease was lost (another runner took it over): its commands end (cancel is set
  /// too) and nothing more is written to its record.
  std::atomic<bool> lost{false};
};

struct JobContext {
  JobContext(catalog::JobRecord job, RecipeConfig recipe, HostConfig host, Executor& executor,
             JobServices services, const StopFlags& stop, std::filesystem::path builds_dir,
             std::string server_url, std::string job_tag, core::Parallelism grant);

  // ---- Given when the job starts
  catalog::JobRecord job;
  core::Recipe recipe;  ///< a copy: a configuration reload does not change a running job
  HostConfig host;
  Executor& executor;
  JobServices services;
  const StopFlags& stop;
  std::filesystem::path builds_dir;  ///< DATA_DIR/builds
  std::filesystem::path work_dir;    ///< DATA_DIR/builds/job-<id>
  std::filesystem::path log;         ///< work_dir/log.txt
  std::string server_url;
  /// WHEELFORGE_JOB=<builds dir>#<id>: carried by every process of the job, so that a
  /// restarted runner can find what a killed one left running.
  std::string job_tag;
  core::Parallelism parallelism;  ///< halved by OOM retries
  /// Base environment of every command: minimal_environment() plus quiet, offline pip
  /// settings (no cache), HOME in the work directory and WHEELFORGE_JOB.
  Env base_env;
  /// The pip cache the install commands share (DATA_DIR/builds/pip-cache); empty when
  /// host.pip_cache_bytes is 0.
  std::filesystem::path pip_cache;
  /// The compile cache directory a build on another machine or in an image uses (mounted into
  /// its container), set by prepare_compile_cache; empty otherwise.
  std::filesystem::path compile_cache;
  /// Shell text run before the recipe's build command (the compile cache's check where the
  /// build runs); empty: none.
  std::string build_preamble;
  std::chrono::milliseconds step_timeout{0};  ///< the recipe's timeout, per command
  JobResources resources;
  /// Where the commands of the step running now belong (run_steps sets it from the step).
  CommandPlacement::Where where = CommandPlacement::Where::server;
  /// A restarted server resumes this job (on an executor whose commands outlive the server):
  /// the steps before the build are not run again (their findings come from the checkpoint),
  /// and the build step attaches to the attempt that ran when the server went away.
  bool resume = false;
  /// Build attempts that ended before this process took the job over (resumed jobs).
  int attempts_before = 0;
  /// When the runner stops, a detached command (Execution::detached: the build) is left
  /// running for the next start to re-attach to (a server's runner); false: cancelled (a
  /// one-off runner, which nothing comes back to).
  bool leave_detached = false;
  /// The runner that holds the job's claim (Runner::id()): state changes are written only
  /// while it still holds it (JobStore::transition_as).
  std::string runner;

  // ---- Found by the steps
  std::filesystem::path python;     ///< the configured interpreter of the cell
  std::filesystem::path cuda_home;  ///< the configured toolkit of the cell
  std::string torch_index;          ///< torch_index with its placeholders filled in
  std::filesystem::path env_dir;    ///< the build environment (DATA_DIR/builds/envs/<key>)
  std::filesystem::path src;        ///< the source tree the build command runs in
  std::filesystem::path out;        ///< where the build command puts the wheel
  std::filesystem::path wheel;      ///< the built (and retagged) wheel
  catalog::Toolchain toolchain;     ///< what the verification steps found
  /// Where the source came from, for the wheel's provenance (render::BuildFacts): its URI
  /// (credentials removed) and digest ({"gitCommit", SHA}, {"sha256", HEX}; empty when none).
  std::string source_uri;
  std::pair<std::string, std::string> source_digest;
  /// What the tagging steps decided to change in the wheel (label, platform tags), written
  /// together in one rewrite.
  archive::WheelChanges changes;
  std::string glibc_floor;         ///< the highest GLIBC_x.y the wheel's binaries need
  std::uint64_t build_number = 0;  ///< the wheel's build number (0: no build tag)
  /// Set when the job has nothing left to do (its wheel is published already): the remaining
  /// steps are skipped and the job succeeds with this as its reason.
  std::optional<std::string> done_early;
  /// The last step that completed, and where in the log the build attempt running now began
  /// (both kept in the checkpoint).
  std::string completed_step;
  std::uint64_t attempt_log_offset = 0;
  /// The batch job last recorded in the job store (JobRecord::executor_job).
  mutable std::string executor_job;
  /// What ran the build placement's last command, as last recorded (JobRecord::provenance).
  mutable catalog::Provenance provenance;

  /// True once the job is cancelled or the runner is stopping.
  [[nodiscard]] bool stopped() const;
  /// Records the job's new state (Errc::unavailable "stopped" once stopped()).
  [[nodiscard]] Status advance(core::JobState to);
  /// Appends "==> <line>" to the job's log (marked so that it stands out from tool output),
  /// redacted (util/redact.hpp).
  void note(std::string_view line) const;
  /// Reports a failed write of `what` (a finding, the wheel's name, ...) to the job store: the
  /// server log and the job's log say what was not recorded and why; the build goes on (the
  /// record is informational, and the job's state is written by the runner, which retries).
  void keep(const Status& written, std::string_view what) const;
  /// The environment of a command that installs packages: base_env with the shared pip cache
  /// (PIP_CACHE_DIR) instead of none, when there is one, and the torch index trusted
  /// (PIP_TRUSTED_HOST) when it is http:// on loopback, so that pip caches what it fetches.
  [[nodiscard]] Env install_env() const;
  /// The job as executors see it, for the step running now (CommandPlacement).
  [[nodiscard]] CommandPlacement placement() const;
  /// A command of this job: `argv` in `cwd` with `env`, output appended to the log (or to
  /// `output` when given), limited by the recipe's timeout, placed where the current step's
  /// commands belong.
  [[nodiscard]] ProcessSpec command(std::vector<std::string> argv, Env env,
                                    std::filesystem::path cwd,
                                    const std::filesystem::path& output = {}) const;
  /// Runs a command on the executor to its end (cancelled when the job is stopped). Fails
  /// only when it cannot start.
  [[nodiscard]] Result<ExitStatus> run(const ProcessSpec& spec) const;
  /// Waits for a started command to end: cancels it when the job is cancelled; when the
  /// runner stops, cancels it too, unless it is detached and leave_detached is set (it is left
  /// running and reported cancelled). Records the batch job it runs in.
  [[nodiscard]] ExitStatus wait(Execution& execution) const;
  /// Writes what the steps found so far (the interpreter, toolkit, index, environment,
  /// source, output, wheel, the last completed step) into the work directory, so that a
  /// restarted server can resume the job after its build.
  [[nodiscard]] Status save_checkpoint() const;
  /// Reads them back. not_found when there is no checkpoint.
  [[nodiscard]] Status load_checkpoint();
  /// The last completed step recorded in a job's checkpoint; empty when there is none.
  [[nodiscard]] static std::string checkpointed_step(const std::filesystem::path& work_dir);
  /// Runs a step's command, noting it in the log first; a failure becomes an Error
  /// "<what> failed (<exit status>): <cause>", the cause read from the command's output by
  /// core::failure_cause.
  [[nodiscard]] Status run_checked(std::string_view what, const ProcessSpec& spec) const;
  /// ": <first line naming a cause>" in the output written to `output` since `from` (its last
  /// MiB), by core::failure_cause; empty when no line names one.
  [[nodiscard]] std::string cause(const std::filesystem::path& output, std::uint64_t from) const;
  /// "<what> failed (<status>)" with the cause found in the output written since `from`.
  [[nodiscard]] std::string failure(std::string_view what, const ExitStatus& status,
                                    const std::filesystem::path& output, std::uint64_t from) const;
  /// The size of a log or output file (0 when missing), through the executor.
  [[nodiscard]] std::uint64_t output_size(const std::filesystem::path& file) const;
  /// host.torch_index with the placeholders filled in for this cell and server.
  [[nodiscard]] std::string cell_torch_index() const;
  /// The path of the environment's (or any venv's) interpreter.
  [[nodiscard]] static std::filesystem::path venv_python(const std::filesystem::path& venv);
};

}  // namespace wf::build
