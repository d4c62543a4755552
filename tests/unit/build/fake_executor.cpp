#include "build/fake_executor.hpp"

#include <signal.h>

#include <fstream>

#include "wheelforge/util/fs.hpp"

namespace wf::build::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Recorded::line() const {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::optional<std::string> Recorded::env_value(std::string_view name) const {
  for (const auto& [k, v] : env) {
    if (k == name) return v;
  }
  return std::nullopt;
}

// A command that either ended when it started (poll() answers at once) or hangs until it is
// cancelled or its timeout passes.
class FakeExecution final : public Execution {
 public:
  FakeExecution(FakeExecutor& owner, std::size_t index, ExitStatus status, bool hang,
                std::chrono::milliseconds timeout)
      : owner_(owner), index_(index), status_(status), hang_(hang), timeout_(timeout) {}
  ~FakeExecution() override {
    if (!done_) owner_.finished(index_, false);
  }
  FakeExecution(const FakeExecution&) = delete;
  FakeExecution& operator=(const FakeExecution&) = delete;

  std::optional<ExitStatus> poll() override {
    if (done_) return status_;
    if (hang_ && !cancelled_) {
      if (timeout_.count() == 0 || Clock::now() - started_ < timeout_) return std::nullopt;
      status_ = ExitStatus{};
      status_.signal = SIGKILL;
      status_.timed_out = true;
      status_.timeout = timeout_;
    }
    done_ = true;
    owner_.finished(index_, cancelled_);
    return status_;
  }

  // As Slurm's: every command of an executor that re-attaches goes on without the server.
  [[nodiscard]] bool detached() const override { return owner_.reattaches_value; }

  void cancel() override {
    if (done_ || cancelled_) return;
    cancelled_ = true;
    status_ = ExitStatus{};
    status_.signal = SIGTERM;
    status_.cancelled = true;
  }

 private:
  FakeExecutor& owner_;
  std::size_t index_;
  ExitStatus status_;
  bool hang_;
  std::chrono::milliseconds timeout_;
  Clock::time_point started_ = Clock::now();
  bool cancelled_ = false;
  bool done_ = false;
};

void FakeExecutor::on(std::string match, Outcome outcome, int times) {
  std::lock_guard lock(mu_);
  rules_.push_back(Rule{std::move(match), std::move(outcome), times});
}

void FakeExecutor::fail_prepare(Error error) {
  std::lock_guard lock(mu_);
  prepare_error_ = std::move(error);
}

std::vector<Recorded> FakeExecutor::commands() const {
  std::lock_guard lock(mu_);
  return commands_;
}

std::vector<Recorded> FakeExecutor::commands_matching(std::string_view match) const {
  std::vector<Recorded> out;
  for (auto& c : commands()) {
    if (c.line().find(match) != std::string::npos) out.push_back(std::move(c));
  }
  return out;
}

bool FakeExecutor::wait_started(std::string_view match, std::chrono::milliseconds limit) const {
  std::unique_lock lock(mu_);
  return started_cv_.wait_for(lock, limit, [&] {
    for (const auto& c : commands_) {
      if (c.line().find(match) != std::string::npos) return true;
    }
    return false;
  });
}

Capacity FakeExecutor::capacity() {
  std::lock_guard lock(mu_);
  return capacity_value;
}

Status FakeExecutor::prepare(const fs::path& work_dir) {
  {
    std::lock_guard lock(mu_);
    if (prepare_error_) return *prepare_error_;
  }
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) return make_error(Errc::io, "create " + work_dir.string() + ": " + ec.message());
  return ok_status();
}

void FakeExecutor::on_reattach(std::string match, Outcome outcome) {
  std::lock_guard lock(mu_);
  reattach_rules_.push_back(Rule{std::move(match), std::move(outcome), -1});
}

std::vector<std::pair<std::int64_t, Executor::Release>> FakeExecutor::releases() const {
  std::lock_guard lock(mu_);
  return releases_;
}

std::vector<std::string> FakeExecutor::reattach_requests() const {
  std::lock_guard lock(mu_);
  return reattach_requests_;
}

Result<std::unique_ptr<Execution>> FakeExecutor::reattach(const ProcessSpec& spec) {
  Recorded r{spec.argv, spec.env, spec.cwd, spec.log_file, spec.timeout, spec.placement, false};
  const std::string line = r.line();
  std::optional<Outcome> outcome;
  {
    std::lock_guard lock(mu_);
    reattach_requests_.push_back(line);
    for (const auto& rule : reattach_rules_) {
      if (line.find(rule.match) != std::string::npos) {
        outcome = rule.outcome;
        break;
      }
    }
  }
  if (!outcome) return make_error(Errc::not_found, "nothing to re-attach to");
  if (outcome->effect) outcome->effect(spec);
  ++running_;
  ExitStatus status;
  if (outcome->signal != 0) {
    status.signal = outcome->signal;
  } else {
    status.exited = true;
    status.code = outcome->exit_code;
  }
  // Recorded as a command (not started anew: `reattached` in its line's place is the caller's
  // to check through reattach_requests()).
  std::size_t index = 0;
  {
    std::lock_guard lock(mu_);
    index = commands_.size();
    r.reattached = true;
    commands_.push_back(std::move(r));
  }
  return std::unique_ptr<Execution>(
      std::make_unique<FakeExecution>(*this, index, status, outcome->hang, spec.timeout));
}

void FakeExecutor::release(const CommandPlacement& job, Release how) {
  std::lock_guard lock(mu_);
  releases_.emplace_back(job.job_id, how);
}

Result<std::unique_ptr<Execution>> FakeExecutor::start(const ProcessSpec& spec) {
  Recorded r{spec.argv, spec.env, spec.cwd, spec.log_file, spec.timeout, spec.placement, false};
  const std::string line = r.line();
  Outcome outcome;
  std::size_t index = 0;
  {
    std::lock_guard lock(mu_);
    for (auto& rule : rules_) {
      if (rule.times == 0 || line.find(rule.match) == std::string::npos) continue;
      if (rule.times > 0) --rule.times;
      outcome = rule.outcome;
      break;
    }
    index = commands_.size();
    commands_.push_back(std::move(r));
  }
  started_cv_.notify_all();
  if (outcome.start_error) return *outcome.start_error;
  // As a real command would, the output goes to the log file (which must be creatable).
  {
    std::ofstream log(spec.log_file, std::ios::app | std::ios::binary);
    if (!log) return make_error(Errc::io, "cannot open build log " + spec.log_file.string());
    log << outcome.output;
  }
  if (outcome.effect) outcome.effect(spec);
  const int now = ++running_;
  for (int seen = max_running_.load();
       now > seen && !max_running_.compare_exchange_weak(seen, now);) {
  }
  ExitStatus status;
  if (outcome.signal != 0) {
    status.signal = outcome.signal;
  } else {
    status.exited = true;
    status.code = outcome.exit_code;
  }
  return std::unique_ptr<Execution>(
      std::make_unique<FakeExecution>(*this, index, status, outcome.hang, spec.timeout));
}

void FakeExecutor::finished(std::size_t index, bool cancelled) {
  --running_;
  std::lock_guard lock(mu_);
  if (index < commands_.size()) commands_[index].cancelled = cancelled;
}

std::string FakeExecutor::read_log(const fs::path& log, std::uint64_t offset, std::size_t max) {
  return read_file_chunk(log, offset, max);
}

LogChunk FakeExecutor::read_log_tail(const fs::path& log, std::size_t max) {
  LogChunk chunk;
  chunk.data = build::read_log_tail(log, max, chunk.offset);
  return chunk;
}

}  // namespace wf::build::testing
