#include "slurm.hpp"

#include <signal.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <thread>

#include "container.hpp"
#include "files.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Where = CommandPlacement::Where;

namespace {

constexpr std::uint64_t kMiB = 1024ULL * 1024ULL;
// How often a running command's batch job is asked about (its files are looked at on every
// poll); more often once it was cancelled.
constexpr std::chrono::seconds kQueryInterval{5};
constexpr std::chrono::seconds kQueryIntervalCancelled{1};
constexpr std::chrono::seconds kClientTimeout{60};

// Directory of the job's batch jobs, inside its work directory.
constexpr const char* kSessions = "slurm";

std::string quote(std::string_view s) {
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

std::string first_word(std::string_view s) {
  s = trim(s);
  return std::string(s.substr(0, s.find_first_of(" \t")));
}

// "code:signal" as Slurm prints ExitCode.
void parse_exit_code(std::string_view text, SlurmJob& job) {
  const std::size_t colon = text.find(':');
  job.exit_code = static_cast<int>(parse_u64(text.substr(0, colon)).value_or(0));
  if (colon != std::string_view::npos) {
    job.signal = static_cast<int>(parse_u64(text.substr(colon + 1)).value_or(0));
  }
}

// The fields of `scontrol show -o`: "Key=Value Key=Value ..."; a value runs up to the next
// " Word=" (values such as Command may contain spaces).
std::vector<std::pair<std::string, std::string>> fields(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t pos = 0;
  const auto key_at = [&line](std::size_t at) -> std::size_t {
    // Length of a key starting at `at` followed by '=', or 0.
    std::size_t end = at;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) != 0 ||
                                 line[end] == '_' || line[end] == ':' || line[end] == '/')) {
      ++end;
    }
    return end > at && end < line.size() && line[end] == '=' ? end - at : 0;
  };
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    const std::size_t klen = key_at(pos);
    if (klen == 0) break;
    const std::string key(line.substr(pos, klen));
    std::size_t vstart = pos + klen + 1;
    std::size_t vend = vstart;
    while (vend < line.size()) {
      if (line[vend] == ' ') {
        std::size_t next = vend;
        while (next < line.size() && line[next] == ' ') ++next;
        if (next >= line.size() || key_at(next) > 0) break;
      }
      ++vend;
    }
    out.emplace_back(key, std::string(trim(line.substr(vstart, vend - vstart))));
    pos = vend;
  }
  return out;
}

// A marker file: its existence says something.
bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::optional<std::string> read_marker(const fs::path& p) {
  auto text = read_small_file(p, 4096);
  if (!text.ok()) return std::nullopt;
  return std::string(trim(text.value()));
}

std::int64_t epoch_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The directory of a job's batch jobs and its name of batch job n.
fs::path sessions_dir(const fs::path& work_dir) {
  return work_dir / kSessions;
}

std::string session_name(int n, Where where) {
  return std::to_string(n) + "-" + std::string(where_name(where));
}

// Markers that say a batch job takes no more commands: the server ended it (`end`), the agent
// left (`exited`: idle, or told to), Slurm ended it (`terminated`, `final`).
bool session_closed(const fs::path& dir) {
  return file_exists(dir / "end") || file_exists(dir / "exited") ||
         file_exists(dir / "terminated") || file_exists(dir / "final");
}

int last_command(const fs::path& dir) {
  int last = 0;
  auto entries = list_directory(dir);
  if (!entries) return 0;
  for (const auto& e : *entries) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("cmd-") || !name.ends_with(".sh")) continue;
    if (auto k = parse_u64(std::string_view(name).substr(4, name.size() - 7))) {
      last = std::max(last, static_cast<int>(*k));
    }
  }
  return last;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing and state mapping

std::optional<std::string> parse_sbatch_id(std::string_view output) {
  for (const auto line : split(output, '\n')) {
    const std::string_view id = trim(line.substr(0, line.find(';')));
    if (!id.empty() && parse_u64(id)) return std::string(id);
  }
  return std::nullopt;
}

SlurmJob parse_scontrol_job(std::string_view output) {
  SlurmJob job;
  const std::string_view line = output.substr(0, output.find('\n'));
  std::string node_list;
  for (const auto& [key, value] : fields(line)) {
    if (key == "JobId") job.id = value;
    if (key == "JobState") {
      job.state = first_word(value);
      job.known = !job.state.empty();
    }
    if (key == "Reason") job.reason = value;
    if (key == "ExitCode") parse_exit_code(value, job);
    if (key == "BatchHost") job.node = value;
    if (key == "NodeList") node_list = value;
  }
  if (job.node.empty() && node_list != "(null)") job.node = node_list;
  return job;
}

