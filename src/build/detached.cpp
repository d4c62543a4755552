#include "detached.hpp"

#include <signal.h>

#include <optional>

#include "files.hpp"
#include "units.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kRecord = "record";
constexpr const char* kExit = "exit";

std::string current_boot_id() {
  auto text = read_small_file("/proc/sys/kernel/random/boot_id", 256);
  return text.ok() ? std::string(trim(text.value())) : std::string();
}

// The exit status the supervisor recorded, once it has.
std::optional<int> recorded_exit(const fs::path& dir) {
  auto text = read_small_file(dir / kExit, 64);
  if (!text.ok()) return std::nullopt;
  const auto code = parse_u64(trim(text.value()));
  if (!code || *code > 255) return std::nullopt;
  return static_cast<int>(*code);
}

std::string format_record(const DetachedRecord& r) {
  std::string out =
      "# a command that outlives the server that started it (src/build/detached.hpp)\n";
  out += "identity=" + r.identity + "\n";
  out += "pid=" + std::to_string(r.pid) + "\n";
  out += "start_ticks=" + std::to_string(r.start_ticks) + "\n";
  out += "boot_id=" + r.boot_id + "\n";
  out += "started_at=" + std::to_string(r.started_at) + "\n";
  for (const auto& [k, v] : r.notes) out += "note." + k + "=" + v + "\n";
  return out;
}

class DetachedExecution final : public Execution {
 public:
  // Started by this server: the supervisor is its child, and Process enforces the timeout
  // and the cancellation.
  DetachedExecution(Process supervisor, fs::path dir)
      : child_(std::move(supervisor)), dir_(std::move(dir)) {}

  // Re-attached: the supervisor of an earlier server, watched through /proc. pid -1: it had
  // ended already.
  DetachedExecution(fs::path dir, DetachedRecord record, std::optional<Clock::time_point> deadline,
                    std::chrono::milliseconds timeout, std::chrono::milliseconds grace)
      : dir_(std::move(dir)),
        record_(std::move(record)),
        deadline_(deadline),
        timeout_(timeout),
        grace_(grace) {}

  DetachedExecution(const DetachedExecution&) = delete;
  DetachedExecution& operator=(const DetachedExecution&) = delete;

  // A detached command is never ended by the end of its watcher: a server that stops leaves
  // it running for the next one.
  ~DetachedExecution() override {
    if (child_ && !status_) child_->disown();
  }

  std::optional<ExitStatus> poll() override {
    if (status_) return status_;
    if (child_) {
      auto ended = child_->poll();
      if (!ended) return std::nullopt;
      ExitStatus s = *ended;
      if (const auto code = recorded_exit(dir_)) {
        s.exited = true;
        s.code = *code;
        s.signal = 0;
      }
      status_ = s;
      return status_;
    }
    return poll_watched();
  }

  void cancel() override {
    if (child_) {
      child_->cancel();
      return;
    }
    if (status_ || terminating_) return;
    cancelled_ = true;
    begin_termination();
  }

  [[nodiscard]] bool detached() const override { return true; }

 private:
  [[nodiscard]] bool supervisor_alive() const {
    return record_.pid > 0 && process_start_ticks(record_.pid) == record_.start_ticks;
  }

  [[nodiscard]] bool group_alive() const {
    return record_.pid > 0 && group_has_live_members(record_.pid);
  }

  void begin_termination() {
    terminating_ = true;
    kill_at_ = Clock::now() + grace_;
    if (record_.pid <= 0) return;
    ::kill(-record_.pid, SIGTERM);
    ::kill(-record_.pid, SIGCONT);
  }

  std::optional<ExitStatus> poll_watched() {
    const auto now = Clock::now();
    if (!terminating_ && deadline_ && now >= *deadline_) {
      timed_out_ = true;
      begin_termination();
    }
    if (terminating_ && !sigkill_sent_ && now >= kill_at_) {
      if (group_alive()) ::kill(-record_.pid, SIGKILL);
      sigkill_sent_ = true;
    }
    std::optional<int> code = recorded_exit(dir_);
    if (!code && supervisor_alive()) return std::nullopt;
    // The supervisor writes the file just before it ends.
    if (!code) code = recorded_exit(dir_);
    // A cancelled command's group keeps its grace period.
    if (!code && terminating_ && !sigkill_sent_ && group_alive()) return std::nullopt;
    // What the command left in its group ends with it, as Process ends it for its own.
    if (group_alive()) ::kill(-record_.pid, SIGKILL);
    ExitStatus s;
    s.cancelled = cancelled_;
    s.timed_out = timed_out_;
    if (timed_out_) s.timeout = timeout_;
    if (code) {
      s.exited = true;
      s.code = *code;
    } else {
      s.note = "its supervisor (pid " + std::to_string(record_.pid) +
               ") ended without recording how the command ended";
    }
    status_ = s;
    return status_;
  }

