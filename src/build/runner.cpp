#include "wheelforge/build/runner.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <fstream>

#include "wheelforge/archive/retag.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/process.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

struct Runner::Running {
  std::atomic<bool> cancel{false};
  std::atomic<bool> interrupted{false};  // the runner is stopping: leave the job resumable
  core::Parallelism grant;
  RecipeConfig recipe;  // a copy: set_recipes() does not change a running job
};

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

/// Appends a line to the job's log, marked so that it stands out from tool output.
void note(const fs::path& log, std::string_view line) {
  std::ofstream out(log, std::ios::app);
  out << "==> " << line << "\n";
}

using Env = std::vector<std::pair<std::string, std::string>>;

void set_env(Env& env, const std::string& key, std::string value) {
  for (auto& [k, v] : env) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  env.emplace_back(key, std::move(value));
}

/// Runs one step's command; a failure becomes an Error naming the step and the exit status.
Status run_step(Executor& executor, const std::string& step, ProcessSpec spec,
                const std::function<bool()>& cancelled) {
  note(
      spec.log_file, "[" + step + "] " + [&] {
        std::string cmd;
        for (const auto& a : spec.argv) cmd += (cmd.empty() ? "" : " ") + a;
        return cmd;
      }());
  auto status = run_on(executor, spec, cancelled);
  if (!status) return status.error();
  if (status->success()) return ok_status();
  return make_error(Errc::internal, step + " failed: " + status->describe());
}

}  // namespace

Runner::Runner(RunnerConfig config, catalog::JobStore& jobs, catalog::Catalog& catalog,
               store::BlobStore& store, ingest::Ingestor& ingestor, const fs::path& data_dir,
               std::function<void()> on_ingested)
    : config_(std::move(config)),
      jobs_(jobs),
      catalog_(catalog),
      store_(store),
      ingestor_(ingestor),
      builds_dir_(fs::absolute(data_dir) / "builds"),
      on_ingested_(std::move(on_ingested)),
      executor_(make_local_executor()) {}

Runner::~Runner() {
  stop();
}

void Runner::set_server_url(std::string url) {
  std::lock_guard lock(mu_);
  server_url_ = std::move(url);
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

Status Runner::start(Recovery recovery) {
  std::error_code ec;
  fs::create_directories(builds_dir_ / "envs", ec);
  if (ec) return make_error(Errc::io, "create " + builds_dir_.string() + ": " + ec.message());
  if (recovery == Recovery::requeue_interrupted) {
    auto requeued = jobs_.requeue_interrupted();
    if (!requeued) return requeued.error();
    for (const auto& j : *requeued) {
      // A process that was killed leaves its build's process tree running: end it before the
      // job runs again.
      const int killed = kill_job_processes(j.id);
      note(log_path(j.id), "the server stopped while this job ran; requeued" +
                               (killed > 0 ? " (ended " + std::to_string(killed) +
                                                 " process(es) left from the previous attempt)"
                                           : std::string()));
      spdlog::info("job={} requeued after an interruption", j.id);
    }
  }
  const std::uint64_t available = available_memory_bytes();
  budget_bytes_ = available > config_.host.memory_reserve_bytes
                      ? available - config_.host.memory_reserve_bytes
                      : 0;
  cores_ = std::max(1U, available_cores());
  spdlog::info("build runner: {} recipes, memory budget {:.1f} GiB, {} cores",
               config_.recipes.size(), static_cast<double>(budget_bytes_) / kGiB, cores_);
  scheduler_ = std::thread([this] { schedule_loop(); });
  return ok_status();
}

std::string Runner::job_tag(std::int64_t job_id) const {
  return builds_dir_.string() + "#" + std::to_string(job_id);
}

int Runner::kill_job_processes(std::int64_t job_id) const {
  // Every process of a job carries WHEELFORGE_JOB=<builds dir>#<id> in its environment, which
  // survives the death of the server that started it and names no other process.
  const std::string needle = "WHEELFORGE_JOB=" + job_tag(job_id);
  int killed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    const std::string environ((std::istreambuf_iterator<char>(in)), {});
    for (std::size_t pos = 0; pos < environ.size();) {
      const std::size_t end = std::min(environ.find('\0', pos), environ.size());
      if (std::string_view(environ).substr(pos, end - pos) == needle) {
        if (::kill(std::stoi(pid), SIGKILL) == 0) ++killed;
        break;
      }
      pos = end + 1;
    }
  }
  return killed;
}