SlurmJob parse_sacct_job(std::string_view output) {
  SlurmJob job;
  for (const auto line : split(output, '\n')) {
    const auto parts = split(trim(line), '|');
    if (parts.size() < 2 || trim(parts[0]).empty()) continue;
    job.state = first_word(parts[0]);
    parse_exit_code(trim(parts[1]), job);
    job.known = true;
    break;
  }
  return job;
}

bool is_active_state(std::string_view state) {
  static constexpr std::array<std::string_view, 11> kEnded = {
      "BOOT_FAIL",     "CANCELLED", "COMPLETED", "DEADLINE", "FAILED",      "NODE_FAIL",
      "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT",   "REVOKED",  "SPECIAL_EXIT"};
  return !state.empty() && std::find(kEnded.begin(), kEnded.end(), state) == kEnded.end();
}

ExitStatus ended_status(const SlurmJob& job, bool cancelled_by_us, bool started,
                        std::chrono::milliseconds time_limit) {
  ExitStatus s;
  const std::string who = "Slurm job " + job.id;
  if (!job.known) {
    s.note = who + " is no longer known to the cluster (scontrol, sacct) and left no exit status";
    return s;
  }
  const std::string where = job.node.empty() ? std::string() : " on " + job.node;
  if (job.state == "CANCELLED") {
    if (cancelled_by_us) {
      s.cancelled = true;
      s.note = who + " cancelled";
    } else {
      s.signal = SIGTERM;
      s.note = who + " was cancelled in Slurm, not by wheelforge";
    }
    return s;
  }
  if (job.state == "TIMEOUT") {
    s.timed_out = true;
    s.timeout = time_limit;
    s.note = who + ": TIMEOUT, its --time ran out" + where;
    return s;
  }
  if (job.state == "OUT_OF_MEMORY") {
    // As the kernel's OOM killer reports itself to the local executor: the OOM retry.
    s.signal = SIGKILL;
    s.note = who + ": OUT_OF_MEMORY" + where;
    return s;
  }
  if (job.state == "FAILED" || job.state == "COMPLETED") {
    // Never a success: the command itself reported nothing.
    if (job.signal != 0) {
      s.signal = job.signal;
    } else if (job.state == "FAILED" && job.exit_code != 0) {
      s.exited = true;
      s.code = job.exit_code;
    }
    s.note = who + ": " + job.state + where +
             (started ? " before the command reported how it ended"
                      : " before it started its commands (is DATA_DIR/builds on a filesystem "
                        "this node shares with the server? see its agent.out)");
    return s;
  }
  s.note = who + ": " + job.state +
           (job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")") + where;
  return s;
}

std::chrono::minutes time_limit(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return std::chrono::minutes(0);
  const auto minutes = (timeout.count() + 59'999) / 60'000;
  return std::chrono::minutes(std::max<std::int64_t>(1, minutes));
}

// ---------------------------------------------------------------------------------------------
// Scripts

std::vector<std::string> sbatch_argv(const SlurmConfig& config, const ProcessSpec& spec,
                                     const fs::path& session_dir,
                                     const std::vector<std::string>& exported) {
  const CommandPlacement& p = spec.placement;
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--job-name=wheelforge-job" + std::to_string(p.job_id) + "-" +
          std::string(where_name(p.where)),
      "--chdir=" + session_dir.string(),
      "--output=" + (session_dir / "agent.out").string(),
      "--nodes=1",
      "--ntasks=1",
  };
  std::string exports;
  for (const auto& name : exported) exports += (exports.empty() ? "" : ",") + name;
  argv.push_back("--export=" + (exports.empty() ? std::string("NONE") : exports));
  if (p.where == Where::test) {
    argv.emplace_back("--cpus-per-task=1");
    const std::string& partition =
        config.smoke_partition.empty() ? config.partition : config.smoke_partition;
    if (!partition.empty()) argv.push_back("--partition=" + partition);
    if (!config.gres.empty()) argv.push_back("--gres=" + config.gres);
  } else {
    argv.push_back("--cpus-per-task=" + std::to_string(std::max(1U, p.cpus)));
    if (p.memory_bytes > 0) {
      argv.push_back("--mem=" + std::to_string((p.memory_bytes + kMiB - 1) / kMiB) + "M");
    }
    if (!config.partition.empty()) argv.push_back("--partition=" + config.partition);
  }
  if (const auto limit = time_limit(spec.timeout); limit.count() > 0) {
    argv.push_back("--time=" + std::to_string(limit.count()));
  }
  if (!config.account.empty()) argv.push_back("--account=" + config.account);
  argv.insert(argv.end(), config.sbatch_args.begin(), config.sbatch_args.end());
  argv.push_back((session_dir / "agent.sh").string());
  return argv;
}

