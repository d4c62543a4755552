#pragma once
// The build runner: turns a build request (recipe × matrix subset) into persisted jobs and runs
// each job as a list of named steps (see src/build/steps.hpp): verify the CUDA toolkit,
// prepare the (python, torch, CUDA) environment, verify torch and Python, fetch the source,
// build, retag, analyze the binaries (manylinux tag), number the build (rebuilds get the next
// build tag), smoke-test, ingest. Memory-aware parallelism shared by every runner on the
// data directory, OOM retries, timeouts and cancellation that kill whole process trees, and
// crash recovery. Commands run on an Executor the runner is given. Jobs run on the runner's own
// threads; every public method is thread-safe and returns quickly (none waits for a build).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "wheelforge/auth/attestation.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/executor_config.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/build.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"

namespace wf::build {

class AdmissionLedger;
struct Demand;
struct AdmissionLimits;
struct JobContext;
struct JobResources;

/// A recipe and the matrix it is built over.
struct RecipeConfig {
  core::Recipe recipe;
  core::Matrix matrix;
};

/// What the build host offers.
struct HostConfig {
  /// Where the commands run ([build.executor], [build.images]). With containers or a
  /// cluster, cuda_homes and pythons name paths inside the images or on the nodes.
  ExecutorConfig executor;
  /// CUDA version ("13.0") -> toolkit directory (CUDA_HOME). Before a cell is built, its
  /// bin/nvcc must report exactly this version.
  std::map<std::string, std::filesystem::path> cuda_homes;
  /// Python version ("3.12") -> interpreter; it must report this major.minor.
  std::map<std::string, std::filesystem::path> pythons;
  /// Where torch and the build requirements are installed from. Placeholders: {server} (this
  /// server's URL), {cuda} ("cu130"), {torch} ("2.8"). The default uses this server's own
  /// variant views, so the torch wheels it holds are found for the right CUDA (and pure-Python
  /// wheels such as setuptools are listed in every view).
  std::string torch_index = "{server}/{cuda}/torch{torch}/simple/";
  /// Use the torch already installed for each configured interpreter (environments see the
  /// interpreter's site-packages and torch is not installed into them) instead of installing
  /// it from torch_index: for hosts and images that come with their torch. The installed torch
  /// must be of the cell's series and CUDA major.
  bool system_torch = false;
  /// Memory kept back from builds for the host and the server.
  std::uint64_t memory_reserve_bytes = 2ULL << 30U;
  /// Jobs running at once on this data directory (every runner on it counts); 0: as many as
  /// the memory and core budget admits.
  unsigned max_concurrent_jobs = 0;
  /// Work directories (DATA_DIR/builds/job-<id>/): a succeeded job keeps only its log; a
  /// failed one keeps its sources, outputs and environments for inspection unless this is
  /// false. Logs are always kept.
  bool keep_failed_work_dirs = true;
  /// How many times a build killed by the OOM killer is retried with half the parallelism.
  int oom_retries = 2;
  /// The most disk the pip cache of build environments (DATA_DIR/builds/pip-cache) may take
  /// before the least recently used files go (after each job, and by `wheelforge gc`); 0: no
  /// cache, every install downloads again.
  std::uint64_t pip_cache_bytes = 20ULL << 30U;
  /// `[build] compile_cache`: builds compile through ccache (docs/runner.md, "The compile
  /// cache") in compile_cache_root/<recipe>; an empty root means DATA_DIR/builds/ccache.
  enum class CompileCache { on, off };
  CompileCache compile_cache = CompileCache::on;
  std::filesystem::path compile_cache_root;
  /// The most disk each recipe's compile cache may take (ccache's max_size).
  std::uint64_t compile_cache_bytes = 10ULL << 30U;
  /// `[build] lease`: how long a runner's claim on a running job holds without its heartbeat
  /// (renewed every third of it). A job whose lease has passed (its runner died or lost the
  /// database) is taken over by another runner and started over.
  std::chrono::seconds lease{60};
  /// `[build] run_jobs`: whether a server runs jobs from the queue (`wheelforge runner` always
  /// does). A server that does not accepts build requests, cancels and retries jobs and serves
  /// what they published; runners on other hosts run them.
  enum class RunJobs { yes, no };
  RunJobs run_jobs = RunJobs::yes;
};

struct RunnerConfig {
  HostConfig host;
  std::map<std::string, RecipeConfig> recipes;
};

/// What each build batch job of `recipe` asks a cluster for before it is fitted to the nodes
/// (Executor::fit_request): the recipe's `cpus` (else the executor's default) and gb_per_job
/// GiB for each, in whole MiB.
[[nodiscard]] ResourceRequest cluster_request(const core::Recipe& recipe, const Executor& executor);

class Runner {
 public:
  /// Commands run on `executor`, which must outlive the runner. `on_ingested` is called (on a
  /// runner thread) after a wheel was ingested.
  Runner(RunnerConfig config, Executor& executor, catalog::JobStore& jobs,
         catalog::Catalog& catalog, store::BlobStore& store, ingest::Ingestor& ingestor,
         const std::filesystem::path& data_dir, std::function<void()> on_ingested = {});
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  ~Runner();

