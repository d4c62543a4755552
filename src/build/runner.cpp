#include "wheelforge/build/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "admission.hpp"
#include "files.hpp"
#include "job_context.hpp"
#include "steps.hpp"
#include "units.hpp"
#include "wheelforge/build/compile_cache.hpp"
#include "wheelforge/build/pip_cache.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

struct Runner::Running {
  StopFlags stop;
  std::string share_key;  ///< compile_share_key() of its job
};

namespace {

fs::path absolute_or_same(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return ec ? p : a;
}

}  // namespace

Runner::Runner(RunnerConfig config, Executor& executor, catalog::JobStore& jobs,
               catalog::Catalog& catalog, store::BlobStore& store, ingest::Ingestor& ingestor,
               const fs::path& data_dir, std::function<void()> on_ingested)
    : config_(std::move(config)),
      executor_(executor),
      jobs_(jobs),
      catalog_(catalog),
      store_(store),
      ingestor_(ingestor),
      builds_dir_(absolute_or_same(data_dir) / "builds"),
      on_ingested_(std::move(on_ingested)) {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  const std::string name = host[0] == '\0' ? std::string("localhost") : std::string(host.data());
  home_ = name + ":" + builds_dir_.string();
  id_ = name + ":" + std::to_string(::getpid()) + ":" + builds_dir_.string();
}

bool Runner::same_home(const std::string& runner) const {
  // HOST:PID:BUILDS_DIR against HOST:BUILDS_DIR.
  const auto first = runner.find(':');
  if (first == std::string::npos) return false;
  const auto second = runner.find(':', first + 1);
  if (second == std::string::npos) return false;
  return runner.substr(0, first) + runner.substr(second) == home_;
}

Runner::~Runner() {
  stop();
}

void Runner::set_server_url(std::string url) {
  std::lock_guard lock(mu_);
  server_url_ = std::move(url);
}

void Runner::set_signer(std::shared_ptr<const auth::BuildSigner> signer) {
  std::lock_guard lock(mu_);
  signer_ = std::move(signer);
}

void Runner::set_recipes(std::map<std::string, RecipeConfig> recipes) {
  {
    std::lock_guard lock(mu_);
    config_.recipes = std::move(recipes);
  }
  cv_.notify_all();
}

RunnerConfig Runner::config() const {
  std::lock_guard lock(mu_);
  return config_;
}

fs::path Runner::log_path(std::int64_t job_id) const {
  return builds_dir_ / ("job-" + std::to_string(job_id)) / "log.txt";
}

std::string Runner::read_log(std::int64_t job_id, std::uint64_t offset, std::size_t max) {
  // A secret that crosses the window's edges is recognised in the margin around it; masking
  // keeps the length, so the window's bytes are where the reader asked for them.
  const std::size_t margin = redaction_margin();
  const std::uint64_t from = offset > margin ? offset - margin : 0;
  const auto before = static_cast<std::size_t>(offset - from);
  std::string text = executor_.read_log(log_path(job_id), from, before + max + margin);
  if (text.size() <= before) return {};
  redact_in_place(text);
  return text.substr(before, max);
}

LogChunk Runner::read_log_tail(std::int64_t job_id, std::size_t max) {
  const std::size_t margin = redaction_margin();
  LogChunk chunk = executor_.read_log_tail(log_path(job_id), max + margin);
  redact_in_place(chunk.data);
  if (chunk.data.size() > max) {
    // Back to `max` bytes, from a UTF-8 character boundary.
    std::size_t cut = chunk.data.size() - max;
    while (cut < chunk.data.size() &&
           (static_cast<unsigned char>(chunk.data[cut]) & 0xC0U) == 0x80U) {
      ++cut;
    }
    chunk.data.erase(0, cut);
    chunk.offset += cut;
  }
  return chunk;
}