std::string agent_script(const fs::path& session_dir, std::chrono::seconds idle,
                         std::chrono::seconds grace) {
  std::string s;
  s += "#!/bin/bash\n";
  s += "# wheelforge: the agent of one batch job. It runs the commands the server writes into\n";
  s += "# this directory (cmd-1.sh, cmd-2.sh, ...) one at a time, each in its own process group,\n";
  s += "# and records when each started (cmd-K.started) and how it ended (cmd-K.exit).\n";
  s += "# cmd-K.stop asks it to stop command K; `end` to leave once idle.\n";
  s += "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
  s += "export PATH\n";
  s += "dir=" + quote(session_dir.string()) + "\n";
  s += "idle_limit=" + std::to_string(idle.count()) + "\n";
  s += "grace=" + std::to_string(std::max<std::int64_t>(1, grace.count())) + "\n";
  s += R"WF(cd "$dir" || {
  echo "wheelforge: cannot enter $dir on $(hostname): the builds directory must be on a filesystem this node shares with the server" >&2
  exit 70
}
publish() { printf '%s\n' "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"; }
publish started "${SLURM_JOB_ID:-} $(hostname) ${SLURM_CPUS_PER_TASK:-} ${SLURM_MEM_PER_NODE:-} $(date +%s)"
child=
terminating=
on_term() {
  terminating=1
  if [ -n "$child" ]; then kill -TERM -- "-$child" 2>/dev/null; fi
}
trap on_term TERM INT
n=1
idle=0
while [ -z "$terminating" ]; do
  [ -d "$dir" ] || exit 0
  if [ -e "cmd-$n.sh" ]; then
    setsid /bin/bash "cmd-$n.sh" </dev/null >/dev/null 2>&1 &
    child=$!
    publish "cmd-$n.started" "$(date +%s)"
    stopped=
    while kill -0 "$child" 2>/dev/null; do
      if [ -z "$stopped" ] && [ -e "cmd-$n.stop" ]; then
        kill -TERM -- "-$child" 2>/dev/null
        stopped=$SECONDS
      elif [ -n "$stopped" ] && [ $((SECONDS - stopped)) -ge "$grace" ]; then
        kill -KILL -- "-$child" 2>/dev/null
      fi
      sleep 0.2
    done
    wait "$child"
    status=$?
    child=
    [ -n "$terminating" ] && break
    publish "cmd-$n.exit" "$status"
    n=$((n + 1))
    idle=0
    continue
  fi
  if [ -e end ]; then
    publish exited end
    exit 0
  fi
  if [ "$idle" -ge $((idle_limit * 5)) ]; then
    publish exited idle
    exit 0
  fi
  sleep 0.2
  idle=$((idle + 1))
done
publish terminated "$(date +%s)"
exit 143
)WF";
  return s;
}

std::string_view parallelism_awk() {
  // Integer arithmetic where C++ uses it (bytes are whole, the division floors); doubles
  // elsewhere, as in core::compute_parallelism.
  return R"WF(function bytes(t,   x, c) { x = gb * 1073741824 * t; c = int(x); if (c < x) c++; return c }
BEGIN {
  if (gb + 0 <= 0) gb = 4
  cores = int(cpus + 0); if (cores < 1) cores = 1
  budget = int(mem_mb + 0) * 1048576
  threads = int(archs + 0); if (threads < 1) threads = 1; if (threads > 4) threads = 4
  while (threads > 1 && bytes(threads) > budget) threads--
  per = bytes(threads)
  jobs = int(budget / per)
  if ((jobs + 1) * per <= budget) jobs++
  if (jobs > 0 && jobs * per > budget) jobs--
  if (jobs > cores) jobs = cores
  if (jobs < 1) jobs = 1
  for (i = 0; i < halvings; i++) {
    if (jobs > 1) jobs = int(jobs / 2)
    else if (threads > 1) { jobs = 1; threads = int(threads / 2) }
  }
  printf "%d %d\n", jobs, threads
})WF";
}

