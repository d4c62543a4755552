#include "wheelforge/build/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <system_error>
#include <thread>

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {
namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// Lives as long as the spawn call; the posix_spawn objects need explicit destruction.
struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
};

struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};

Status validate(const ProcessSpec& spec) {
  Problems problems;
  if (spec.argv.empty()) {
    problems.add("argv is empty");
  } else if (spec.argv.front().empty()) {
    problems.add("the program name (argv[0]) is empty");
  }
  for (const auto& arg : spec.argv) {
    if (arg.find('\0') != std::string::npos) problems.add("an argument contains a NUL byte");
  }
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find_first_of(std::string_view("=\0", 2)) != std::string::npos) {
      problems.add("environment variable name '" + sanitize_for_log(name) + "' is invalid");
    }
    if (value.find('\0') != std::string::npos) {
      problems.add("environment variable " + sanitize_for_log(name) + " contains a NUL byte");
    }
  }
  if (spec.log_file.empty()) problems.add("no log file");
  if (spec.timeout.count() < 0) problems.add("the timeout is negative");
  if (spec.kill_grace.count() < 0) problems.add("the kill grace period is negative");
  if (!problems.empty()) return problems.to_error(Errc::invalid);
  return ok_status();
}

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// execve does not search PATH, and posix_spawnp would search the server's PATH rather than the
// build's; resolving here against the build's own PATH also lets us name the missing program.
Result<fs::path> resolve_program_in(const ProcessSpec& spec, const fs::path& cwd) {
  const std::string& name = spec.argv.front();
  if (name.find('/') != std::string::npos) {
    const fs::path program = fs::path(name).is_absolute() ? fs::path(name) : cwd / name;
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0) {
      const int err = errno;
      return make_error(err == ENOENT || err == ENOTDIR ? Errc::not_found : Errc::invalid,
                        "cannot start '" + name + "': " + errno_text(err));
    }
    if (!is_executable_file(program)) {
      return make_error(Errc::invalid, "cannot start '" + name + "': not an executable file");
    }
    return program;
  }
  const auto path_var = std::find_if(spec.env.begin(), spec.env.end(),
                                     [](const auto& kv) { return kv.first == "PATH"; });
  if (path_var == spec.env.end()) {
    return make_error(Errc::not_found,
                      "cannot start '" + name + "': the build environment has no PATH");
  }
  for (const std::string_view dir : split(path_var->second, ':')) {
    // An empty entry traditionally means the current directory; a build must not pick up
    // programs from its source tree by accident.
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (candidate.is_relative()) candidate = cwd / candidate;
    if (is_executable_file(candidate)) return candidate;
  }
  return make_error(Errc::not_found, "cannot start '" + name + "': not found in PATH=" +
                                         sanitize_for_log(path_var->second, 1000));
}

Error spawn_error(int err, const std::string& program) {
  Errc code = Errc::internal;
  switch (err) {
    case ENOENT:
      code = Errc::not_found;
      break;
    case EACCES:
    case ENOEXEC:
    case ENOTDIR:
    case ELOOP:
    case ENAMETOOLONG:
      code = Errc::invalid;
      break;
    case EAGAIN:
    case ENOMEM:
      code = Errc::unavailable;
      break;
    default:
      break;
  }
  return make_error(code, "cannot start '" + program + "': " + errno_text(err));
}

}  // namespace

Result<fs::path> resolve_program(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty()) {
    return make_error(Errc::invalid, "the program name (argv[0]) is empty");
  }
  std::error_code ec;
  const fs::path cwd = spec.cwd.empty() ? fs::current_path(ec) : fs::absolute(spec.cwd, ec);
  if (ec) return make_error(Errc::io, "cannot resolve the working directory: " + ec.message());
  return resolve_program_in(spec, cwd);
}

std::string ExitStatus::describe() const {
  std::string out;
  if (cancelled) {
    out = "cancelled";
  } else if (timed_out) {
    out = "timed out after " + format_duration(timeout);
  } else if (exited) {
    out = "exit " + std::to_string(code);
  } else if (signal != 0) {
    out = "killed by " + signal_name(signal);
  } else if (!note.empty()) {
    return note;  // all there is to say (a batch job that ended without the command's status)
  } else {
    out = "unknown exit status";
  }
  return note.empty() ? out : out + " (" + note + ")";
}

std::string_view where_name(CommandPlacement::Where where) {
  switch (where) {
    case CommandPlacement::Where::server:
      return "server";
    case CommandPlacement::Where::build:
      return "build";
    case CommandPlacement::Where::test:
      return "test";
  }
  return "server";
}