namespace {

// A line in a job's log written outside its steps (by the scheduler or at startup).
void note_in_log(const fs::path& log, std::string_view line) {
  (void)make_directories(log.parent_path());
  std::ofstream out(log, std::ios::app);
  out << "==> " << redact(line) << "\n";
}

}  // namespace

Status Runner::open_ledger() {
  if (ledger_) return ok_status();
  if (auto st = make_directories(builds_dir_ / "envs"); !st) return st;
  auto ledger = AdmissionLedger::open(builds_dir_ / "admission");
  if (!ledger) return ledger.error();
  ledger_ = std::move(*ledger);
  return ok_status();
}

Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> Runner::submit_own(
    const core::BuildRequest& request) {
  if (auto st = open_ledger(); !st) return st.error();
  Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> created =
      make_error(Errc::internal, "the build was not submitted");
  auto st = ledger_->reserve_new_build([&]() -> std::optional<std::int64_t> {
    created = submit(request);
    if (!created) return std::nullopt;
    return created->first.id;
  });
  if (!st) return st.error();
  if (created) {
    only_build_ = created->first.id;
    only_build_reserved_ = true;
  }
  return created;
}

Status Runner::start(Recovery recovery) {
  if (auto st = open_ledger(); !st) return st;
  recovery_ = recovery;
  if (only_build_ && !only_build_reserved_) {
    if (auto st = ledger_->reserve_build(*only_build_); !st) return st;
    only_build_reserved_ = true;
  }
  std::vector<catalog::JobRecord> resumed;
  if (recovery == Recovery::requeue_interrupted) {
    // Jobs that another live runner on this data directory holds are running, not
    // interrupted.
    auto others = ledger_->view();
    if (!others) return others.error();
    std::set<std::int64_t> keep = others->jobs_of_others;
    // Jobs that runners of other hosts or data directories claimed are theirs: their
    // heartbeats keep them, and once a lease has passed the take-over requeues the job.
    for (const auto state :
         {core::JobState::preparing, core::JobState::building, core::JobState::retagging,
          core::JobState::testing, core::JobState::ingesting}) {
      auto jobs = jobs_.jobs_in_state(state);
      if (!jobs) return jobs.error();
      for (const auto& j : *jobs) {
        if (!j.claimed_by.empty() && !same_home(j.claimed_by)) keep.insert(j.id);
      }
    }
    const std::set<std::int64_t> foreign = keep;
    // On an executor whose builds outlive the server (all of them but a test's fake), a job
    // that got as far as its build is resumed where it was instead of run again.
    if (executor_.reattaches()) {
      for (const auto state : {core::JobState::building, core::JobState::retagging,
                               core::JobState::testing, core::JobState::ingesting}) {
        auto jobs = jobs_.jobs_in_state(state);
        if (!jobs) return jobs.error();
        for (const auto& j : *jobs) {
          if (foreign.contains(j.id) || !config_.recipes.contains(j.recipe)) continue;
          if (!resumable(j.state, log_path(j.id).parent_path())) continue;
          keep.insert(j.id);
          resumed.push_back(j);
        }
      }
    }
    auto requeued = jobs_.requeue_interrupted(keep);
    if (!requeued) return requeued.error();
    for (const auto& j : *requeued) {
      // A process that was killed leaves its build's process tree running: end it before the
      // job runs again (and what an executor holds for it elsewhere: batch jobs, containers).
      const int killed = kill_job_processes(j.id);
      executor_.release(job_placement(j), Executor::Release::abandoned);
      note_in_log(log_path(j.id), "the server stopped while this job ran; requeued" +
                                      (killed > 0 ? " (ended " + std::to_string(killed) +
                                                        " process(es) left from the previous "
                                                        "attempt)"
                                                  : std::string()));
      log::info("job={} requeued after an interruption", j.id);
    }
  }
  if (executor_.admission() == Executor::Admission::cluster) {
    log::info("build runner ({} executor): {} recipes; the cluster schedules the jobs{}",
              executor_.name(), config_.recipes.size(),
              config_.host.max_concurrent_jobs == 0
                  ? std::string()
                  : ", at most " + std::to_string(config_.host.max_concurrent_jobs) + " at once");
  } else {
    const Capacity capacity = executor_.capacity();
    log::info(
        "build runner ({} executor): {} recipes, {:.1f} GiB available, {} cores; admission "
        "shared through {}",
        executor_.name(), config_.recipes.size(),
        static_cast<double>(capacity.memory_bytes) / kGiBd, capacity.cores,
        (builds_dir_ / "admission").string());
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
    for (const auto& j : resumed) {
      if (auto st = jobs_.adopt(j.id, id_, lease_until()); !st) {
        log::warn("job={} could not be claimed again: {}", j.id, st.error().message);
      }
      const RecipeConfig& recipe = config_.recipes.at(j.recipe);
      // The job holds a grant again (the admission of a cluster job is its count).
      auto admission = ledger_->admit(demand_of(j, recipe), admission_limits(0),
                                      [this] { return executor_.capacity(); });
      core::Parallelism grant;
      if (admission && admission->grant) grant = *admission->grant;
      grant.max_jobs = std::max(1U, j.max_jobs);
      grant.nvcc_threads = std::max(1U, j.nvcc_threads);
      log::info("job={} resumed after a restart ({})", j.id, core::state_name(j.state));
      running_[j.id] = std::make_shared<Running>();
      running_[j.id]->share_key = compile_share_key(j);
      job_threads_.emplace_back([this, j, recipe, grant] { run_job(j, recipe, grant, true); });
    }
  }
  log::info("build runner {}: leases of {}s, renewed every {}ms", id_, config_.host.lease.count(),
            heartbeat_interval().count());
  scheduler_ = std::thread([this] { schedule_loop(); });
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
  return ok_status();
}