std::string command_script(const ProcessSpec& spec, const ContainerConfig* containers,
                           const std::string& container_name) {
  const CommandPlacement& p = spec.placement;
  const fs::path cwd = spec.cwd.empty() ? p.work_dir : spec.cwd;
  std::string s;
  s += "#!/bin/bash\n";
  s += "# wheelforge: a command of job " + std::to_string(p.job_id) + " (" +
       std::string(where_name(p.where)) + "), run by the batch job's agent\n";
  s += "exec </dev/null >>" + quote(spec.log_file.string()) + " 2>&1\n";
  s += "cd " + quote(cwd.string()) + " || exit 127\n";
  s += "wf_cpus=${SLURM_CPUS_PER_TASK:-1}\n";
  s += "wf_memory_mb=${SLURM_MEM_PER_NODE:-}\n";
  s += "if [ -z \"$wf_memory_mb\" ] && [ -n \"${SLURM_MEM_PER_CPU:-}\" ]; then "
       "wf_memory_mb=$((SLURM_MEM_PER_CPU * wf_cpus)); fi\n";
  std::vector<std::string> omitted;
  if (p.sizing) {
    std::string planned_jobs = "1";
    std::string planned_threads = "1";
    for (const auto& [k, v] : spec.env) {
      if (k == "MAX_JOBS") planned_jobs = v;
      if (k == "NVCC_THREADS") planned_threads = v;
    }
    char gb[64];
    std::snprintf(gb, sizeof gb, "%.17g", p.sizing->gb_per_job);
    // What Slurm granted decides; without a memory figure, the server's plan stands.
    s += "wf_max_jobs=" + quote(planned_jobs) + " wf_nvcc_threads=" + quote(planned_threads) + "\n";
    s += "if [ -n \"$wf_memory_mb\" ]; then\n";
    s +=
        "  set -- $(awk -v cpus=\"$wf_cpus\" -v mem_mb=\"$wf_memory_mb\" -v gb=" + std::string(gb) +
        " -v archs=" + std::to_string(p.sizing->arch_count) +
        " -v halvings=" + std::to_string(p.sizing->halvings) + " " + quote(parallelism_awk()) +
        ")\n";
    s += "  if [ -n \"$2\" ]; then wf_max_jobs=$1 wf_nvcc_threads=$2; fi\n";
    s += "fi\n";
    s += "echo \"==> [building] batch job ${SLURM_JOB_ID:-} on $(hostname) was granted $wf_cpus "
         "CPU(s) and ${wf_memory_mb:-?} MiB: MAX_JOBS=$wf_max_jobs "
         "NVCC_THREADS=$wf_nvcc_threads\"\n";
    omitted = {"MAX_JOBS", "NVCC_THREADS"};
  }
  if (containers == nullptr) {
    s += "exec /usr/bin/env -i";
    for (const auto& [k, v] : spec.env) {
      if (std::find(omitted.begin(), omitted.end(), k) != omitted.end()) continue;
      s += " " + quote(k + "=" + v);
    }
    if (p.sizing) s += " \"MAX_JOBS=$wf_max_jobs\" \"NVCC_THREADS=$wf_nvcc_threads\"";
    for (const auto& a : spec.argv) s += " " + quote(a);
    s += "\n";
    return s;
  }
  // In a container: the grant's limits, the container removed when the job or the command
  // is stopped (SIGTERM: the engine's client would leave it running).
  ContainerRun run;
  run.name = container_name;
  const std::string* image = image_for(*containers, p.cuda, p.python);
  run.image = image != nullptr ? *image : std::string();
  run.env_omitted = omitted;
  if (p.sizing) run.env_by_name = {"MAX_JOBS", "NVCC_THREADS"};
  if (p.where == Where::test) run.env_by_name.emplace_back("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> argv = container_run_argv(*containers, spec, run);
  s += "wf_opts=(--cpus \"$wf_cpus\")\n";
  s += "if [ -n \"$wf_memory_mb\" ]; then wf_opts+=(--memory \"${wf_memory_mb}m\" --memory-swap "
       "\"${wf_memory_mb}m\"); fi\n";
  if (containers->as_server_user) s += "wf_opts+=(--user \"$(id -u):$(id -g)\")\n";
  if (p.sizing) s += "export MAX_JOBS=\"$wf_max_jobs\" NVCC_THREADS=\"$wf_nvcc_threads\"\n";
  std::string remove;
  for (const auto& a : container_remove_argv(*containers, container_name)) remove += quote(a) + " ";
  s += "trap " + quote(remove + ">/dev/null 2>&1") + " TERM\n";
  // The options go right after `run`.
  const std::size_t run_at = 1 + containers->engine_args.size();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) s += " ";
    s += quote(argv[i]);
    if (i == run_at) s += " \"${wf_opts[@]}\"";
  }
  s += " &\n";
  s += "wf_client=$!\n";
  s += "wait \"$wf_client\"\n";
  s += "wf_status=$?\n";
  s += "wait \"$wf_client\" 2>/dev/null\n";
  s += "exit \"$wf_status\"\n";
  return s;
}

// ---------------------------------------------------------------------------------------------
// The executor

