#include "job_context.hpp"

#include <fstream>
#include <thread>

#include "files.hpp"
#include "wheelforge/build/pip_cache.hpp"
#include "wheelforge/core/build_failure.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

// A failed command's cause is looked for in at most this much of its output (the end of it).
constexpr std::size_t kCauseWindow = 1U << 20U;

// How often a running command is polled.
constexpr std::chrono::milliseconds kPollInterval{100};

// The checkpoint: one "key=value" line per finding (values are paths and URLs: no newlines).
constexpr const char* kCheckpoint = "checkpoint.txt";

std::string checkpoint_line(std::string_view key, std::string_view value) {
  return std::string(key) + "=" + std::string(value) + "\n";
}

}  // namespace

void set_env(Env& env, const std::string& key, std::string value) {
  for (auto& [k, v] : env) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  env.emplace_back(key, std::move(value));
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

JobContext::JobContext(catalog::JobRecord job_, RecipeConfig recipe_, HostConfig host_,
                       Executor& executor_, JobServices services_, const StopFlags& stop_,
                       fs::path builds_dir_, std::string server_url_, std::string job_tag_,
                       core::Parallelism grant)
    : job(std::move(job_)),
      recipe(std::move(recipe_.recipe)),
      host(std::move(host_)),
      executor(executor_),
      services(std::move(services_)),
      stop(stop_),
      builds_dir(std::move(builds_dir_)),
      work_dir(builds_dir / ("job-" + std::to_string(job.id))),
      log(work_dir / "log.txt"),
      server_url(std::move(server_url_)),
      job_tag(std::move(job_tag_)),
      parallelism(grant),
      base_env(minimal_environment()),
      step_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(recipe.timeout)) {
  set_env(base_env, "PIP_CONFIG_FILE", "/dev/null");
  set_env(base_env, "PIP_DISABLE_PIP_VERSION_CHECK", "1");
  set_env(base_env, "PIP_NO_CACHE_DIR", "1");
  set_env(base_env, "PIP_NO_INPUT", "1");
  set_env(base_env, "HOME", work_dir.string());
  set_env(base_env, "WHEELFORGE_JOB", job_tag);
  if (host.pip_cache_bytes > 0) pip_cache = pip_cache_dir(builds_dir);
}

Env JobContext::install_env() const {
  if (pip_cache.empty()) return base_env;
  Env env;
  for (const auto& kv : base_env) {
    if (kv.first != "PIP_NO_CACHE_DIR") env.push_back(kv);
  }
  set_env(env, "PIP_CACHE_DIR", pip_cache.string());
  // pip caches only what it fetched from a secure or trusted origin: an http:// index on
  // loopback (the server's own views, the usual torch index) is trusted by name, or nothing
  // from it would ever be cached. Other http:// hosts stay as pip treats them.
  if (const auto url = parse_url(torch_index); url && !url->https()) {
    const bool loopback = url->host == "localhost" || url->host == "::1" ||
                          (url->host_is_ip() && url->host.starts_with("127."));
    if (loopback) set_env(env, "PIP_TRUSTED_HOST", url->authority());
  }
  return env;
}

bool JobContext::stopped() const {
  return stop.cancel.load() || stop.interrupted.load();
}

Status JobContext::advance(core::JobState to) {
  if (stopped()) return make_error(Errc::unavailable, "stopped");
  auto t = services.jobs.transition_as(runner, job.id, to);
  if (!t) return t.error();
  job.state = to;
  return ok_status();
}

void JobContext::note(std::string_view line) const {
  std::ofstream stream(log, std::ios::app);
  stream << "==> " << redact(line) << "\n";
}

void JobContext::keep(const Status& written, std::string_view what) const {
  if (written) return;
  wf::log::warn("job={} could not record {}: {}", job.id, what, written.error().message);
  note("could not record " + std::string(what) + " in the job store: " + written.error().message);
}

CommandPlacement JobContext::placement() const {
  CommandPlacement p;
  p.where = where;
  p.job_id = job.id;
  p.job_tag = job_tag;
  p.work_dir = work_dir;
  p.log = log;
  p.envs_dir = builds_dir / "envs";
  p.pip_cache = pip_cache;
  if (where == CommandPlacement::Where::build) p.compile_cache = compile_cache;
  p.python = job.cell.python;
  p.cuda = job.cell.cuda.str();
  p.memory_bytes = resources.memory_bytes;
  p.cpus = resources.cpus;
  return p;
}

ProcessSpec JobContext::command(std::vector<std::string> argv, Env env, fs::path cwd,
                                const fs::path& output) const {
  ProcessSpec s;
  s.argv = std::move(argv);
  s.env = std::move(env);
  s.cwd = std::move(cwd);
  s.log_file = output.empty() ? log : output;
  s.timeout = step_timeout;
  s.placement = placement();
  return s;
}

Result<ExitStatus> JobContext::run(const ProcessSpec& spec) const {
  auto execution = executor.start(spec);
  if (!execution) return execution.error();
  return wait(**execution);
}