Demand Runner::demand_of(const catalog::JobRecord& job, const RecipeConfig& recipe) const {
  Demand demand;
  demand.job_id = job.id;
  demand.gb_per_job = recipe.recipe.gb_per_job;
  demand.arch_count = core::count_archs(recipe.recipe.arch_value);
  demand.max_cores = recipe.recipe.cpus.value_or(0);
  if (executor_.admission() == Executor::Admission::cluster) {
    // What the job's batch jobs ask for: its CPUs, and gb_per_job for each of them.
    const JobResources r = cluster_resources(recipe);
    core::Resources res;
    res.available_memory_bytes = r.memory_bytes;
    res.cores = r.cpus;
    demand.planned =
        core::compute_parallelism(res, demand.gb_per_job, demand.arch_count, r.memory_bytes);
  }
  return demand;
}

ResourceRequest cluster_request(const core::Recipe& recipe, const Executor& executor) {
  ResourceRequest r;
  r.source = recipe.cpus ? ResourceRequest::Source::recipe : ResourceRequest::Source::defaults;
  r.cpus = std::max(1U, recipe.cpus.value_or(executor.default_cpus()));
  // Whole MiB, as batch jobs ask for memory.
  const double bytes = std::ceil(recipe.gb_per_job * r.cpus * kGiBd / kMiBd) * kMiBd;
  r.memory_bytes = static_cast<std::uint64_t>(bytes);
  return r;
}

JobResources Runner::cluster_resources(const RecipeConfig& recipe) const {
  const ResourceRequest r = cluster_request(recipe.recipe, executor_);
  return JobResources{r.cpus, r.memory_bytes};
}

AdmissionLimits Runner::admission_limits(unsigned max_concurrent) const {
  AdmissionLimits limits;
  limits.reserve_bytes = config_.host.memory_reserve_bytes;
  limits.max_concurrent_jobs = max_concurrent;
  return limits;
}