namespace {

class SlurmExecutor;

// One batch job of a wheelforge job (a directory DATA_DIR/builds/job-<id>/slurm/<n>-<where>).
struct Session {
  fs::path dir;
  Where where = Where::build;
  int n = 0;
  std::string id;  // Slurm's job id
};

class SlurmExecution final : public Execution {
 public:
  SlurmExecution(SlurmExecutor& owner, Session session, int number, ProcessSpec spec)
      : owner_(owner), session_(std::move(session)), number_(number), spec_(std::move(spec)) {}

  std::optional<ExitStatus> poll() override;
  void cancel() override;
  [[nodiscard]] std::string remote_id() const override { return session_.id; }

 private:
  [[nodiscard]] fs::path file(std::string_view suffix) const {
    return session_.dir / ("cmd-" + std::to_string(number_) + std::string(suffix));
  }
  std::optional<ExitStatus> from_exit_file();

  SlurmExecutor& owner_;
  Session session_;
  int number_;
  ProcessSpec spec_;
  bool cancel_requested_ = false;
  bool stop_requested_ = false;
  bool noted_pending_ = false;
  std::optional<Clock::time_point> last_query_;
  std::optional<ExitStatus> status_;
};

class SlurmExecutor final : public Executor {
 public:
  SlurmExecutor(SlurmConfig config, std::optional<ContainerConfig> containers, ClientRunner client)
      : config_(std::move(config)), containers_(std::move(containers)), client_(std::move(client)) {
    if (!client_) {
      client_ = [](const std::vector<std::string>& argv) {
        return run_client(argv, server_environment(), kClientTimeout);
      };
    }
  }

  std::string_view name() const override { return "slurm"; }
  Capacity capacity() override { return Capacity{0, 1}; }
  Admission admission() const override { return Admission::cluster; }
  unsigned default_cpus() const override { return config_.default_cpus; }
  bool reattaches() const override { return true; }

  Status prepare(const fs::path& work_dir) override { return make_directories(work_dir); }

  Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) override {
    const CommandPlacement& p = spec.placement;
    if (p.where == Where::server) return start_local(spec);
    if (containers_ && image_for(*containers_, p.cuda, p.python) == nullptr) {
      return make_error(Errc::invalid, "no container image for CUDA " + p.cuda + " (Python " +
                                           p.python + ") in [build.images]");
    }
    std::lock_guard lock(mu_);
    std::vector<Session> sessions = sessions_of(p.work_dir);
    if (p.where == Where::test) {
      // The build is over: its batch job need not wait for more.
      for (const auto& s : sessions) {
        if (s.where == Where::build && !session_closed(s.dir)) end_session(s.dir);
      }
    }
    std::optional<Session> open;
    for (auto it = sessions.rbegin(); it != sessions.rend(); ++it) {
      if (it->where != p.where) continue;
      if (!session_closed(it->dir)) {
        const SlurmJob job = query(it->id);
        if (job.known && is_active_state(job.state)) {
          open = *it;
        } else {
          mark_final(it->dir, job);
        }
      }
      break;
    }
    if (open) {
      const int k = last_command(open->dir) + 1;
      if (auto st = write_file_atomic(open->dir / ("cmd-" + std::to_string(k) + ".sh"),
                                      script_for(spec, *open, k));
          !st) {
        return st.error();
      }
      return std::unique_ptr<Execution>(std::make_unique<SlurmExecution>(*this, *open, k, spec));
    }
    int next = 1;
    for (const auto& s : sessions) next = std::max(next, s.n + 1);
    auto created = submit(spec, next);
    if (!created) return created.error();
    return std::unique_ptr<Execution>(std::make_unique<SlurmExecution>(*this, *created, 1, spec));
  }

  Result<std::unique_ptr<Execution>> reattach(const ProcessSpec& spec) override {
    const CommandPlacement& p = spec.placement;
    std::lock_guard lock(mu_);
    const std::vector<Session> sessions = sessions_of(p.work_dir);
    for (auto it = sessions.rbegin(); it != sessions.rend(); ++it) {
      if (it->where != p.where) continue;
      const int k = last_command(it->dir);
      auto written = read_small_file(it->dir / ("cmd-" + std::to_string(k) + ".sh"), 1U << 22U);
      if (k == 0 || !written.ok()) {
        return make_error(Errc::not_found, "batch job " + it->id + " has no command");
      }
      if (written.value() != script_for(spec, *it, k)) {
        return make_error(Errc::not_found, "the last command of batch job " + it->id +
                                               " is not this build (the configuration changed?)");
      }
      return std::unique_ptr<Execution>(std::make_unique<SlurmExecution>(*this, *it, k, spec));
    }
    return make_error(Errc::not_found,
                      "no " + std::string(where_name(p.where)) + " batch job of this job");
  }