ExitStatus JobContext::wait(Execution& execution) const {
  const auto record = [this, &execution] {
    // What ran the build placement's commands (the build's is recorded last).
    if (auto p = execution.provenance();
        p && where == CommandPlacement::Where::build && *p != provenance) {
      provenance = std::move(*p);
      keep(services.jobs.record_provenance(job.id, provenance), "the container provenance");
    }
    std::string id = execution.remote_id();
    if (id.empty() || id == executor_job) return;
    executor_job = std::move(id);
    keep(services.jobs.record_executor_job(job.id, executor_job), "the executor's job id");
  };
  record();
  bool cancelled = false;
  while (true) {
    if (auto status = execution.poll()) {
      record();
      return *status;
    }
    if (!cancelled && stop.cancel.load()) {
      execution.cancel();
      cancelled = true;
    } else if (!cancelled && stop.interrupted.load()) {
      if (leave_detached && execution.detached()) {
        // The command goes on without us: the next start re-attaches to it.
        ExitStatus left;
        left.cancelled = true;
        left.note = "left running for the next start";
        return left;
      }
      execution.cancel();
      cancelled = true;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status JobContext::save_checkpoint() const {
  std::string text =
      "# what the steps of this job found (read when a restarted server resumes it)\n";
  text += checkpoint_line("step", completed_step);
  text += checkpoint_line("python", python.string());
  text += checkpoint_line("cuda_home", cuda_home.string());
  text += checkpoint_line("torch_index", torch_index);
  text += checkpoint_line("env_dir", env_dir.string());
  text += checkpoint_line("src", src.string());
  text += checkpoint_line("out", out.string());
  text += checkpoint_line("wheel", wheel.string());
  text += checkpoint_line("source_uri", source_uri);
  text += checkpoint_line("source_digest", source_digest.first + ":" + source_digest.second);
  text += checkpoint_line("attempt_log_offset", std::to_string(attempt_log_offset));
  return write_file_atomic(work_dir / kCheckpoint, text);
}

Status JobContext::load_checkpoint() {
  auto text = read_small_file(work_dir / kCheckpoint, 1U << 20U);
  if (!text.ok()) {
    return make_error(Errc::not_found,
                      "no checkpoint in " + work_dir.string() + ": " + text.error().message);
  }
  for (const auto line : split(text.value(), '\n')) {
    const std::size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    const std::string value(line.substr(eq + 1));
    if (key == "step") completed_step = value;
    if (key == "python") python = value;
    if (key == "cuda_home") cuda_home = value;
    if (key == "torch_index") torch_index = value;
    if (key == "env_dir") env_dir = value;
    if (key == "src") src = value;
    if (key == "out") out = value;
    if (key == "wheel") wheel = value;
    if (key == "source_uri") source_uri = value;
    if (const std::size_t colon = value.find(':');
        key == "source_digest" && colon != std::string::npos && colon > 0) {
      source_digest = {value.substr(0, colon), value.substr(colon + 1)};
    }
    if (key == "attempt_log_offset") attempt_log_offset = parse_u64(value).value_or(0);
  }
  return ok_status();
}

std::string JobContext::checkpointed_step(const fs::path& work_dir) {
  auto text = read_small_file(work_dir / kCheckpoint, 1U << 20U);
  if (!text.ok()) return {};
  for (const auto line : split(text.value(), '\n')) {
    if (line.starts_with("step=")) return std::string(line.substr(5));
  }
  return {};
}

std::uint64_t JobContext::output_size(const fs::path& file) const {
  const LogChunk end = executor.read_log_tail(file, 0);
  return end.offset;
}

std::string JobContext::cause(const fs::path& output, std::uint64_t from) const {
  LogChunk tail = executor.read_log_tail(output, kCauseWindow);
  if (tail.offset < from) {
    tail.data.erase(
        0, static_cast<std::size_t>(std::min<std::uint64_t>(from - tail.offset, tail.data.size())));
  }
  const std::string found = core::failure_cause(tail.data);
  return found.empty() ? found : ": " + found;
}

std::string JobContext::failure(std::string_view what, const ExitStatus& status,
                                const fs::path& output, std::uint64_t from) const {
  return std::string(what) + " failed (" + status.describe() + ")" + cause(output, from);
}

Status JobContext::run_checked(std::string_view what, const ProcessSpec& spec) const {
  std::string line;
  for (const auto& a : spec.argv) line += (line.empty() ? "" : " ") + a;
  note("[" + std::string(core::state_name(job.state)) + "] " + line);
  const std::uint64_t from = output_size(spec.log_file);
  auto status = run(spec);
  if (!status)
    return make_error(status.error().code, std::string(what) + ": " + status.error().message);
  if (status->success()) return ok_status();
  if (stopped()) return make_error(Errc::unavailable, "stopped");
  return make_error(Errc::internal, failure(what, *status, spec.log_file, from));
}

std::string JobContext::cell_torch_index() const {
  std::string index = replace_all(host.torch_index, "{server}", server_url);
  index = replace_all(index, "{cuda}", job.cell.cuda.tag());
  return replace_all(index, "{torch}", job.cell.torch.str());
}

fs::path JobContext::venv_python(const fs::path& venv) {
  return venv / "bin" / "python";
}

}  // namespace wf::build