CommandPlacement Runner::job_placement(const catalog::JobRecord& job) const {
  CommandPlacement p;
  p.job_id = job.id;
  p.job_tag = job_tag(job.id);
  p.work_dir = log_path(job.id).parent_path();
  p.log = log_path(job.id);
  p.envs_dir = builds_dir_ / "envs";
  p.python = job.cell.python;
  p.cuda = job.cell.cuda.str();
  return p;
}

std::string Runner::job_tag(std::int64_t job_id) const {
  return builds_dir_.string() + "#" + std::to_string(job_id);
}

int Runner::kill_job_processes(std::int64_t job_id) const {
  // Every process of a job carries WHEELFORGE_JOB=<builds dir>#<id> in its environment, which
  // survives the death of the server that started it and names no other process.
  return kill_processes_with_env("WHEELFORGE_JOB=" + job_tag(job_id));
}

bool Runner::drain() {
  std::unique_lock lock(mu_);
  draining_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return running_.empty() || stopping_; });
  return running_.empty();
}

std::size_t Runner::running_jobs() const {
  std::lock_guard lock(mu_);
  return running_.size();
}

void Runner::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !scheduler_.joinable()) return;
    stopping_ = true;
    for (auto& [id, r] : running_) r->stop.interrupted = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  for (auto& t : job_threads_) {
    if (t.joinable()) t.join();
  }
  job_threads_.clear();
  if (ledger_) (void)ledger_->release_all();
}

Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> Runner::submit(
    const core::BuildRequest& request) {
  std::optional<RecipeConfig> recipe;
  std::string known;
  {
    std::lock_guard lock(mu_);
    if (const auto it = config_.recipes.find(request.recipe); it != config_.recipes.end()) {
      recipe = it->second;
    }
    for (const auto& [name, r] : config_.recipes) known += (known.empty() ? "" : ", ") + name;
  }
  if (!recipe) {
    return make_error(Errc::invalid, "unknown recipe '" + sanitize_for_log(request.recipe) +
                                         "' (configured: " + (known.empty() ? "none" : known) +
                                         ")");
  }
  auto version = core::Version::parse(request.version);
  if (!version) return make_error(Errc::invalid, "version: " + version.error().message);
  if (version->has_local()) {
    return make_error(Errc::invalid, "version must not carry a local label: the runner adds it");
  }
  std::optional<core::Matrix> subset;
  if (request.subset) {
    auto checked = core::validate_matrix_subset(*request.subset, recipe->matrix);
    if (!checked) return checked.error();
    subset = *checked;
  }
  std::vector<core::Cell> cells;
  std::string built_cells;
  for (const auto& cell : core::expand_matrix(recipe->matrix, subset)) {
    if (!request.force) {
      auto built = jobs_.cell_built(request.recipe, version->str(), cell);
      if (!built) return built.error();
      if (*built) {
        built_cells += (built_cells.empty() ? "" : ", ") + cell.key();
        continue;
      }
    }
    cells.push_back(cell);
  }
  if (cells.empty()) {
    // An empty build would only say the same less clearly.
    return make_error(Errc::conflict, "all cells built; use force to rebuild (" + request.recipe +
                                          " " + version->str() + ": " + built_cells + ")");
  }
  catalog::BuildRecord b;
  b.recipe = request.recipe;
  b.version = version->str();
  b.force = request.force;
  b.yank_superseded = request.yank_superseded.value_or(recipe->recipe.yank_superseded);
  // A build without the compile cache says so before the scheduler can see its jobs.
  std::unique_lock hold(mu_, std::defer_lock);
  if (!request.compile_cache) hold.lock();
  auto created = jobs_.create_build(b, cells);
  if (!created) return created.error();
  if (!request.compile_cache) {
    if (auto st = refuse_compile_cache(builds_dir_, created->first.id); !st) {
      log::warn("build={} could not record \"cache\": false: {}", created->first.id,
                st.error().message);
    }
    hold.unlock();
  }
  log::info("build={} recipe={} version={}: {} job(s) queued", created->first.id, b.recipe,
            b.version, created->second.size());
  cv_.notify_all();
  return created;
}

