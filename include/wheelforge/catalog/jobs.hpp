#pragma once
// Builds and jobs of the build runner, persisted in the catalog database (tables created by
// the catalog's migration 4). Every state change is written before the step it names runs,
// so that after a crash the store says exactly which jobs were in flight.
// All methods block on SQLite: call from worker or runner threads. Thread-safe.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/build.hpp"
#include "wheelforge/util/result.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::catalog {

struct BuildRecord {
  std::int64_t id = 0;
  std::string recipe;
  std::string version;
  bool force = false;
  /// A job that publishes a rebuild (a higher build number) yanks the builds it supersedes.
  bool yank_superseded = false;
  Micros created_at = 0;
};

/// The toolchain a job's build actually used, as the runner verified it before building
/// (empty fields: not verified yet, or the job ran before this was recorded).
struct Toolchain {
  std::string nvcc;            ///< path of the nvcc that was run
  std::string nvcc_version;    ///< what it reported, e.g. "13.0.48"
  std::string torch_version;   ///< torch.__version__ in the build environment
  std::string torch_cuda;      ///< torch.version.cuda ("13.0")
  std::string python;          ///< the configured interpreter the environment was made from
  std::string python_version;  ///< e.g. "3.12.1"
  friend bool operator==(const Toolchain&, const Toolchain&) = default;
};

/// What ran a job's build command when it ran in a container: the image as configured, its
/// digest as the engine reported it (the repository digest, else the image id; empty when the
/// engine reported none), and the engine's command line (values of variables that look like
/// secrets masked). Empty for builds that ran directly on a host.
struct Provenance {
  std::string image;
  std::string image_digest;
  std::string engine_command;
  friend bool operator==(const Provenance&, const Provenance&) = default;
};

/// What the compile cache did for a job's build (`[build] compile_cache`, docs/runner.md "The
/// compile cache"). Not kept in the job store: the runner writes it into the job's work
/// directory (compile-cache.txt, which outlives the job's cleanup) and reads it from there.
struct CompileCacheStats {
  enum class State {
    used,         ///< the build compiled through the cache
    off,          ///< turned off ([build], the recipe or the request)
    unavailable,  ///< it could not be used (ccache missing, the directory unwritable, ...)
  };
  State state = State::used;
  std::string reason;             ///< why it was off or unavailable
  std::string directory;          ///< the recipe's cache directory
  std::uint64_t hits = 0;         ///< compiles answered from the cache
  std::uint64_t misses = 0;       ///< compiles that ran and were stored
  std::uint64_t uncacheable = 0;  ///< compiler calls the cache passed through (links, ...)
  std::uint64_t cuda_hits = 0;    ///< ... of which .cu sources (nvcc)
  std::uint64_t cuda_misses = 0;
  std::uint64_t size_bytes = 0;   ///< the cache directory's size after the build
  std::uint64_t bound_bytes = 0;  ///< its bound (`[build] compile_cache_size`)
  friend bool operator==(const CompileCacheStats&, const CompileCacheStats&) = default;
};

struct JobRecord {
  std::int64_t id = 0;
  std::int64_t build_id = 0;
  std::string recipe;
  std::string version;
  core::Cell cell;
  core::JobState state = core::JobState::queued;
  std::string reason;  ///< why it failed, was cancelled or retried
  int attempts = 0;    ///< build attempts so far (OOM retries count)
  unsigned max_jobs = 0;
  unsigned nvcc_threads = 0;
  std::string wheel;  ///< file name of the ingested wheel, when succeeded
  /// The wheel's build number: 0 for the first build of its file name, N for the Nth
  /// rebuild (`-N-` in the name). Meaningful once `wheel` is set.
  std::uint64_t build_number = 0;
  /// The highest GLIBC_x.y its binaries need ("2.34"); empty for a wheel without binaries, one
  /// that needs no GLIBC version, or before the analysis.
  std::string glibc_floor;
  Toolchain toolchain;
  /// The batch job the job's commands run in now, on executors that run them elsewhere (a
  /// Slurm job id); empty otherwise. A restarted server re-attaches through it.
  std::string executor_job;
  Provenance provenance;
  /// Not a column of the job store: filled in by readers that want it (the admin API) through
  /// build::Runner::compile_cache_stats.
  std::optional<CompileCacheStats> compile_cache;
  Micros created_at = 0;
  std::optional<Micros> started_at;
  std::optional<Micros> finished_at;
  /// The runner that claimed the job (build::Runner::id(), "HOST:PID:BUILDS_DIR"); empty while
  /// it is queued, and for jobs claimed before claims were recorded. Kept once the job ended.
  std::string claimed_by;
  /// Until when the claim holds unless its runner renews it (its heartbeat); once it has
  /// passed, another runner takes the job over. nullopt when the job is not running.
  std::optional<Micros> lease_expires_at;
};

/// What renewing a lease found (JobStore::renew_lease).
enum class Lease {
  held,       ///< renewed: the job is still the runner's and still running
  cancelled,  ///< the job was cancelled meanwhile (through any replica): end its commands
  lost,       ///< the job is no longer the runner's (taken over after its lease ran out)
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  /// Records a build and one queued job per cell, in one transaction.
  [[nodiscard]] virtual Result<std::pair<BuildRecord, std::vector<JobRecord>>> create_build(
      const BuildRecord& build, const std::vector<core::Cell>& cells) = 0;

