#pragma once
// A fake Executor for the runner's unit tests (ninja's habit: the interface exists so that
// tests can fake it, and the fake records what happened). It starts no process: every
// command is recorded (argv, environment, working directory, output file) and answered by the
// first scripted rule whose text occurs in the command line: an exit status, output written
// into the command's log or output file (so that steps which read a tool's output, such as
// `nvcc --version`, can be tested), an effect on the filesystem (a build writing its wheel),
// a start failure, or a command that hangs until it is cancelled or times out. Unmatched
// commands succeed silently. Thread-safe.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/process.hpp"

namespace wf::build::testing {

using Env = std::vector<std::pair<std::string, std::string>>;

/// How a scripted command ends.
struct Outcome {
  int exit_code = 0;
  int signal = 0;                    ///< killed by this signal instead of exiting
  std::string output;                ///< appended to the command's log file when it starts
  bool hang = false;                 ///< runs until cancelled or its timeout
  std::optional<Error> start_error;  ///< start() fails with this
  std::function<void(const ProcessSpec&)> effect;  ///< run when the command starts

  static Outcome exit(int code, std::string output = {}) {
    Outcome o;
    o.exit_code = code;
    o.output = std::move(output);
    return o;
  }
  static Outcome prints(std::string output) { return exit(0, std::move(output)); }
  static Outcome hangs() {
    Outcome o;
    o.hang = true;
    return o;
  }
  static Outcome fails_to_start(Errc code, std::string message) {
    Outcome o;
    o.start_error = make_error(code, std::move(message));
    return o;
  }
  static Outcome does(std::function<void(const ProcessSpec&)> effect) {
    Outcome o;
    o.effect = std::move(effect);
    return o;
  }
};

/// One command the runner started.
struct Recorded {
  std::vector<std::string> argv;
  Env env;
  std::filesystem::path cwd;
  std::filesystem::path log_file;
  std::chrono::milliseconds timeout{0};
  CommandPlacement placement;
  bool cancelled = false;
  bool reattached = false;  ///< not started: reattach() found it

  /// argv joined with spaces.
  [[nodiscard]] std::string line() const;
  /// The value of an environment variable, if set.
  [[nodiscard]] std::optional<std::string> env_value(std::string_view name) const;
};

class FakeExecutor final : public Executor {
 public:
  /// What capacity() reports.
  Capacity capacity_value{16ULL << 30U, 8};
  /// What admission() reports (cluster: the runner admits by count only).
  Admission admission_value = Admission::host;
  /// An executor whose commands outlive the server (as Slurm's do): reattaches() is true,
  /// stopping the runner leaves commands running, and reattach() answers with the outcome of
  /// the first `on_reattach` rule that matches (not_found when none does).
  bool reattaches_value = false;
  /// Answers fit_request() (a cluster's fitting to its nodes); empty: the request unchanged.
  std::function<Result<FittedRequest>(const ResourceRequest&)> fit;
  /// Every request fit_request() was asked.
  std::vector<ResourceRequest> fit_requests;

  /// Answers reattach() for commands whose line contains `match` with `outcome`.
  void on_reattach(std::string match, Outcome outcome);
  /// Every release() so far: the job's id and how.
  [[nodiscard]] std::vector<std::pair<std::int64_t, Release>> releases() const;
  /// The command lines reattach() was asked for.
  [[nodiscard]] std::vector<std::string> reattach_requests() const;

  /// Answers commands whose line contains `match` with `outcome`, `times` times (-1: always).
  /// Rules are tried in the order they were added.
  void on(std::string match, Outcome outcome, int times = -1);
  /// prepare() fails with this error.
  void fail_prepare(Error error);

  /// Every command so far, in start order.
  [[nodiscard]] std::vector<Recorded> commands() const;
  /// The commands whose line contains `match`.
  [[nodiscard]] std::vector<Recorded> commands_matching(std::string_view match) const;
  /// The most commands that ran at the same time.
  [[nodiscard]] int max_running() const { return max_running_.load(); }
  /// Commands running now (a hanging one until cancelled or timed out).
  [[nodiscard]] int running() const { return running_.load(); }
  /// Blocks until a command whose line contains `match` has started (or `limit` has passed);
  /// true when one has.
  [[nodiscard]] bool wait_started(std::string_view match, std::chrono::milliseconds limit) const;

  std::string_view name() const override { return "fake"; }
  Capacity capacity() override;
  Status prepare(const std::filesystem::path& work_dir) override;
  Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) override;
  std::string read_log(const std::filesystem::path& log, std::uint64_t offset,
                       std::size_t max) override;
  LogChunk read_log_tail(const std::filesystem::path& log, std::size_t max) override;
  Admission admission() const override { return admission_value; }
  bool reattaches() const override { return reattaches_value; }
  Result<FittedRequest> fit_request(const ResourceRequest& request) override {
    {
      std::lock_guard lock(mu_);
      fit_requests.push_back(request);
    }
    return fit ? fit(request) : FittedRequest{request, {}};
  }
  Result<std::unique_ptr<Execution>> reattach(const ProcessSpec& spec) override;
  void release(const CommandPlacement& job, Release how) override;

 private:
  friend class FakeExecution;
  struct Rule {
    std::string match;
    Outcome outcome;
    int times;
  };
  void finished(std::size_t index, bool cancelled);

  mutable std::mutex mu_;
  mutable std::condition_variable started_cv_;
  std::vector<Rule> rules_;
  std::vector<Rule> reattach_rules_;
  std::vector<std::pair<std::int64_t, Release>> releases_;
  std::vector<std::string> reattach_requests_;
  std::vector<Recorded> commands_;
  std::optional<Error> prepare_error_;
  std::atomic<int> running_{0};
  std::atomic<int> max_running_{0};
};

}  // namespace wf::build::testing