Result<catalog::JobRecord> Runner::cancel(std::int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    if (const auto r = running_.find(job_id); r != running_.end()) {
      r->second->stop.cancel = true;
      auto job = jobs_.find_job(job_id);
      if (!job) return job.error();
      if (!job->has_value()) return make_error(Errc::not_found, "no such job");
      return **job;  // the job thread records the cancellation once the tree is gone
    }
  }
  auto found = jobs_.find_job(job_id);
  if (!found) return found.error();
  if (!found->has_value()) return make_error(Errc::not_found, "no such job");
  const catalog::JobRecord& current = **found;
  if (core::is_running(current.state) && !current.claimed_by.empty() && current.claimed_by != id_) {
    // Another runner runs it: the job store says so, and that runner's heartbeat ends its
    // commands and writes the log.
    auto job = jobs_.transition(job_id, core::JobState::cancelled,
                                "cancelled while running on runner " + current.claimed_by);
    if (job) log::info("job={} cancelled; runner {} ends its commands", job_id, current.claimed_by);
    return job;
  }
  auto job = jobs_.transition(job_id, core::JobState::cancelled, "cancelled before it started");
  if (job) note_in_log(log_path(job_id), "cancelled");
  return job;
}

Result<catalog::JobRecord> Runner::retry(std::int64_t job_id) {
  auto job = jobs_.transition(job_id, core::JobState::queued, "retried");
  if (job) {
    note_in_log(log_path(job_id), "retry requested");
    cv_.notify_all();
  }
  return job;
}

void Runner::schedule_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (draining_) {
      // Running jobs finish; queued ones wait for the next start.
      cv_.wait_for(lock, std::chrono::seconds(2));
      continue;
    }
    auto queued = jobs_.jobs_in_state(core::JobState::queued);
    // Builds that a one-off runner (`wheelforge build`) runs itself.
    std::set<std::int64_t> reserved;
    if (!only_build_ && queued && !queued->empty()) {
      if (auto v = ledger_->view()) reserved = std::move(v->builds_of_others);
    }
    bool started = false;
    if (queued) {
      // The first Python of a torch x CUDA combination before the others, so that those
      // that must wait for the budget find its objects in the compile cache.
      std::multiset<std::string> sharing;
      for (const auto& [id, r] : running_) sharing.insert(r->share_key);
      order_to_share_compiles(*queued, sharing);
      for (const auto& job : *queued) {
        if (only_build_ && job.build_id != *only_build_) continue;
        if (reserved.contains(job.build_id)) continue;
        // A job retried the moment it ended: its thread is still finishing (the ledger, the
        // caches). It starts again once that thread is gone and says so through cv_.
        if (running_.contains(job.id)) continue;
        const auto recipe = config_.recipes.find(job.recipe);
        if (recipe == config_.recipes.end()) {
          // Left queued when this fails: the next round tries again.
          if (auto failed = jobs_.transition(job.id, core::JobState::failed,
                                             "recipe '" + job.recipe + "' is no longer configured");
              !failed) {
            log::warn("job={} could not be marked failed: {}", job.id, failed.error().message);
          }
          continue;
        }
        if (!try_start(job, recipe->second)) break;  // the budget is spent: wait, in order
        started = true;
      }
    }
    if (!started) cv_.wait_for(lock, std::chrono::seconds(2));
  }
}