void Runner::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !scheduler_.joinable()) return;
    stopping_ = true;
    for (auto& [id, r] : running_) r->interrupted = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  for (auto& t : job_threads_) {
    if (t.joinable()) t.join();
  }
  job_threads_.clear();
}

Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> Runner::submit(
    const core::BuildRequest& request) {
  RecipeConfig recipe;
  {
    std::lock_guard lock(mu_);
    const auto it = config_.recipes.find(request.recipe);
    if (it == config_.recipes.end()) {
      std::string known;
      for (const auto& [name, r] : config_.recipes) known += (known.empty() ? "" : ", ") + name;
      return make_error(Errc::invalid, "unknown recipe '" + sanitize_for_log(request.recipe) +
                                           "' (configured: " + (known.empty() ? "none" : known) +
                                           ")");
    }
    recipe = it->second;
  }
  auto version = core::Version::parse(request.version);
  if (!version) return make_error(Errc::invalid, "version: " + version.error().message);
  if (version->has_local()) {
    return make_error(Errc::invalid, "version must not carry a local label: the runner adds it");
  }
  std::optional<core::Matrix> subset;
  if (request.subset) {
    auto checked = core::validate_matrix_subset(*request.subset, recipe.matrix);
    if (!checked) return checked.error();
    subset = *checked;
  }
  std::vector<core::Cell> cells;
  for (const auto& cell : core::expand_matrix(recipe.matrix, subset)) {
    if (!request.force) {
      auto built = jobs_.cell_built(request.recipe, version->str(), cell);
      if (!built) return built.error();
      if (*built) continue;
    }
    cells.push_back(cell);
  }
  catalog::BuildRecord b;
  b.recipe = request.recipe;
  b.version = version->str();
  b.force = request.force;
  auto created = jobs_.create_build(b, cells);
  if (!created) return created.error();
  spdlog::info("build={} recipe={} version={}: {} job(s) queued", created->first.id, b.recipe,
               b.version, created->second.size());
  cv_.notify_all();
  return created;
}

Result<catalog::JobRecord> Runner::cancel(std::int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    if (const auto r = running_.find(job_id); r != running_.end()) {
      r->second->cancel = true;
      auto job = jobs_.find_job(job_id);
      if (!job) return job.error();
      return **job;  // the job thread records the cancellation once the tree is gone
    }
  }
  auto job = jobs_.transition(job_id, core::JobState::cancelled, "cancelled before it started");
  if (job) note(log_path(job_id), "cancelled");
  return job;
}

Result<catalog::JobRecord> Runner::retry(std::int64_t job_id) {
  auto job = jobs_.transition(job_id, core::JobState::queued, "retried");
  if (job) {
    note(log_path(job_id), "retry requested");
    cv_.notify_all();
  }
  return job;
}

void Runner::schedule_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto queued = jobs_.jobs_in_state(core::JobState::queued);
    bool started = false;
    if (queued) {
      for (const auto& job : *queued) {
        if (only_build_ && job.build_id != *only_build_) continue;
        const auto recipe = config_.recipes.find(job.recipe);
        if (recipe == config_.recipes.end()) {
          (void)jobs_.transition(job.id, core::JobState::failed,
                                 "recipe '" + job.recipe + "' is no longer configured");
          continue;
        }
        // Admission: what the running jobs hold is not available to a new one.
        std::uint64_t used_memory = 0;
        unsigned used_cores = 0;
        for (const auto& [id, r] : running_) {
          used_memory += r->grant.memory_bytes;
          used_cores += r->grant.max_jobs;
        }
        if (config_.host.max_concurrent_jobs != 0 &&
            running_.size() >= config_.host.max_concurrent_jobs) {
          break;
        }
        const double gb = recipe->second.recipe.gb_per_job;
        const auto min_bytes = static_cast<std::uint64_t>(gb * kGiB);
        const std::uint64_t free_memory =
            budget_bytes_ > used_memory ? budget_bytes_ - used_memory : 0;
        const unsigned free_cores = cores_ > used_cores ? cores_ - used_cores : 0;
        // A job always runs when nothing else does (slowly, 1 x 1, if memory is short), so the
        // queue makes progress on any host.
        if (!running_.empty() && (free_cores == 0 || free_memory < min_bytes)) break;
        core::Resources res;
        res.available_memory_bytes = free_memory;
        res.reserve_bytes = 0;
        res.cores = std::max(1U, free_cores);
        const core::Parallelism grant = core::compute_parallelism(
            res, gb, core::count_archs(recipe->second.recipe.arch_value), free_memory);
        // Claim the job: another runner on the same data directory (the `wheelforge build`
        // command) may have taken it since it was listed.
        if (!jobs_.transition(job.id, core::JobState::preparing)) continue;
        auto r = std::make_shared<Running>();
        r->grant = grant;
        r->recipe = recipe->second;
        running_[job.id] = r;
        job_threads_.emplace_back([this, job, grant] { run_job(job, grant); });
        started = true;
      }
    }
    if (!started) cv_.wait_for(lock, std::chrono::seconds(2));
  }
}

