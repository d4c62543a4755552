#pragma once
// Internal to the app module: what `wheelforge build` prints while its jobs run. Every line is
// clean text (no control characters from the logs); a terminal also gets colours and a status
// line at the bottom that is redrawn in place, anything else (CI logs, pipes) plain lines.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/jobs.hpp"

namespace wf::app {

/// `line` without what would disturb a terminal or a CI log: ANSI escape sequences are
/// removed, tabs become spaces (to the next multiple of 8 columns), other control characters
/// (C0, DEL, C1) are dropped; UTF-8 text is kept. Longer than `max_bytes`: cut at a character
/// boundary, with " [...]" appended.
[[nodiscard]] std::string clean_log_line(std::string_view line, std::size_t max_bytes = 4000);

/// A log read as it grows, split into clean lines. A carriage return inside a line keeps only
/// what follows it, as a terminal shows a progress bar.
class LogLines {
 public:
  /// The lines completed by `bytes` (cleaned), in order.
  [[nodiscard]] std::vector<std::string> feed(std::string_view bytes);
  /// The unterminated rest, if any (the log has ended).
  [[nodiscard]] std::optional<std::string> finish();

 private:
  std::string partial_;
};

/// "0.4s", "12s", "4m05s", "2h03m07s".
[[nodiscard]] std::string format_elapsed(std::chrono::milliseconds elapsed);

/// The job's run time from its record: finished (or `now`) minus started; nullopt when it
/// never started.
[[nodiscard]] std::optional<std::chrono::milliseconds> job_elapsed(const catalog::JobRecord& job,
                                                                   Micros now);

/// The progress display of one build: its jobs' log paths, state changes, log lines and the
/// summary at the end. Not thread-safe: the command's loop drives it.
class BuildProgress {
 public:
  struct Options {
    /// A terminal: colours (unless `color` is false) and a status line redrawn in place.
    bool terminal = false;
    bool color = false;
    /// The terminal's width in columns (the status line is cut to fit); 0 when unknown.
    std::function<unsigned()> width;
  };
  /// Everything is written through `write`.
  BuildProgress(std::function<void(std::string_view)> write, Options options);

  /// The header: the build, where torch comes from, and each job's cell and log path.
  void start(const catalog::BuildRecord& build, const std::vector<catalog::JobRecord>& jobs,
             const std::function<std::filesystem::path(std::int64_t)>& log_path,
             std::string_view torch_from);
  /// A state change of a job not yet finished: "job 7 py3.12-torch2.8-cu128: building ...".
  /// Finished jobs are left to finish_jobs(), after their last log lines.
  void running_states(const std::vector<catalog::JobRecord>& jobs);
  /// Log bytes of a job, as read from its log: complete lines are shown (prefixed with the
  /// job's cell when the build has several jobs).
  void log(std::int64_t job_id, std::string_view bytes);
  /// Jobs that reached a final state since the last call: their last partial log line, then
  /// "job 7 CELL: succeeded in 4m05s -> WHEEL" (or the reason).
  void finished_states(const std::vector<catalog::JobRecord>& jobs, Micros now);
  /// A line of the command's own (cancellation, warnings).
  void message(std::string_view line);
  /// Redraws the status line (terminal only): elapsed time, running jobs and what is left.
  void tick(std::chrono::milliseconds elapsed, Micros now);
  /// The summary: each job with its final state, elapsed time and wheel or reason, and the
  /// totals. Returns the number of jobs that did not succeed.
  int summary(const std::vector<catalog::JobRecord>& jobs, std::chrono::milliseconds total,
              Micros now);

 private:
  struct Job {
    std::string cell;
    std::optional<core::JobState> shown;  // last state printed
    LogLines lines;
    std::string colour;
  };
  void emit(const std::string& line);
  void clear_status();
  [[nodiscard]] std::string paint(std::string_view text, std::string_view sgr) const;
  [[nodiscard]] std::string state_text(core::JobState state) const;
  [[nodiscard]] std::string job_label(std::int64_t id) const;

  std::function<void(std::string_view)> write_;
  Options options_;
  std::map<std::int64_t, Job> jobs_;
  std::size_t cell_width_ = 0;
  bool several_ = false;
  bool status_shown_ = false;
};

}  // namespace wf::app