  void release(const CommandPlacement& job, Release how) override {
    std::lock_guard lock(mu_);
    for (const auto& s : sessions_of(job.work_dir)) {
      if (session_closed(s.dir)) continue;
      if (how == Release::abandoned) {
        const SlurmJob state = query(s.id);
        if (state.known && is_active_state(state.state)) {
          scancel(s.id);
          note_in(job.log, "cancelled batch job " + s.id + " left from the previous attempt");
        }
      }
      end_session(s.dir);
    }
  }

  std::vector<std::string> check(const fs::path& builds_dir, std::chrono::seconds limit,
                                 std::vector<std::string>& notes) override;

  std::string read_log(const fs::path& log, std::uint64_t offset, std::size_t max) override {
    return read_file_chunk(log, offset, max);
  }

  LogChunk read_log_tail(const fs::path& log, std::size_t max) override {
    LogChunk chunk;
    chunk.data = build::read_log_tail(log, max, chunk.offset);
    return chunk;
  }

  // ---- for executions

  // The batch job as scontrol knows it, else as sacct does (clusters with accounting).
  SlurmJob query(const std::string& id) {
    SlurmJob job;
    job.id = id;
    if (id.empty()) return job;
    auto shown = client_({"scontrol", "show", "job", "-o", id});
    if (shown && shown->status.success()) {
      SlurmJob parsed = parse_scontrol_job(shown->output);
      if (parsed.known) {
        parsed.id = id;
        return parsed;
      }
    }
    if (shown && !shown->status.success() &&
        shown->output.find("Invalid job id") == std::string::npos) {
      // slurmctld did not answer: say the job runs, and ask again later.
      job.known = true;
      job.state = "UNKNOWN";
      return job;
    }
    auto accounted = client_({"sacct", "-X", "-n", "-P", "-j", id, "-o", "State,ExitCode"});
    if (accounted && accounted->status.success()) {
      SlurmJob parsed = parse_sacct_job(accounted->output);
      if (parsed.known) {
        parsed.id = id;
        return parsed;
      }
    }
    return job;
  }

  void scancel(const std::string& id) { (void)client_({"scancel", id}); }

  static void end_session(const fs::path& dir) { (void)write_file_atomic(dir / "end", "end\n"); }

  static void mark_final(const fs::path& dir, const SlurmJob& job) {
    (void)write_file_atomic(dir / "final", (job.known ? job.state : std::string("unknown")) + "\n");
  }

  // Moves a command whose batch job ended before it started it into a new batch job.
  Result<Session> resubmit(const ProcessSpec& spec) {
    std::lock_guard lock(mu_);
    int next = 1;
    for (const auto& s : sessions_of(spec.placement.work_dir)) next = std::max(next, s.n + 1);
    return submit(spec, next);
  }

  std::chrono::milliseconds session_limit(const ProcessSpec& spec) const {
    return time_limit(spec.timeout);
  }

 private:
  std::string script_for(const ProcessSpec& spec, const Session& session, int k) const {
    return command_script(
        spec, containers_ ? &*containers_ : nullptr,
        container_name(spec.placement, "s" + std::to_string(session.n) + "-c" + std::to_string(k)));
  }

  std::vector<Session> sessions_of(const fs::path& work_dir) const {
    std::vector<Session> out;
    auto entries = list_directory(sessions_dir(work_dir));
    if (!entries) return out;
    for (const auto& e : *entries) {
      const std::string name = e.path().filename().string();
      const std::size_t dash = name.find('-');
      if (dash == std::string::npos) continue;
      const auto n = parse_u64(std::string_view(name).substr(0, dash));
      const std::string_view where = std::string_view(name).substr(dash + 1);
      if (!n || (where != "build" && where != "test")) continue;
      Session s;
      s.dir = e.path();
      s.n = static_cast<int>(*n);
      s.where = where == "test" ? Where::test : Where::build;
      s.id = read_marker(e.path() / "job-id").value_or("");
      out.push_back(std::move(s));
    }
    std::sort(out.begin(), out.end(), [](const Session& a, const Session& b) { return a.n < b.n; });
    return out;
  }