void Runner::run_job(catalog::JobRecord job, core::Parallelism grant) {
  std::shared_ptr<Running> running;
  {
    std::lock_guard lock(mu_);
    running = running_[job.id];
  }
  const fs::path log = log_path(job.id);
  std::error_code ec;
  fs::create_directories(log.parent_path(), ec);
  spdlog::info("job={} {} {} {} started (MAX_JOBS={} NVCC_THREADS={})", job.id, job.recipe,
               job.version, job.cell.key(), grant.max_jobs, grant.nvcc_threads);
  const Status result = run_steps(job, grant, *running);
  if (running->interrupted && !running->cancel) {
    // Left in its running state on purpose: the next start requeues it.
    note(log, "the server is stopping; the job will be requeued at the next start");
  } else if (running->cancel) {
    // The last note is written before the terminal state, so that a reader who sees the state
    // (the log follower) also finds the complete log.
    note(log, "cancelled: the process tree was killed");
    (void)jobs_.transition(job.id, core::JobState::cancelled, "cancelled while running");
    spdlog::info("job={} cancelled", job.id);
  } else if (!result) {
    if (!config_.host.keep_failed_work_dirs) {
      std::error_code rm;
      for (const auto& entry : fs::directory_iterator(log.parent_path(), rm)) {
        if (entry.path().filename() != "log.txt") fs::remove_all(entry.path(), rm);
      }
    }
    note(log, "failed: " + result.error().message);
    (void)jobs_.transition(job.id, core::JobState::failed, result.error().message);
    spdlog::warn("job={} failed: {}", job.id, result.error().message);
  } else {
    note(log, "succeeded");
    (void)jobs_.transition(job.id, core::JobState::succeeded);
    spdlog::info("job={} succeeded", job.id);
  }
  {
    std::lock_guard lock(mu_);
    running_.erase(job.id);
  }
  cv_.notify_all();
}