  std::optional<Process> child_;
  fs::path dir_;
  DetachedRecord record_;
  std::optional<Clock::time_point> deadline_;
  std::chrono::milliseconds timeout_{0};
  std::chrono::milliseconds grace_{kDefaultKillGrace};
  bool terminating_ = false;
  bool cancelled_ = false;
  bool timed_out_ = false;
  bool sigkill_sent_ = false;
  Clock::time_point kill_at_;
  std::optional<ExitStatus> status_;
};

}  // namespace

std::string_view supervisor_script() {
  return R"WF(# wheelforge: runs one command so that it outlives the server that started it, and
# records how it ended in its control directory ($1). The command runs in the foreground,
# with the group's signals; this shell waits for it through them.
dir=$1
shift
trap : TERM INT HUP
"$@"
status=$?
printf '%s\n' "$status" >"$dir/exit.tmp" && /bin/mv -f "$dir/exit.tmp" "$dir/exit"
exit "$status"
)WF";
}

std::string command_identity(const ProcessSpec& spec) {
  std::string text;
  const auto add = [&text](std::string_view part) {
    text += std::to_string(part.size());
    text += ':';
    text += part;
  };
  add("argv");
  for (const auto& a : spec.argv) add(a);
  add("env");
  for (const auto& [k, v] : spec.env) {
    add(k);
    add(v);
  }
  add("cwd");
  add(spec.cwd.string());
  add("log");
  add(spec.log_file.string());
  return crypto::sha256_hex(text);
}

fs::path detached_dir(const fs::path& work_dir, std::string_view identity) {
  return work_dir / "detached" / std::string(identity.substr(0, 16));
}

Result<DetachedRecord> read_detached_record(const fs::path& dir) {
  auto text = read_small_file(dir / kRecord, 1U << 16U);
  if (!text.ok()) {
    return make_error(Errc::not_found, "no record of a command in " + dir.string() + " (" +
                                           text.error().message + ")");
  }
  DetachedRecord r;
  for (const auto line : split(text.value(), '\n')) {
    const std::size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    const std::string value(line.substr(eq + 1));
    if (key == "identity") r.identity = value;
    if (key == "pid") r.pid = static_cast<pid_t>(parse_u64(value).value_or(0));
    if (key == "start_ticks") r.start_ticks = parse_u64(value).value_or(0);
    if (key == "boot_id") r.boot_id = value;
    if (key == "started_at") r.started_at = static_cast<std::int64_t>(parse_u64(value).value_or(0));
    if (key.starts_with("note.")) r.notes[std::string(key.substr(5))] = value;
  }
  if (r.identity.empty() || r.pid <= 0) {
    return make_error(Errc::not_found, "the record in " + dir.string() + " is incomplete");
  }
  return r;
}

Result<std::unique_ptr<Execution>> start_detached(const ProcessSpec& spec, const fs::path& dir,
                                                  const std::string& identity,
                                                  const std::map<std::string, std::string>& notes) {
  // The supervisor runs the program by path: the same program Process::start would find.
  auto program = resolve_program(spec);
  if (!program) return program.error();
  if (auto st = fresh_directory(dir); !st) return st.error();
  ProcessSpec supervised = spec;
  supervised.argv = {"/bin/sh",
                     "-c",
                     std::string(supervisor_script()),
                     "wheelforge-supervisor",
                     dir.string(),
                     program->string()};
  supervised.argv.insert(supervised.argv.end(), spec.argv.begin() + 1, spec.argv.end());
  auto process = Process::start(supervised);
  if (!process) return process.error();
  DetachedRecord r;
  r.identity = identity;
  r.pid = process->pid();
  r.start_ticks = process_start_ticks(r.pid).value_or(0);
  r.boot_id = current_boot_id();
  r.started_at = epoch_now();
  r.notes = notes;
  // Without its record nobody could re-attach to it: the process is killed (Process's
  // destructor) and the start fails.
  if (auto st = write_file_atomic(dir / kRecord, format_record(r)); !st) return st.error();
  return std::unique_ptr<Execution>(std::make_unique<DetachedExecution>(std::move(*process), dir));
}

Result<std::unique_ptr<Execution>> reattach_detached(const fs::path& dir,
                                                     const DetachedRecord& record,
                                                     std::chrono::milliseconds timeout,
                                                     std::chrono::milliseconds grace) {
  DetachedRecord r = record;
  const auto ticks = process_start_ticks(r.pid);
  const bool alive = r.boot_id == current_boot_id() && ticks && *ticks == r.start_ticks;
  if (!alive) {
    if (!recorded_exit(dir)) {
      return make_error(Errc::not_found, "its supervisor (pid " + std::to_string(r.pid) +
                                             ") is gone without recording how the command ended");
    }
    r.pid = -1;  // ended: its pid may name another process by now
  }
  std::optional<Clock::time_point> deadline;
  if (timeout.count() > 0) {
    const auto elapsed =
        std::chrono::seconds(std::max<std::int64_t>(0, epoch_now() - r.started_at));
    deadline =
        Clock::now() + (timeout - std::chrono::duration_cast<std::chrono::milliseconds>(elapsed));
  }
  return std::unique_ptr<Execution>(
      std::make_unique<DetachedExecution>(dir, std::move(r), deadline, timeout, grace));
}

}  // namespace wf::build
