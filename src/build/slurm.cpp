#include "slurm.hpp"

#include <algorithm>
#include <mutex>
#include <thread>

#include "container.hpp"
#include "files.hpp"
#include "units.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Where = CommandPlacement::Where;

namespace {

// How often a running command's batch job is asked about (its files are looked at on every
// poll); more often once it was cancelled.
constexpr std::chrono::seconds kQueryInterval{5};
constexpr std::chrono::seconds kQueryIntervalCancelled{1};
constexpr std::chrono::seconds kSlurmClientTimeout{60};

// Directory of the job's batch jobs, inside its work directory.
constexpr const char* kSessions = "slurm";

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
  // Every command of a batch job goes on without the server.
  [[nodiscard]] bool detached() const override { return true; }

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
        return run_client(argv, server_environment(), kSlurmClientTimeout);
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

  std::vector<std::string> check(const fs::path& builds_dir, const ResourceRequest& probe,
                                 std::chrono::seconds limit,
                                 std::vector<std::string>& notes) override;

  Result<FittedRequest> fit_request(const ResourceRequest& request) override {
    const std::string where = config_.partition.empty() ? std::string("the default partition")
                                                        : "partition " + config_.partition;
    auto listed = client_(sinfo_argv(config_.partition));
    std::string why;
    if (!listed) {
      why = listed.error().message;
    } else if (!listed->status.success()) {
      why =
          "sinfo " + listed->status.describe() + ": " + sanitize_for_log(trim(listed->output), 300);
    } else if (auto nodes = parse_sinfo_nodes(listed->output, config_.partition); !nodes.empty()) {
      return fit_to_nodes(request, nodes, where);
    } else {
      why = "sinfo lists no node";
    }
    return FittedRequest{request, "the nodes of " + where + " could not be read (" + why +
                                      "): the request stands as it is"};
  }

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
  if (job.known && job.state == "PENDING" && !cancel_requested_ && never_starts(job.reason)) {
    // Waiting cannot help: the batch job goes, and the command fails with the reason.
    owner_.scancel(session_.id);
    SlurmExecutor::mark_final(session_.dir, job);
    const CommandPlacement& p = spec_.placement;
    ExitStatus s;
    s.note =
        "Slurm batch job " + session_.id + " can never start: it is pending for " + job.reason +
        " (it asked for " +
        (p.where == Where::test ? std::string("1 CPU")
                                : std::to_string(std::max(1U, p.cpus)) + " CPU(s) and " +
                                      std::to_string((p.memory_bytes + kMiB - 1) / kMiB) + " MiB") +
        (p.where == Where::test ? " for the smoke test" : std::string()) +
        "; see `scontrol show job " + session_.id + "` for its limits); cancelled";
    note_in(p.log, "[slurm] " + s.note);
    status_ = s;
    return status_;
  }
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

std::vector<std::string> SlurmExecutor::check(const fs::path& given_builds_dir,
                                              const ResourceRequest& probe,
                                              std::chrono::seconds limit,
                                              std::vector<std::string>& notes) {
  std::vector<std::string> problems;
  // The batch job gets these paths as they are: a relative one (the default ./data) would be
  // taken from the job's own working directory.
  std::error_code ec;
  const fs::path builds_dir = fs::absolute(given_builds_dir, ec);
  if (ec) {
    problems.push_back("build.executor: " + given_builds_dir.string() + ": " + ec.message());
    return problems;
  }
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
      shell_quote(dir.string()) +
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
                                   "--cpus-per-task=" + std::to_string(std::max(1U, probe.cpus)),
                                   "--time=1"};
  // As large as a build job, so that a request the partition never grants shows here.
  const std::uint64_t probe_mib = (probe.memory_bytes + kMiB - 1) / kMiB;
  if (probe_mib > 0) argv.push_back("--mem=" + std::to_string(probe_mib) + "M");
  const std::string size = std::to_string(std::max(1U, probe.cpus)) + " CPU(s)" +
                           (probe_mib > 0 ? ", " + std::to_string(probe_mib) + " MiB" : "");
  if (!config_.partition.empty()) argv.push_back("--partition=" + config_.partition);
  if (!config_.account.empty()) argv.push_back("--account=" + config_.account);
  argv.insert(argv.end(), config_.sbatch_args.begin(), config_.sbatch_args.end());
  argv.push_back((dir / "check.sh").string());
  auto submitted = client_(argv);
  const auto id = submitted ? parse_sbatch_id(submitted->output) : std::nullopt;
  if (!submitted || !submitted->status.success() || !id) {
    problems.push_back(
        "build.executor: sbatch of a batch job of the size of a build job (" + size + ") failed: " +
        (submitted ? sanitize_for_log(trim(submitted->output), 500) : submitted.error().message));
    return problems;
  }
  const auto deadline = Clock::now() + limit;
  SlurmJob job;
  while (true) {
    if (auto seen = read_marker(dir / "seen")) {
      const auto lines = split(*seen, '\n');
      if (!lines.empty() && trim(lines[0]) == token) {
        notes.push_back("batch job " + *id + " (" + size + ") on " +
                        (lines.size() > 1 ? std::string(trim(lines[1])) : std::string("?")) +
                        " read a file the server wrote into " + builds_dir.string());
        return problems;
      }
    }
    job = query(*id);
    if (job.known && job.state == "PENDING" && never_starts(job.reason)) {
      scancel(*id);
      problems.push_back("build.executor: a batch job of the size of a build job (" + size +
                         ") can never start: it is pending for " + job.reason + " (batch job " +
                         *id + ", cancelled)");
      return problems;
    }
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