bool Runner::try_start(const catalog::JobRecord& job, const RecipeConfig& recipe) {
  auto admission =
      ledger_->admit(demand_of(job, recipe), admission_limits(config_.host.max_concurrent_jobs),
                     [this] { return executor_.capacity(); });
  if (!admission) {
    log::warn("job={} admission: {}", job.id, admission.error().message);
    return false;
  }
  if (!admission->grant) {
    // Said once per job: a job may wait for hours behind a long build.
    if (waiting_noted_.insert(job.id).second) {
      note_in_log(log_path(job.id), "waiting for the build budget: " + admission->waiting_for);
    }
    return false;
  }
  waiting_noted_.erase(job.id);
  // Claim the job: another runner (on this host or another) may have taken it since it was
  // listed.
  auto claimed = jobs_.claim(job.id, id_, lease_until());
  if (!claimed || !claimed->has_value()) {
    if (!claimed) log::warn("job={} could not be claimed: {}", job.id, claimed.error().message);
    (void)ledger_->release(job.id);
    return true;
  }
  catalog::JobRecord mine = **claimed;
  if (mine.reason.starts_with("taken over from runner ")) {
    note_in_log(log_path(job.id), mine.reason + "; started over on runner " + id_);
    log::info("job={} {}; started over here", job.id, mine.reason);
  }
  running_[job.id] = std::make_shared<Running>();
  running_[job.id]->share_key = compile_share_key(job);
  job_threads_.emplace_back(
      [this, mine, recipe, p = *admission->grant] { run_job(mine, recipe, p, false); });
  return true;
}

void Runner::run_job(catalog::JobRecord job, RecipeConfig recipe, core::Parallelism grant,
                     bool resumed) {
  std::shared_ptr<Running> running;
  HostConfig host;
  std::string server;
  std::shared_ptr<const auth::BuildSigner> signer;
  {
    std::lock_guard lock(mu_);
    running = running_[job.id];
    host = config_.host;
    server = server_url_;
    signer = signer_;
  }
  if (!resumed) job.state = core::JobState::preparing;
  log::info("job={} {} {} {} {} (MAX_JOBS={} NVCC_THREADS={})", job.id, job.recipe, job.version,
            job.cell.key(), resumed ? "resumed" : "started", grant.max_jobs, grant.nvcc_threads);
  JobResources resources;
  // A cluster job's size, fitted to the cluster's nodes; one that no node holds fails at once.
  std::optional<Error> refused;
  std::string fitted_note;
  if (executor_.admission() == Executor::Admission::cluster) {
    const ResourceRequest asked = cluster_request(recipe.recipe, executor_);
    ResourceRequest size = asked;
    if (auto fitted = executor_.fit_request(asked); !fitted) {
      refused = fitted.error();
    } else {
      size = fitted->request;
      fitted_note = std::move(fitted->note);
    }
    resources = JobResources{size.cpus, size.memory_bytes};
    if (size != asked && !resumed) {
      core::Resources res;
      res.available_memory_bytes = size.memory_bytes;
      res.cores = size.cpus;
      grant =
          core::compute_parallelism(res, recipe.recipe.gb_per_job,
                                    core::count_archs(recipe.recipe.arch_value), size.memory_bytes);
    }
  } else {
    // The grant: its memory, and a core for each compile job's threads (at most the host's).
    resources.memory_bytes = grant.memory_bytes;
    resources.cpus =
        std::min(std::max(1U, grant.max_jobs * grant.nvcc_threads), executor_.capacity().cores);
  }
  JobContext ctx(job, std::move(recipe), std::move(host), executor_,
                 JobServices{jobs_, catalog_, store_, ingestor_, on_ingested_, std::move(signer)},
                 running->stop, builds_dir_, std::move(server), job_tag(job.id), grant);
  ctx.resources = resources;
  ctx.executor_job = job.executor_job;
  ctx.leave_detached = recovery_ == Recovery::requeue_interrupted;
  ctx.runner = id_;
  if (resumed) {
    ctx.resume = true;
    ctx.attempts_before = std::max(0, job.attempts - 1);
    ctx.toolchain = job.toolchain;
  }
  if (!fitted_note.empty()) {
    (void)make_directories(ctx.work_dir);
    ctx.note("[" + std::string(executor_.name()) + "] " + fitted_note);
  }
  Status result = ok_status();
  if (refused) {
    (void)make_directories(ctx.work_dir);
    result = *refused;
  } else {
    result = run_steps(ctx);
  }
  finish_job(ctx, result);
  if (auto cache = compile_cache_stats(job.id);
      cache && cache->state == catalog::CompileCacheStats::State::used) {
    std::lock_guard lock(mu_);
    compile_cache_totals_.hits += cache->hits;
    compile_cache_totals_.misses += cache->misses;
    compile_cache_totals_.size_bytes[job.recipe] = cache->size_bytes;
  }
  // The pip cache stays within its bound (every job may have added to it).
  if (!ctx.pip_cache.empty()) {
    const CacheTrim trimmed = trim_pip_cache(ctx.pip_cache, ctx.host.pip_cache_bytes);
    if (trimmed.removed > 0) {
      log::info(
          "job={} pip cache: removed {} least recently used file(s) ({:.1f} MiB) of {:.1f} MiB "
          "beyond pip_cache ({:.1f} MiB)",
          job.id, trimmed.removed, static_cast<double>(trimmed.removed_bytes) / kMiBd,
          static_cast<double>(trimmed.bytes_before) / kMiBd,
          static_cast<double>(ctx.host.pip_cache_bytes) / kMiBd);
    }
  }
  if (auto st = ledger_->release(job.id); !st) {
    log::warn("job={} admission ledger: {}", job.id, st.error().message);
  }
  {
    std::lock_guard lock(mu_);
    running_.erase(job.id);
  }
  cv_.notify_all();
}