  [[nodiscard]] virtual Result<std::vector<BuildRecord>> list_builds(std::size_t limit) = 0;
  [[nodiscard]] virtual Result<std::optional<BuildRecord>> find_build(std::int64_t id) = 0;
  [[nodiscard]] virtual Result<std::vector<JobRecord>> jobs_of_build(std::int64_t build_id) = 0;
  [[nodiscard]] virtual Result<std::optional<JobRecord>> find_job(std::int64_t id) = 0;
  /// Jobs in the given state, oldest first.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> jobs_in_state(core::JobState state) = 0;

  /// Moves a job to `to` if core::can_transition(current, to); records reason, parallelism and
  /// timestamps. Errc::conflict when the transition is not allowed from the stored state.
  [[nodiscard]] virtual Result<JobRecord> transition(std::int64_t id, core::JobState to,
                                                     const std::string& reason = {}) = 0;
  /// transition(), only while `runner` holds the job's claim (JobRecord::claimed_by; a job
  /// without one is anybody's): Errc::conflict when another runner holds it (this one lost it
  /// when its lease ran out) or when the transition is not allowed.
  [[nodiscard]] virtual Result<JobRecord> transition_as(const std::string& runner, std::int64_t id,
                                                        core::JobState to,
                                                        const std::string& reason = {}) = 0;

  /// Claims a queued job for `runner` until `lease_until`: it becomes preparing (started_at
  /// set). Of several runners claiming one job, exactly one gets it; the others, and a claim of
  /// a job that is no longer queued, get nullopt. On PostgreSQL the row is taken with
  /// `FOR UPDATE SKIP LOCKED` in one statement, without the catalog's write lock.
  [[nodiscard]] virtual Result<std::optional<JobRecord>> claim(std::int64_t id,
                                                               const std::string& runner,
                                                               Micros lease_until) = 0;
  /// The heartbeat of a running job: extends `runner`'s lease to `lease_until` and says
  /// whether the job is still the runner's (Lease).
  [[nodiscard]] virtual Result<Lease> renew_lease(std::int64_t id, const std::string& runner,
                                                  Micros lease_until) = 0;
  /// Makes `runner` the holder of a running job whatever held it (a restarted server resuming
  /// the jobs of its own data directory).
  [[nodiscard]] virtual Status adopt(std::int64_t id, const std::string& runner,
                                     Micros lease_until) = 0;
  /// Take-over: every job in a running state whose lease ran out before `now` (its runner
  /// died or lost the database) is queued again, its claim dropped and its reason naming the
  /// runner that held it. Returns those jobs as they were (claimed_by: the runner that lost
  /// them). Rows another runner is taking over at the same moment are skipped.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> requeue_expired(Micros now) = 0;

  /// Records the parallelism of the attempt about to run and counts the attempt.
  [[nodiscard]] virtual Status record_attempt(std::int64_t id, unsigned max_jobs,
                                              unsigned nvcc_threads) = 0;
  /// Records the published wheel (or the identical one already published) and its build number.
  [[nodiscard]] virtual Status record_wheel(std::int64_t id, const std::string& wheel,
                                            std::uint64_t build_number) = 0;
  /// Records the glibc floor the analysis of the job's wheel found.
  [[nodiscard]] virtual Status record_glibc_floor(std::int64_t id,
                                                  const std::string& glibc_floor) = 0;
  /// Records the toolchain the job's build uses (replacing what an earlier attempt recorded).
  [[nodiscard]] virtual Status record_toolchain(std::int64_t id, const Toolchain& toolchain) = 0;
  /// Records the batch job the job's commands run in now (JobRecord::executor_job).
  [[nodiscard]] virtual Status record_executor_job(std::int64_t id,
                                                   const std::string& executor_job) = 0;
  /// Records what ran the job's build command (replacing what an earlier attempt recorded).
  [[nodiscard]] virtual Status record_provenance(std::int64_t id, const Provenance& provenance) = 0;

  /// Startup recovery: every job in a running state becomes interrupted, then queued again,
  /// except the jobs in `still_running` (another live process runs them). Returns the
  /// requeued jobs.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> requeue_interrupted(
      const std::set<std::int64_t>& still_running) = 0;

  /// True when a succeeded job already built this (recipe, version, cell).
  [[nodiscard]] virtual Result<bool> cell_built(const std::string& recipe,
                                                const std::string& version,
                                                const core::Cell& cell) = 0;
};

/// Opens the job store on the catalog database (which open_sqlite_catalog has migrated).
[[nodiscard]] Result<std::unique_ptr<JobStore>> open_sqlite_job_store(
    const std::filesystem::path& db_path);

/// Opens the job store on a PostgreSQL catalog database (migrating it when needed).
[[nodiscard]] Result<std::unique_ptr<JobStore>> open_postgres_job_store(std::string_view uri);

/// Opens the job store on the catalog a location names (open_catalog's locations).
[[nodiscard]] Result<std::unique_ptr<JobStore>> open_job_store(
    std::string_view location, const std::filesystem::path& data_dir);

}  // namespace wf::catalog