  // A new batch job for `spec` (its first command), numbered `n`.
  Result<Session> submit(const ProcessSpec& spec, int n) {
    const CommandPlacement& p = spec.placement;
    Session s;
    s.n = n;
    s.where = p.where;
    s.dir = sessions_dir(p.work_dir) / session_name(n, p.where);
    if (auto st = fresh_directory(s.dir); !st) return st.error();
    if (auto st = write_file_atomic(s.dir / "cmd-1.sh", script_for(spec, s, 1)); !st) {
      return st.error();
    }
    const auto grace = std::chrono::duration_cast<std::chrono::seconds>(spec.kill_grace);
    if (auto st =
            write_file_atomic(s.dir / "agent.sh", agent_script(s.dir, config_.idle_timeout, grace));
        !st) {
      return st.error();
    }
    std::vector<std::string> exported;
    if (containers_) {
      // The engine's settings, by name (their values come from the server's environment).
      for (const auto& [k, v] : engine_environment()) {
        if (k != "PATH" && k != "HOME" && k != "USER" && k != "LOGNAME" && k != "LANG" &&
            k != "TMPDIR") {
          exported.push_back(k);
        }
      }
    }
    const std::vector<std::string> argv = sbatch_argv(config_, spec, s.dir, exported);
    auto submitted = client_(argv);
    const std::string what = std::string(where_name(p.where));
    if (!submitted) {
      mark_final(s.dir, SlurmJob{});
      return make_error(Errc::unavailable, "sbatch: " + submitted.error().message);
    }
    const auto id = parse_sbatch_id(submitted->output);
    if (!submitted->status.success() || !id) {
      mark_final(s.dir, SlurmJob{});
      return make_error(Errc::unavailable,
                        "sbatch failed (" + submitted->status.describe() +
                            "): " + sanitize_for_log(trim(submitted->output), 1000));
    }
    s.id = *id;
    (void)write_file_atomic(s.dir / "job-id", s.id + "\n");
    std::string request = p.where == Where::test
                              ? "1 CPU" + (config_.gres.empty() ? "" : ", --gres=" + config_.gres)
                              : std::to_string(std::max(1U, p.cpus)) + " CPU(s), " +
                                    std::to_string((p.memory_bytes + kMiB - 1) / kMiB) + " MiB";
    if (const auto limit = time_limit(spec.timeout); limit.count() > 0) {
      request += ", --time=" + std::to_string(limit.count()) + " min";
    }
    note_in(p.log, "[slurm] " + what + " commands run in batch job " + s.id + " (" + request +
                       "; " + command_line(argv) + ")");
    return s;
  }

  SlurmConfig config_;
  std::optional<ContainerConfig> containers_;
  ClientRunner client_;
  std::mutex mu_;  // serializes the choice and creation of batch jobs
};

std::optional<ExitStatus> SlurmExecution::from_exit_file() {
  const auto text = read_marker(file(".exit"));
  if (!text) return std::nullopt;
  ExitStatus s;
  s.exited = true;
  s.code = static_cast<int>(parse_u64(*text).value_or(255));
  if (stop_requested_) {
    s.timed_out = true;
    s.timeout = spec_.timeout;
  }
  if (cancel_requested_) s.cancelled = true;
  // A failed build ends its batch job: a retry gets a new one, sized afresh.
  if (spec_.placement.sizing && !s.success()) SlurmExecutor::end_session(session_.dir);
  return s;
}

std::optional<ExitStatus> SlurmExecution::poll() {
  if (status_) return status_;
  if (auto s = from_exit_file()) {
    status_ = s;
    return status_;
  }
  // The command's timeout runs from its start on the node, not from its submission.
  if (!stop_requested_ && !cancel_requested_ && spec_.timeout.count() > 0) {
    if (const auto started = read_marker(file(".started"))) {
      const auto at = parse_u64(*started);
      if (at && (epoch_now() - static_cast<std::int64_t>(*at)) * 1000 >= spec_.timeout.count()) {
        (void)write_file_atomic(file(".stop"), "timeout\n");
        stop_requested_ = true;
        note_in(spec_.placement.log, "[slurm] command " + std::to_string(number_) +
                                         " of batch job " + session_.id +
                                         " timed out; stopping it");
      }
    }
  }
  const auto interval = cancel_requested_ ? kQueryIntervalCancelled : kQueryInterval;
  const auto now = Clock::now();
  if (last_query_ && now - *last_query_ < interval) return std::nullopt;
  last_query_ = now;
  const SlurmJob job = owner_.query(session_.id);
  if (job.known && is_active_state(job.state)) {
    if (job.state == "PENDING" && !noted_pending_ && !job.reason.empty() && job.reason != "None") {
      noted_pending_ = true;
      note_in(spec_.placement.log,
              "[slurm] batch job " + session_.id + " is pending (" + job.reason + ")");
    }
    return std::nullopt;
  }
  // Ended: the exit file may have come just before.
  if (auto s = from_exit_file()) {
    status_ = s;
    return status_;
  }
  SlurmExecutor::mark_final(session_.dir, job);
  const bool agent_started = file_exists(session_.dir / "started");
  const bool command_started = file_exists(file(".started"));
  if (!command_started && !cancel_requested_ && agent_started &&
      file_exists(session_.dir / "exited")) {
    // The agent left (idle) just as this command came: run it in a new batch job.
    auto moved = owner_.resubmit(spec_);
    if (moved) {
      session_ = *moved;
      number_ = 1;
      last_query_.reset();
      return std::nullopt;
    }
  }
  ExitStatus s = ended_status(
      job, cancel_requested_, agent_started,
      std::chrono::duration_cast<std::chrono::milliseconds>(owner_.session_limit(spec_)));
  if (!job.known) s.note += " (batch job " + session_.id + ")";
  note_in(spec_.placement.log, "[slurm] " + s.describe());
  status_ = s;
  return status_;
}