std::chrono::milliseconds Runner::heartbeat_interval() const {
  return std::max(std::chrono::milliseconds(100),
                  std::chrono::duration_cast<std::chrono::milliseconds>(config_.host.lease) / 3);
}

Micros Runner::lease_until() const {
  return now_micros() +
         std::chrono::duration_cast<std::chrono::microseconds>(config_.host.lease).count();
}

void Runner::heartbeat_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const std::vector<std::pair<std::int64_t, std::shared_ptr<Running>>> held(running_.begin(),
                                                                              running_.end());
    // A one-off runner (`wheelforge build`) touches no other job.
    const bool taking = !draining_ && recovery_ == Recovery::requeue_interrupted;
    lock.unlock();
    const Micros until = lease_until();
    for (const auto& [id, running] : held) {
      auto lease = jobs_.renew_lease(id, id_, until);
      if (!lease) {
        log::warn("job={} lease not renewed: {}", id, lease.error().message);
        continue;
      }
      if (*lease == catalog::Lease::cancelled && !running->stop.cancel.exchange(true)) {
        log::info("job={} cancelled through another replica; ending its commands", id);
      } else if (*lease == catalog::Lease::lost && !running->stop.lost.exchange(true)) {
        running->stop.cancel = true;
        log::warn(
            "job={} is no longer this runner's (its lease passed and it was taken over); "
            "ending its commands",
            id);
      }
    }
    if (taking) take_over_expired();
    lock.lock();
    cv_.wait_for(lock, heartbeat_interval(), [this] { return stopping_; });
  }
}

void Runner::take_over_expired() {
  auto expired = jobs_.requeue_expired(now_micros());
  if (!expired) {
    log::warn("build runner: looking for jobs whose lease passed: {}", expired.error().message);
    return;
  }
  for (const auto& j : *expired) {
    log::warn("job={} runner {} let its lease pass during {}; queued again", j.id, j.claimed_by,
              core::state_name(j.state));
    if (same_home(j.claimed_by)) {
      // A runner of this data directory: what it left running here ends first.
      const int killed = kill_job_processes(j.id);
      executor_.release(job_placement(j), Executor::Release::abandoned);
      if (killed > 0)
        log::info("job={} ended {} process(es) left by {}", j.id, killed, j.claimed_by);
    }
  }
  if (!expired->empty()) cv_.notify_all();
}