Status Runner::run_steps(const catalog::JobRecord& job, core::Parallelism parallelism,
                         Running& running) {
  const RecipeConfig& rc = running.recipe;
  const core::Recipe& recipe = rc.recipe;
  const core::Cell& cell = job.cell;
  const fs::path dir = builds_dir_ / ("job-" + std::to_string(job.id));
  const fs::path log = dir / "log.txt";
  if (auto st = executor_->prepare(dir); !st) return st;
  const auto cancelled = [&running] { return running.cancel.load() || running.interrupted.load(); };
  const auto advance = [&](core::JobState to) -> Status {
    if (cancelled()) return make_error(Errc::unavailable, "stopped");
    auto t = jobs_.transition(job.id, to);
    if (!t) return t.error();
    return ok_status();
  };

  const auto python = config_.host.pythons.find(cell.python);
  if (python == config_.host.pythons.end()) {
    return make_error(Errc::invalid, "no interpreter configured for Python " + cell.python);
  }
  const auto cuda_home = config_.host.cuda_homes.find(cell.cuda.str());
  if (cuda_home == config_.host.cuda_homes.end()) {
    return make_error(Errc::invalid, "no CUDA toolkit configured for CUDA " + cell.cuda.str());
  }
  std::string server;
  {
    std::lock_guard lock(mu_);
    server = server_url_;
  }
  std::string torch_index = replace_all(config_.host.torch_index, "{server}", server);
  torch_index = replace_all(torch_index, "{cuda}", cell.cuda.tag());
  torch_index = replace_all(torch_index, "{torch}", cell.torch.str());
  const std::string torch_req = "torch==" + cell.torch.str() + ".*";
  const std::string torch_series_check =
      "import sys, torch; v = torch.__version__.split('+')[0].split('.'); "
      "sys.exit(0 if v[:2] == '" +
      cell.torch.str() + "'.split('.') else 1)";
  const auto venv_command = [&](const fs::path& where) {
    return std::vector<std::string>{python->second.string(), "-m", "venv", where.string()};
  };
  // With the interpreter's own torch, a new environment sees the interpreter's site-packages
  // through a .pth file. (--system-site-packages would not do: when the interpreter is itself
  // a virtual environment, it exposes the base installation's packages, not the venv's.)
  const auto link_system_site = [&](const fs::path& env) {
    const std::string script =
        "import subprocess, sys, sysconfig; "
        "paths = subprocess.check_output([sys.argv[1], '-c', "
        "'import site; print(chr(10).join(site.getsitepackages()))'], text=True); "
        "open(sysconfig.get_paths()['purelib'] + '/_wheelforge_system.pth', 'w').write(paths)";
    return std::vector<std::string>{(env / "bin" / "python").string(), "-c", script,
                                    python->second.string()};
  };

  Env base = minimal_environment();
  set_env(base, "PIP_CONFIG_FILE", "/dev/null");
  set_env(base, "PIP_DISABLE_PIP_VERSION_CHECK", "1");
  set_env(base, "PIP_NO_CACHE_DIR", "1");
  set_env(base, "PIP_NO_INPUT", "1");
  set_env(base, "HOME", dir.string());
  set_env(base, "WHEELFORGE_JOB", job_tag(job.id));
  const auto spec = [&](std::vector<std::string> argv, Env env, fs::path cwd,
                        std::chrono::milliseconds timeout) {
    ProcessSpec s;
    s.argv = std::move(argv);
    s.env = std::move(env);
    s.cwd = std::move(cwd);
    s.log_file = log;
    s.timeout = timeout;
    return s;
  };
  const std::chrono::milliseconds step_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(recipe.timeout);

  // ---- preparing (the scheduler recorded it when it claimed the job): the (python, torch,
  // CUDA) environment, reused across jobs, and the source.
  note(log, "job " + std::to_string(job.id) + ": " + recipe.name + " " + job.version + " for " +
                cell.key() + " (label +" + core::local_label(cell) + ")");
  const fs::path env_dir = builds_dir_ / "envs" / (cell.key());
  {
    std::lock_guard env_lock(env_mu_);
    if (!fs::exists(env_dir / ".ready")) {
      fs::remove_all(env_dir);
      if (auto st = run_step(*executor_, "preparing",
                             spec(venv_command(env_dir), base, dir, step_timeout), cancelled);
          !st)
        return st;
      const std::string env_python = (env_dir / "bin" / "python").string();
      if (config_.host.system_torch) {
        if (auto st = run_step(*executor_, "preparing",
                               spec(link_system_site(env_dir), base, dir, step_timeout), cancelled);
            !st)
          return st;
        if (auto st = run_step(
                *executor_, "preparing",
                spec({env_python, "-c", torch_series_check}, base, dir, step_timeout), cancelled);
            !st) {
          return make_error(Errc::internal,
                            "the interpreter's own torch is not of series " + cell.torch.str());
        }
      }
      std::vector<std::string> install = {env_python, "-m",          "pip",
                                          "install",  "--index-url", torch_index};
      if (!config_.host.system_torch) install.push_back(torch_req);
      install.insert(install.end(), recipe.build_requires.begin(), recipe.build_requires.end());
      if (install.size() > 6) {
        if (auto st = run_step(*executor_, "preparing", spec(install, base, dir, step_timeout),
                               cancelled);
            !st)
          return st;
      }
      std::ofstream(env_dir / ".ready") << torch_index << "\n";
    }
  }
  const fs::path src_root = dir / "src";
  fs::remove_all(src_root);
  fs::create_directories(src_root);
  fs::path src = src_root;
  switch (recipe.source.kind) {
    case core::SourceSpec::Kind::path:
      if (auto st =
              run_step(*executor_, "preparing",
                       spec({"/bin/cp", "-a", recipe.source.location + "/.", src_root.string()},
                            base, dir, step_timeout),
                       cancelled);
          !st)
        return st;
      break;
    case core::SourceSpec::Kind::git:
      if (auto st = run_step(
              *executor_, "preparing",
              spec({"/usr/bin/git", "clone", "--quiet", recipe.source.location, src_root.string()},
                   base, dir, step_timeout),
              cancelled);
          !st)
        return st;
      if (!recipe.source.ref.empty()) {
        if (auto st = run_step(*executor_, "preparing",
                               spec({"/usr/bin/git", "-C", src_root.string(), "checkout", "--quiet",
                                     recipe.source.ref},
                                    base, dir, step_timeout),
                               cancelled);
            !st)
          return st;
      }
      break;
    case core::SourceSpec::Kind::index_sdist: {
      // The project's sdist of this version, from our own store.
      auto contents = catalog_.load();
      if (!contents) return contents.error();
      const core::FileRecord* sdist = nullptr;
      for (const auto& f : contents->files) {
        if (f.project == recipe.project && f.kind == core::DistKind::sdist &&
            f.version == job.version)
          sdist = &f;
      }
      if (sdist == nullptr) {
        return make_error(Errc::not_found,
                          "no sdist of " + recipe.project + " " + job.version + " in the index");
      }
      if (auto st = run_step(*executor_, "preparing",
                             spec({"/bin/tar", "-xzf", store_.blob_path(sdist->sha256).string(),
                                   "-C", src_root.string()},
                                  base, dir, step_timeout),
                             cancelled);
          !st)
        return st;
      for (const auto& entry : fs::directory_iterator(src_root)) {
        if (entry.is_directory()) src = entry.path();
      }
      break;
    }
  }

  // ---- building, retried with half the parallelism when the OOM killer struck.
  const fs::path out = dir / "out";
  Env build_env = base;
  const std::string cuda = cuda_home->second.string();
  // With the interpreter's own torch, its bin directory (ninja, build tools installed beside
  // torch) comes right after the environment's.
  const std::string interpreter_bin =
      config_.host.system_torch ? ":" + python->second.parent_path().string() : std::string();
  set_env(build_env, "PATH",
          (env_dir / "bin").string() + interpreter_bin + ":" + cuda +
              "/bin:/usr/local/bin:/usr/bin:/bin");
  set_env(build_env, "CUDA_HOME", cuda);
  set_env(build_env, "PIP_NO_INDEX", "1");
  if (!recipe.arch_variable.empty()) set_env(build_env, recipe.arch_variable, recipe.arch_value);
  if (!recipe.local_version_variable.empty()) {
    set_env(build_env, recipe.local_version_variable, core::local_label(cell));
  }
  for (const auto& [k, v] : recipe.env) set_env(build_env, k, v);
  std::string command = replace_all(recipe.build_command, "{python}",
                                    shell_quote((env_dir / "bin" / "python").string()));
  command = replace_all(command, "{out}", shell_quote(out.string()));
  command = replace_all(command, "{src}", shell_quote(src.string()));
  for (int attempt = 0;; ++attempt) {
    if (auto st = advance(core::JobState::building); !st) return st;
    fs::remove_all(out);
    fs::create_directories(out);
    set_env(build_env, "MAX_JOBS", std::to_string(parallelism.max_jobs));
    set_env(build_env, "NVCC_THREADS", std::to_string(parallelism.nvcc_threads));
    (void)jobs_.record_attempt(job.id, parallelism.max_jobs, parallelism.nvcc_threads);
    note(log, "[building] attempt " + std::to_string(attempt + 1) +
                  " with MAX_JOBS=" + std::to_string(parallelism.max_jobs) +
                  " NVCC_THREADS=" + std::to_string(parallelism.nvcc_threads));
    auto status = run_on(*executor_, spec({"/bin/sh", "-c", command}, build_env, src, step_timeout),
                         cancelled);
    if (!status) return status.error();
    if (status->success()) break;
    if (cancelled()) return make_error(Errc::unavailable, "stopped");
    if (status->timed_out)
      return make_error(Errc::internal,
                        "build " + status->describe() + "; its process tree was killed");
    const bool oom = core::looks_like_oom(status->exited ? status->code : 0, !status->exited,
                                          status->signal, read_log_tail(log, 16 * 1024));
    const core::Parallelism smaller = core::halve(parallelism);
    if (!oom || attempt >= config_.host.oom_retries || smaller == parallelism) {
      return make_error(Errc::internal,
                        std::string(oom ? "build ran out of memory" : "build failed") + ": " +
                            status->describe());
    }
    note(log,
         "[building] out of memory (" + status->describe() +
             "); retrying with half the parallelism: MAX_JOBS=" + std::to_string(smaller.max_jobs) +
             " NVCC_THREADS=" + std::to_string(smaller.nvcc_threads));
    parallelism = smaller;
  }

  // ---- retagging: the wheel must carry +cu{XY}torch{M.m}, inside and out.
  if (auto st = advance(core::JobState::retagging); !st) return st;
  std::vector<fs::path> wheels;
  for (const auto& entry : fs::directory_iterator(out)) {
    if (entry.path().extension() == ".whl") wheels.push_back(entry.path());
  }
  if (wheels.size() != 1) {
    return make_error(Errc::internal, "the build produced " + std::to_string(wheels.size()) +
                                          " wheels (expected 1)");
  }
  fs::path wheel = wheels.front();
  auto name = core::parse_dist_filename(wheel.filename().string());
  if (!name) return make_error(Errc::internal, "built wheel: " + name.error().message);
  if (name->normalized_name != recipe.project) {
    return make_error(Errc::internal, "the build produced a wheel of '" + name->normalized_name +
                                          "', not '" + recipe.project + "'");
  }
  if (name->version.public_str() != job.version) {
    return make_error(Errc::internal, "the build produced version " + name->version.public_str() +
                                          ", not " + job.version);
  }
  if (!core::label_matches(name->version.local_str(), cell)) {
    auto retagged = archive::retag_wheel(wheel, core::local_label(cell), dir / "retagged");
    if (!retagged) return make_error(Errc::internal, "retag: " + retagged.error().message);
    note(log, "[retagging] " + wheel.filename().string() + " -> " + retagged->filename().string());
    wheel = *retagged;
  } else {
    note(log, "[retagging] " + wheel.filename().string() + " already carries +" +
                  name->version.local_str());
  }

  // ---- testing: a fresh environment with the same torch, the wheel from the file only, the
  // import check from an empty directory (so the source tree cannot satisfy the import).
  if (auto st = advance(core::JobState::testing); !st) return st;
  const fs::path test_env = dir / "test-env";
  const fs::path empty = dir / "empty";
  fs::remove_all(test_env);
  fs::create_directories(empty);
  const std::string test_python = (test_env / "bin" / "python").string();
  if (auto st = run_step(*executor_, "testing",
                         spec(venv_command(test_env), base, dir, step_timeout), cancelled);
      !st)
    return st;
  if (config_.host.system_torch) {
    if (auto st = run_step(*executor_, "testing",
                           spec(link_system_site(test_env), base, dir, step_timeout), cancelled);
        !st)
      return st;
  } else {
    if (auto st = run_step(
            *executor_, "testing",
            spec({test_python, "-m", "pip", "install", "--index-url", torch_index, torch_req}, base,
                 dir, step_timeout),
            cancelled);
        !st)
      return st;
  }
  if (auto st = run_step(
          *executor_, "testing",
          spec({test_python, "-m", "pip", "install", "--no-index", "--no-deps", wheel.string()},
               base, dir, step_timeout),
          cancelled);
      !st)
    return st;
  if (!recipe.import_check.empty()) {
    Env test_env_vars = base;
    set_env(test_env_vars, "PATH",
            (test_env / "bin").string() + ":" + cuda + "/bin:/usr/local/bin:/usr/bin:/bin");
    if (auto st = run_step(
            *executor_, "testing",
            spec({test_python, "-c", recipe.import_check}, test_env_vars, empty, step_timeout),
            cancelled);
        !st)
      return st;
  }

  // ---- ingesting: through the same path as uploads, so it appears in its variant views.
  if (auto st = advance(core::JobState::ingesting); !st) return st;
  auto ingested = ingestor_.ingest_path(wheel);
  if (!ingested) return make_error(ingested.error().code, "ingest: " + ingested.error().message);
  (void)jobs_.record_wheel(job.id, ingested->file.filename);
  note(log,
       "[ingesting] " + ingested->file.filename + " sha256=" + ingested->file.sha256 +
           (ingested->outcome == ingest::Outcome::identical ? " (identical file already stored)"
                                                            : ""));
  if (on_ingested_) on_ingested_();
  // Work-directory policy: a succeeded job keeps only its log (the wheel is in the store); a
  // failed job keeps everything for inspection unless configured otherwise (see run_job).
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename() != "log.txt") fs::remove_all(entry.path());
  }
  return ok_status();
}

}  // namespace wf::build