void SlurmExecution::cancel() {
  if (status_ || cancel_requested_) return;
  cancel_requested_ = true;
  last_query_.reset();
  owner_.scancel(session_.id);
}

std::vector<std::string> SlurmExecutor::check(const fs::path& builds_dir,
                                              std::chrono::seconds limit,
                                              std::vector<std::string>& notes) {
  std::vector<std::string> problems;
  const fs::path dir = builds_dir / (".slurm-check-" + hex_encode(crypto::random_bytes(6)));
  const std::string token = hex_encode(crypto::random_bytes(16));
  if (auto st = fresh_directory(dir); !st) {
    problems.push_back("build.executor: " + st.error().message);
    return problems;
  }
  struct Cleanup {
    fs::path dir;
    ~Cleanup() { (void)remove_tree(dir); }
  } cleanup{dir};
  if (auto st = write_file_atomic(dir / "probe", token + "\n"); !st) {
    problems.push_back("build.executor: " + st.error().message);
    return problems;
  }
  const std::string script =
      "#!/bin/bash\n"
      "# wheelforge config check: does this node see the server's builds directory?\n"
      "cd " +
      quote(dir.string()) +
      " || exit 70\n"
      "{ cat probe; hostname; } > seen.tmp && mv -f seen.tmp seen\n";
  if (auto st = write_file_atomic(dir / "check.sh", script); !st) {
    problems.push_back("build.executor: " + st.error().message);
    return problems;
  }
  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--job-name=wheelforge-check",
                                   "--chdir=" + dir.string(),
                                   "--output=" + (dir / "out").string(),
                                   "--nodes=1",
                                   "--ntasks=1",
                                   "--cpus-per-task=1",
                                   "--time=1"};
  if (!config_.partition.empty()) argv.push_back("--partition=" + config_.partition);
  if (!config_.account.empty()) argv.push_back("--account=" + config_.account);
  argv.insert(argv.end(), config_.sbatch_args.begin(), config_.sbatch_args.end());
  argv.push_back((dir / "check.sh").string());
  auto submitted = client_(argv);
  const auto id = submitted ? parse_sbatch_id(submitted->output) : std::nullopt;
  if (!submitted || !submitted->status.success() || !id) {
    problems.push_back(
        "build.executor: sbatch failed: " +
        (submitted ? sanitize_for_log(trim(submitted->output), 500) : submitted.error().message));
    return problems;
  }
  const auto deadline = Clock::now() + limit;
  SlurmJob job;
  while (true) {
    if (auto seen = read_marker(dir / "seen")) {
      const auto lines = split(*seen, '\n');
      if (!lines.empty() && trim(lines[0]) == token) {
        notes.push_back("batch job " + *id + " on " +
                        (lines.size() > 1 ? std::string(trim(lines[1])) : std::string("?")) +
                        " read a file the server wrote into " + builds_dir.string());
        return problems;
      }
    }
    job = query(*id);
    if (job.known && !is_active_state(job.state)) {
      if (read_marker(dir / "seen")) continue;
      problems.push_back("build.executor: batch job " + *id + " ended " + job.state +
                         (job.node.empty() ? "" : " on " + job.node) + " without reading " +
                         (dir / "probe").string() +
                         ": DATA_DIR/builds must be on a filesystem the server and the nodes "
                         "share, at the same path");
      return problems;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  scancel(*id);
  notes.push_back("batch job " + *id + " did not run within " + std::to_string(limit.count()) +
                  "s (" + (job.state.empty() ? "unknown" : job.state) +
                  (job.reason.empty() ? "" : ", " + job.reason) +
                  "): the shared builds directory was not checked");
  return problems;
}

}  // namespace

std::unique_ptr<Executor> make_slurm_executor(const SlurmConfig& config,
                                              const ContainerConfig* containers,
                                              ClientRunner client) {
  return std::make_unique<SlurmExecutor>(
      config, containers ? std::optional<ContainerConfig>(*containers) : std::nullopt,
      std::move(client));
}

}  // namespace wf::build