std::optional<catalog::CompileCacheStats> Runner::compile_cache_stats(std::int64_t job_id) const {
  auto text = read_small_file(log_path(job_id).parent_path() / kCompileCacheFile, 1U << 16U);
  if (!text.ok()) return std::nullopt;
  auto stats = parse_compile_cache_stats(text.value());
  if (!stats) return std::nullopt;
  return *stats;
}

Runner::CompileCacheTotals Runner::compile_cache_totals() const {
  std::lock_guard lock(mu_);
  return compile_cache_totals_;
}

void Runner::settle(const JobContext& ctx, core::JobState to, const std::string& reason) {
  const std::int64_t id = ctx.job.id;
  // A database that is briefly unreachable (a PostgreSQL restart) must not lose a build's
  // outcome: retried with growing pauses for about half a minute, unless the runner stops.
  auto pause = std::chrono::milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    auto done = jobs_.transition_as(id_, id, to, reason);
    if (done) return;
    if (done.error().code == Errc::conflict) {
      // Cancelled through another replica (the heartbeat ended the commands), or no longer
      // this runner's.
      auto now = jobs_.find_job(id);
      if (now && now->has_value() && (*now)->state == to) return;
      log::warn("job={} could not be marked {}: {}", id, core::state_name(to),
                done.error().message);
      return;
    }
    const bool again =
        done.error().code == Errc::unavailable && attempt < 8 && !ctx.stop.interrupted.load();
    log::warn("job={} could not be marked {}: {}{}", id, core::state_name(to), done.error().message,
              again ? "; trying again" : "; the next start requeues it");
    if (!again) return;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(8000));
  }
}

void Runner::finish_job(JobContext& ctx, const Status& result) {
  const std::int64_t id = ctx.job.id;
  // The last note is written before the terminal state, so that a reader who sees the state
  // (the log follower) also finds the complete log.
  if (ctx.stop.interrupted && !ctx.stop.cancel) {
    // Left in its running state on purpose: the next start requeues (or resumes) it.
    ctx.note(ctx.leave_detached && executor_.reattaches() && resumable(ctx.job.state, ctx.work_dir)
                 ? "the server is stopping; its commands go on, and the next start re-attaches"
                 : "the server is stopping; the job will be requeued at the next start");
    return;
  }
  // What the executor holds for the job ends before its work directory is cleaned.
  executor_.release(ctx.placement(), Executor::Release::finished);
  if (ctx.stop.lost) {
    // Another runner took it over: its record is that runner's now.
    ctx.note(
        "this runner lost the job's lease (another runner took it over); its commands "
        "were ended");
    log::warn("job={} lost to another runner; its commands were ended", id);
    return;
  }
  if (ctx.stop.cancel) {
    ctx.note("cancelled: the process tree was killed");
    settle(ctx, core::JobState::cancelled, "cancelled while running");
    log::info("job={} cancelled", id);
    return;
  }
  // Work-directory policy: a succeeded job keeps only its log (the wheel is in the store); a
  // failed one keeps everything for inspection unless configured otherwise.
  if (result.ok() || !ctx.host.keep_failed_work_dirs) {
    if (auto st = clear_directory_except(ctx.work_dir, {"log.txt", kCompileCacheFile}); !st) {
      log::warn("job={} cleaning its work directory: {}", id, st.error().message);
    }
  }
  if (!result) {
    // The reason is shown by the API and the web UI: what a command printed may name a secret.
    const std::string reason = redact(result.error().message);
    ctx.note("failed: " + reason);
    settle(ctx, core::JobState::failed, reason);
    log::warn("job={} failed: {}", id, reason);
    return;
  }
  if (ctx.done_early) {
    ctx.note("succeeded: " + *ctx.done_early);
    settle(ctx, core::JobState::succeeded, *ctx.done_early);
    log::info("job={} succeeded: {}", id, *ctx.done_early);
    return;
  }
  ctx.note("succeeded");
  settle(ctx, core::JobState::succeeded, {});
  log::info("job={} succeeded", id);
}

}  // namespace wf::build