Result<Process> Process::start(const ProcessSpec& spec) {
  if (auto valid = validate(spec); !valid.ok()) return valid.error();

  std::error_code ec;
  fs::path cwd = spec.cwd.empty() ? fs::current_path(ec) : fs::absolute(spec.cwd, ec);
  if (ec) return make_error(Errc::io, "cannot resolve the working directory: " + ec.message());
  if (!spec.cwd.empty()) {
    struct stat st {};
    if (::stat(cwd.c_str(), &st) != 0) {
      return make_error(Errc::not_found,
                        "working directory '" + cwd.string() + "': " + errno_text(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      return make_error(Errc::invalid,
                        "working directory '" + cwd.string() + "' is not a directory");
    }
  }
  auto program = resolve_program_in(spec, cwd);
  if (!program.ok()) return program.error();

  UniqueFd log(
      ::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640));
  if (!log.valid()) return errno_error(errno, "cannot open build log " + spec.log_file.string());
  if (log.get() <= STDERR_FILENO) {
    // dup2 onto itself would keep close-on-exec set and the child would lose its output.
    UniqueFd moved(::fcntl(log.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1));
    if (!moved.valid())
      return errno_error(errno, "cannot open build log " + spec.log_file.string());
    log = std::move(moved);
  }

  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [name, value] : spec.env) {
    std::string entry = name;
    entry += '=';
    entry += value;
    env_strings.push_back(std::move(entry));
  }
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  SpawnActions fa;
  int rc = 0;
  if (!spec.cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(&fa.actions, cwd.c_str());
  if (rc == 0) {
    rc = posix_spawn_file_actions_addopen(&fa.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa.actions, log.get(), STDOUT_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa.actions, log.get(), STDERR_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Libraries in the server may open descriptors without O_CLOEXEC; a build must not hold
  // sockets or the database open (nor keep a pipe's write end alive).
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&fa.actions, STDERR_FILENO + 1);
#endif

  SpawnAttr attr;
  // The server blocks SIGTERM/SIGINT/SIGHUP in its threads and ignores SIGPIPE; a child would
  // inherit both across exec, and a build that cannot be terminated or whose `yes | head`
  // never ends is the result. So: empty mask, every signal back to its default.
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t all_signals;
  sigfillset(&all_signals);
  if (rc == 0) {
    rc = posix_spawnattr_setflags(
        &attr.attr,
        static_cast<short>(POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
  }
  // Its own session, and so its own group: cancellation reaches every compiler the build
  // forks; neither a Ctrl-C on the server's terminal nor its closing reaches the build; and
  // nothing can prompt on that terminal (git asking for a password waits for ever).
  if (rc == 0) rc = posix_spawnattr_setsigmask(&attr.attr, &empty_mask);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr.attr, &all_signals);
  if (rc != 0) {
    return make_error(Errc::internal,
                      "cannot prepare the spawn of '" + spec.argv.front() + "': " + errno_text(rc));
  }

  pid_t pid = -1;
  // glibc's posix_spawn returns only after the child has exec'd (or failed to), so the group
  // exists before anyone can signal it, and exec errors come back here as the return value.
  rc = ::posix_spawn(&pid, program.value().c_str(), &fa.actions, &attr.attr, argv.data(),
                     envp.data());
  if (rc != 0) return spawn_error(rc, spec.argv.front());

  Process p;
  p.pid_ = pid;
  p.state_ = State::running;
  p.timeout_ = spec.timeout;
  p.grace_ = spec.kill_grace;
  if (spec.timeout.count() > 0) p.deadline_ = Clock::now() + spec.timeout;
  return p;
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_),
      state_(other.state_),
      leader_reaped_(other.leader_reaped_),
      leader_wait_status_(other.leader_wait_status_),
      leader_lost_(other.leader_lost_),
      timed_out_(other.timed_out_),
      cancelled_(other.cancelled_),
      sigkill_sent_(other.sigkill_sent_),
      timeout_(other.timeout_),
      grace_(other.grace_),
      deadline_(other.deadline_),
      kill_at_(other.kill_at_),
      status_(other.status_) {
  other.pid_ = -1;
  other.state_ = State::finished;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  kill_now();
  pid_ = other.pid_;
  state_ = other.state_;
  leader_reaped_ = other.leader_reaped_;
  leader_wait_status_ = other.leader_wait_status_;
  leader_lost_ = other.leader_lost_;
  timed_out_ = other.timed_out_;
  cancelled_ = other.cancelled_;
  sigkill_sent_ = other.sigkill_sent_;
  timeout_ = other.timeout_;
  grace_ = other.grace_;
  deadline_ = other.deadline_;
  kill_at_ = other.kill_at_;
  status_ = other.status_;
  other.pid_ = -1;
  other.state_ = State::finished;
  return *this;
}

Process::~Process() {
  kill_now();
}

void Process::kill_now() noexcept {
  if (pid_ < 0 || state_ == State::finished) return;
  if (!leader_reaped_) {
    ::kill(-pid_, SIGKILL);
    reap_leader();
  } else if (group_has_live_members(pid_)) {
    ::kill(-pid_, SIGKILL);
  }
  state_ = State::finished;
}

bool Process::leader_exited() {
  siginfo_t info{};
  while (true) {
    // WNOWAIT leaves the leader a zombie: while it is one, its pid cannot be reused, so
    // kill(-pid) is certain to reach this build's group and nobody else's.
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
      return info.si_pid != 0;
    }
    if (errno == EINTR) continue;
    // ECHILD: someone reaped it behind our back (SIGCHLD ignored, or waitpid(-1) elsewhere).
    leader_lost_ = true;
    leader_reaped_ = true;
    return true;
  }
}

void Process::reap_leader() noexcept {
  if (leader_reaped_) return;
  int status = 0;
  while (::waitpid(pid_, &status, 0) == -1) {
    if (errno == EINTR) continue;
    leader_lost_ = true;
    break;
  }
  leader_wait_status_ = status;
  leader_reaped_ = true;
}

ExitStatus Process::finish() {
  state_ = State::finished;
  ExitStatus s;
  s.timed_out = timed_out_;
  s.cancelled = cancelled_;
  if (timed_out_) s.timeout = timeout_;
  if (!leader_lost_) {
    if (WIFEXITED(leader_wait_status_)) {
      s.exited = true;
      s.code = WEXITSTATUS(leader_wait_status_);
    } else if (WIFSIGNALED(leader_wait_status_)) {
      s.signal = WTERMSIG(leader_wait_status_);
    }
  }
  status_ = s;
  return s;
}

void Process::begin_termination() {
  state_ = State::terminating;
  ::kill(-pid_, SIGTERM);
  // A stopped member would hold SIGTERM pending and never exit before the SIGKILL.
  ::kill(-pid_, SIGCONT);
  kill_at_ = Clock::now() + grace_;
}

std::optional<ExitStatus> Process::poll() {
  if (pid_ < 0) return std::nullopt;
  if (state_ == State::finished) return status_;

  const auto now = Clock::now();
  if (state_ == State::running && deadline_ && now >= *deadline_) {
    timed_out_ = true;
    begin_termination();
  }
  if (state_ == State::terminating && !sigkill_sent_ && kill_at_ && now >= *kill_at_) {
    // Once the leader is reaped the group id is pinned only by the members that are left;
    // group_has_live_members just saw one, so the id cannot have been reused in between
    // unless every member died and the pid counter wrapped around in that instant.
    if (!leader_reaped_ || group_has_live_members(pid_)) {
      log::warn("build process group {} still alive {} ms after SIGTERM; sending SIGKILL", pid_,
                grace_.count());
      ::kill(-pid_, SIGKILL);
    }
    sigkill_sent_ = true;
  }

  if (!leader_reaped_) {
    if (!leader_exited()) return std::nullopt;
    if (state_ == State::running) {
      // The leader finished on its own. Anything it left in its group (a compiler orphaned by
      // a crashed make, a forgotten background job) would keep using memory the scheduler
      // believes is free, and write into a log the job considers closed.
      if (!leader_lost_ || group_has_live_members(pid_)) ::kill(-pid_, SIGKILL);
      reap_leader();
      return finish();
    }
    reap_leader();
  }
  // Terminating and the leader is gone: the rest of the group keeps its grace period.
  if (sigkill_sent_ || !group_has_live_members(pid_)) return finish();
  return std::nullopt;
}

ExitStatus Process::wait() {
  while (true) {
    if (auto status = poll()) return *status;
    if (pid_ < 0) return ExitStatus{};
    if (state_ == State::running && !deadline_) {
      // Nothing to enforce until the leader exits: block on it instead of polling.
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) == -1 &&
             errno == EINTR) {
      }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Process::cancel() {
  if (pid_ < 0 || state_ != State::running) return;
  cancelled_ = true;
  begin_termination();
}

void Process::disown() {
  pid_ = -1;
  state_ = State::finished;
}

void Process::kill_group(int sig) {
  if (pid_ < 0 || state_ == State::finished) return;
  if (leader_reaped_ && !group_has_live_members(pid_)) return;
  ::kill(-pid_, sig);
}

Result<ExitStatus> run_to_completion(const ProcessSpec& spec,
                                     const std::function<bool()>& should_cancel,
                                     std::chrono::milliseconds poll_interval) {
  auto started = Process::start(spec);
  if (!started.ok()) return started.error();
  Process& process = started.value();
  const auto interval = std::max(poll_interval, std::chrono::milliseconds(1));
  while (true) {
    if (auto status = process.poll()) return *status;
    if (!process.cancelled() && !process.timed_out() && should_cancel && should_cancel()) {
      process.cancel();
      continue;
    }
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace wf::build