  /// The URL {server} stands for in torch_index (e.g. "http://127.0.0.1:8080").
  void set_server_url(std::string url);
  /// What signs the provenance of the wheels the runner ingests (docs/runner.md, "Provenance");
  /// without one (the default), they are ingested without provenance.
  void set_signer(std::shared_ptr<const auth::BuildSigner> signer);

  /// Who claims jobs in the job store: "HOST:PID:BUILDS_DIR" (JobRecord::claimed_by). Runners
  /// of one HOST and BUILDS_DIR share a data directory (and its admission ledger).
  [[nodiscard]] const std::string& id() const { return id_; }

  /// Replaces the recipes (a configuration reload): builds submitted from now on and jobs that
  /// start from now on use them; running jobs keep the recipe they started with, and queued
  /// jobs of a recipe that is gone fail when they would start.
  void set_recipes(std::map<std::string, RecipeConfig> recipes);

  enum class Recovery {
    requeue_interrupted,  ///< the data directory's server: take over jobs a dead one left
    leave,                ///< a one-off runner (`wheelforge build`): touch no other job
  };
  /// Starts scheduling; with Recovery::requeue_interrupted, first takes over the jobs a
  /// previous process left running, except those that a live runner on the same data
  /// directory still runs: on an executor that re-attaches, a job that got as far as its
  /// build resumes there (attaching to the build that still runs or ended meanwhile: its
  /// supervised process, container or batch job); the others are requeued (their leftover
  /// processes, batch jobs and containers ended). Fails when the builds directory
  /// cannot be created or its admission ledger (DATA_DIR/builds/admission) cannot be opened.
  [[nodiscard]] Status start(Recovery recovery = Recovery::requeue_interrupted);

  /// Runs only the jobs of this build (a one-off runner next to a serving one), and tells the
  /// other runners on the data directory to leave them alone while this process lives. Call
  /// before start().
  void restrict_to_build(std::int64_t build_id) { only_build_ = build_id; }
  /// submit() and restrict_to_build() in one, for a one-off runner (`wheelforge build`): the
  /// build is reserved for this runner in the same moment its jobs appear, so a serving runner
  /// on the data directory never starts one of them. Also fails (io) when the admission ledger
  /// cannot be opened. Call before start().
  [[nodiscard]] Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> submit_own(
      const core::BuildRequest& request);
  /// Stops scheduling and blocks until the job threads have ended. A server's runner
  /// (Recovery::requeue_interrupted) leaves the builds of its executor running (every executor
  /// but a test's fake re-attaches: Executor::reattaches) and their jobs in their state, for
  /// the next start() to resume; whatever else runs is cancelled and its job left to be
  /// requeued. A one-off runner cancels everything.
  void stop();

  /// A stop that loses no work: starts no further queued job (they stay queued for the next
  /// start) and blocks until every running job has ended. Returns false when stop() ended the
  /// wait first. Call stop() afterwards.
  bool drain();
  /// Jobs running now.
  [[nodiscard]] std::size_t running_jobs() const;

  /// Validates the request (unknown recipe, invalid version or matrix subset: Errc::invalid
  /// with every reason) and records a build with one queued job per cell still to build
  /// (cells already built are skipped unless forced). When every cell is built and the request
  /// is not forced, records nothing and fails with Errc::conflict "all cells built; use force
  /// to rebuild (...)". The build yanks superseded builds as the request says, else as the
  /// recipe says.
  [[nodiscard]] Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> submit(
      const core::BuildRequest& request);
  /// Cancels a queued or running job (a running one's process tree is killed; a job another
  /// runner runs is marked cancelled, and that runner ends its commands at its next
  /// heartbeat).
  [[nodiscard]] Result<catalog::JobRecord> cancel(std::int64_t job_id);
  /// Queues a failed, cancelled or interrupted job again.
  [[nodiscard]] Result<catalog::JobRecord> retry(std::int64_t job_id);

  /// What the compile cache did for a job's build (its work directory's compile-cache.txt);
  /// nullopt before its build step ran.
  [[nodiscard]] std::optional<catalog::CompileCacheStats> compile_cache_stats(
      std::int64_t job_id) const;
  /// Compiles answered from the compile cache and compiles that missed, by the jobs this
  /// runner finished since it was made, and the latest size seen of each recipe's cache.
  struct CompileCacheTotals {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::map<std::string, std::uint64_t> size_bytes;  ///< by recipe
  };
  [[nodiscard]] CompileCacheTotals compile_cache_totals() const;

  /// The persisted builds and jobs.
  [[nodiscard]] catalog::JobStore& jobs() { return jobs_; }

  /// The job's log file (it may not exist yet).
  [[nodiscard]] std::filesystem::path log_path(std::int64_t job_id) const;
  /// Up to `max` bytes of the job's log from `offset`, through the executor; empty when there
  /// is no more (or no log). URL userinfo and registered secrets are masked (util/redact.hpp;
  /// the length is kept, so offsets stay those of the file). Blocks on file I/O.
  [[nodiscard]] std::string read_log(std::int64_t job_id, std::uint64_t offset, std::size_t max);
  /// The last `max` bytes of the job's log, through the executor, and where they start;
  /// masked as read_log() masks.
  [[nodiscard]] LogChunk read_log_tail(std::int64_t job_id, std::size_t max);

  /// A copy of the configuration (recipes as of the last set_recipes).
  [[nodiscard]] RunnerConfig config() const;

 private:
  struct Running;
  [[nodiscard]] Status open_ledger();
  [[nodiscard]] std::string job_tag(std::int64_t job_id) const;
  int kill_job_processes(std::int64_t job_id) const;
  void schedule_loop();
  /// Renews the leases of the jobs this runner runs (ending those cancelled elsewhere or lost
  /// to another runner) and takes over jobs whose lease has passed, every third of a lease.
  void heartbeat_loop();
  void take_over_expired();
  [[nodiscard]] std::chrono::milliseconds heartbeat_interval() const;
  [[nodiscard]] Micros lease_until() const;
  /// True when `runner` (a claimed_by) is a runner of this host and data directory.
  [[nodiscard]] bool same_home(const std::string& runner) const;
  bool try_start(const catalog::JobRecord& job, const RecipeConfig& recipe);
  void run_job(catalog::JobRecord job, RecipeConfig recipe, core::Parallelism grant, bool resumed);
  [[nodiscard]] Demand demand_of(const catalog::JobRecord& job, const RecipeConfig& recipe) const;
  [[nodiscard]] JobResources cluster_resources(const RecipeConfig& recipe) const;
  [[nodiscard]] AdmissionLimits admission_limits(unsigned max_concurrent) const;
  [[nodiscard]] CommandPlacement job_placement(const catalog::JobRecord& job) const;
  void finish_job(JobContext& ctx, const Status& result);
  /// Writes a job's final state (with `reason` when not empty), retrying while the job store
  /// is unavailable (unless the server is stopping: the next start requeues the job); logs what
  /// could not be written.
  void settle(const JobContext& ctx, core::JobState to, const std::string& reason);

  RunnerConfig config_;
  CompileCacheTotals compile_cache_totals_;  // guarded by mu_
  Executor& executor_;
  catalog::JobStore& jobs_;
  catalog::Catalog& catalog_;
  store::BlobStore& store_;
  ingest::Ingestor& ingestor_;
  std::filesystem::path builds_dir_;
  std::function<void()> on_ingested_;
  std::unique_ptr<AdmissionLedger> ledger_;

  mutable std::mutex
      mu_;  // guards config_.recipes, server_url_, signer_, running_, stopping_, draining_
  std::condition_variable cv_;
  bool stopping_ = false;
  bool draining_ = false;
  Recovery recovery_ = Recovery::requeue_interrupted;
  std::string server_url_;
  std::shared_ptr<const auth::BuildSigner> signer_;
  std::map<std::int64_t, std::shared_ptr<Running>> running_;
  std::thread scheduler_;
  std::thread heartbeat_;
  std::string id_;    // id()
  std::string home_;  // HOST:BUILDS_DIR
  std::vector<std::thread> job_threads_;
  std::optional<std::int64_t> only_build_;
  bool only_build_reserved_ = false;
  std::set<std::int64_t> waiting_noted_;  // queued jobs whose log says they wait for the budget
};

}  // namespace wf::build
