#include "build_progress.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace wf::app {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kBold = "1";
constexpr std::string_view kDim = "2";
constexpr std::string_view kRed = "31";
constexpr std::string_view kGreen = "32";
constexpr std::string_view kYellow = "33";
constexpr std::string_view kCyan = "36";
// Per-job prefixes, as docker compose colours its services (red is kept for failures).
constexpr std::array<std::string_view, 6> kJobColours{"36", "35", "34", "33", "32", "96"};

/// Length of the UTF-8 sequence that starts with `lead` (1 for stray continuation bytes).
std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0) return lead <= 0xEF ? 3 : 1;
  if (lead >= 0xC2) return 2;
  return 1;
}

/// Skips an escape sequence starting at line[i] == ESC; returns the index after it.
std::size_t skip_escape(std::string_view line, std::size_t i) {
  ++i;
  if (i >= line.size()) return i;
  if (line[i] == '[') {  // CSI: parameters and intermediates, then a final byte @..~
    ++i;
    while (i < line.size() && (line[i] < '@' || line[i] > '~')) ++i;
    return std::min(i + 1, line.size());
  }
  if (line[i] == ']' || line[i] == 'P' || line[i] == '_' || line[i] == '^') {
    // OSC, DCS, APC, PM: up to BEL or ST (ESC \).
    ++i;
    while (i < line.size() && line[i] != '\a' &&
           !(line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '\\')) {
      ++i;
    }
    if (i < line.size()) i += line[i] == '\a' ? 1U : 2U;
    return std::min(i, line.size());
  }
  return i + 1;  // a two-byte sequence such as ESC ( B
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace

std::string clean_log_line(std::string_view line, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(line.size(), max_bytes));
  std::size_t column = 0;
  for (std::size_t i = 0; i < line.size();) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c == 0x1b) {
      i = skip_escape(line, i);
      continue;
    }
    std::string piece;
    if (c == '\t') {
      piece.assign(8 - column % 8, ' ');
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      ++i;
      continue;
    } else {
      const std::size_t n = std::min(utf8_length(c), line.size() - i);
      // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) are dropped like C0 ones.
      if (n == 2 && c == 0xC2 && static_cast<unsigned char>(line[i + 1]) < 0xA0) {
        i += 2;
        continue;
      }
      piece = line.substr(i, n);
      i += n;
    }
    if (out.size() + piece.size() > max_bytes) {
      out += " [...]";
      return out;
    }
    out += piece;
    column += piece.size() == 1 || c == '\t' ? piece.size() : 1;
  }
  return out;
}

std::vector<std::string> LogLines::feed(std::string_view bytes) {
  std::vector<std::string> lines;
  for (;;) {
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) break;
    partial_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    std::string_view line = partial_;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (const std::size_t cr = line.rfind('\r'); cr != std::string_view::npos) {
      line.remove_prefix(cr + 1);
    }
    lines.push_back(clean_log_line(line));
    partial_.clear();
  }
  partial_.append(bytes);
  // A line without an end for far too long (a binary dumped into the log): shown in pieces.
  constexpr std::size_t kMaxPartial = 64 * 1024;
  if (partial_.size() > kMaxPartial) {
    lines.push_back(clean_log_line(partial_));
    partial_.clear();
  }
  return lines;
}

std::optional<std::string> LogLines::finish() {
  if (partial_.empty()) return std::nullopt;
  std::string_view line = partial_;
  if (const std::size_t cr = line.rfind('\r'); cr != std::string_view::npos) {
    line.remove_prefix(cr + 1);
  }
  std::string out = clean_log_line(line);
  partial_.clear();
  return out;
}

std::string format_elapsed(milliseconds elapsed) {
  const auto ms = std::max<std::int64_t>(elapsed.count(), 0);
  std::array<char, 32> buf{};
  if (ms < 10'000) {
    std::snprintf(buf.data(), buf.size(), "%lld.%llds", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000 / 100));
  } else if (ms < 60'000) {
    std::snprintf(buf.data(), buf.size(), "%llds", static_cast<long long>(ms / 1000));
  } else if (ms < 3'600'000) {
    std::snprintf(buf.data(), buf.size(), "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf.data(), buf.size(), "%lldh%02lldm%02llds",
                  static_cast<long long>(ms / 3'600'000), static_cast<long long>(ms / 60'000 % 60),
                  static_cast<long long>(ms / 1000 % 60));
  }
  return buf.data();
}

std::optional<milliseconds> job_elapsed(const catalog::JobRecord& job, Micros now) {
  if (!job.started_at) return std::nullopt;
  const Micros end = job.finished_at.value_or(now);
  return milliseconds(std::max<Micros>(end - *job.started_at, 0) / 1000);
}

BuildProgress::BuildProgress(std::function<void(std::string_view)> write, Options options)
    : write_(std::move(write)), options_(std::move(options)) {
  if (!options_.terminal) options_.color = false;
}

std::string BuildProgress::paint(std::string_view text, std::string_view sgr) const {
  if (!options_.color || sgr.empty()) return std::string(text);
  return "\x1b[" + std::string(sgr) + "m" + std::string(text) + "\x1b[0m";
}

std::string BuildProgress::state_text(core::JobState state) const {
  const std::string_view name = core::state_name(state);
  switch (state) {
    case core::JobState::succeeded:
      return paint(name, kGreen);
    case core::JobState::failed:
      return paint(name, kRed);
    case core::JobState::cancelled:
    case core::JobState::interrupted:
      return paint(name, kYellow);
    default:
      return paint(name, kCyan);
  }
}

std::string BuildProgress::job_label(std::int64_t id) const {
  const auto it = jobs_.find(id);
  const std::string cell = it == jobs_.end() ? std::string() : it->second.cell;
  return paint("job " + std::to_string(id) + " " + cell, kBold);
}

void BuildProgress::clear_status() {
  if (status_shown_) {
    write_("\r\x1b[K");
    status_shown_ = false;
  }
}

void BuildProgress::emit(const std::string& line) {
  clear_status();
  write_(line + "\n");
}

void BuildProgress::start(const catalog::BuildRecord& build,
                          const std::vector<catalog::JobRecord>& jobs,
                          const std::function<std::filesystem::path(std::int64_t)>& log_path,
                          std::string_view torch_from) {
  several_ = jobs.size() > 1;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Job& j = jobs_[jobs[i].id];
    j.cell = jobs[i].cell.key();
    j.colour = kJobColours[i % kJobColours.size()];
    cell_width_ = std::max(cell_width_, j.cell.size());
  }
  emit(paint("build " + std::to_string(build.id), kBold) + ": " + build.recipe + " " +
       build.version + ", " + plural(jobs.size(), "job", "jobs") +
       (torch_from.empty() ? std::string() : ", torch from " + std::string(torch_from)));
  for (const auto& j : jobs) {
    emit(job_label(j.id) + ": log " + clean_log_line(log_path(j.id).string()));
  }
}

void BuildProgress::running_states(const std::vector<catalog::JobRecord>& jobs) {
  for (const auto& j : jobs) {
    auto& view = jobs_[j.id];
    if (view.cell.empty()) view.cell = j.cell.key();
    if (core::is_terminal(j.state) || view.shown == j.state) continue;
    view.shown = j.state;
    if (j.state == core::JobState::queued) continue;  // the header listed every job
    std::string line = job_label(j.id) + ": " + state_text(j.state);
    if (j.state == core::JobState::building && j.max_jobs != 0) {
      line += " (attempt " + std::to_string(j.attempts) +
              ", MAX_JOBS=" + std::to_string(j.max_jobs) +
              " NVCC_THREADS=" + std::to_string(j.nvcc_threads) + ")";
    }
    emit(line);
  }
}

void BuildProgress::log(std::int64_t job_id, std::string_view bytes) {
  auto& view = jobs_[job_id];
  for (const auto& line : view.lines.feed(bytes)) {
    if (several_) {
      std::string prefix = view.cell;
      prefix.resize(std::max(cell_width_, prefix.size()), ' ');
      emit(paint(prefix + " |", view.colour) + " " + line);
    } else {
      emit("  " + line);
    }
  }
}

void BuildProgress::finished_states(const std::vector<catalog::JobRecord>& jobs, Micros now) {
  for (const auto& j : jobs) {
    auto& view = jobs_[j.id];
    if (!core::is_terminal(j.state) || view.shown == j.state) continue;
    if (auto rest = view.lines.finish()) {
      // The log's last line had no newline: shown as it is.
      if (several_) {
        std::string prefix = view.cell;
        prefix.resize(std::max(cell_width_, prefix.size()), ' ');
        emit(paint(prefix + " |", view.colour) + " " + *rest);
      } else {
        emit("  " + *rest);
      }
    }
    view.shown = j.state;
    std::string line = job_label(j.id) + ": " + state_text(j.state);
    if (const auto took = job_elapsed(j, now)) line += " in " + format_elapsed(*took);
    if (!j.wheel.empty() && j.state == core::JobState::succeeded) {
      line += " -> " + clean_log_line(j.wheel);
      // A rebuild with nothing new to publish says so.
      if (!j.reason.empty()) line += " (" + clean_log_line(j.reason) + ")";
    } else if (!j.reason.empty()) {
      line += " (" + clean_log_line(j.reason) + ")";
    }
    emit(line);
  }
}

void BuildProgress::message(std::string_view line) {
  emit(clean_log_line(line));
}

void BuildProgress::tick(milliseconds elapsed, Micros now) {
  (void)now;
  if (!options_.terminal) return;
  std::size_t queued = 0;
  std::size_t done = 0;
  std::string running;
  for (const auto& [id, view] : jobs_) {
    if (!view.shown || *view.shown == core::JobState::queued) {
      ++queued;
    } else if (core::is_terminal(*view.shown)) {
      ++done;
    } else {
      running += (running.empty() ? "" : ", ") + view.cell + " " +
                 std::string(core::state_name(*view.shown));
    }
  }
  std::string status = "[" + format_elapsed(elapsed) + "] " + std::to_string(done) + "/" +
                       std::to_string(jobs_.size()) + " done";
  if (queued != 0) status += ", " + std::to_string(queued) + " queued";
  if (!running.empty()) status += ": " + running;
  // Cut to the width, so that the line never wraps (a wrapped line cannot be redrawn).
  const unsigned width = options_.width ? options_.width() : 0;
  if (width > 1 && status.size() > width - 1) status.resize(width - 1);
  clear_status();
  write_(paint(status, kDim));
  status_shown_ = true;
}

int BuildProgress::summary(const std::vector<catalog::JobRecord>& jobs, milliseconds total,
                           Micros now) {
  clear_status();
  int failed = 0;
  std::size_t state_width = 0;
  for (const auto& j : jobs) state_width = std::max(state_width, core::state_name(j.state).size());
  emit("");
  for (const auto& j : jobs) {
    if (j.state != core::JobState::succeeded) ++failed;
    std::string cell = j.cell.key();
    cell.resize(std::max(cell_width_, cell.size()), ' ');
    std::string state(core::state_name(j.state));
    const std::size_t pad = state_width - state.size();
    const auto took = job_elapsed(j, now);
    std::string elapsed = took ? format_elapsed(*took) : "-";
    elapsed.insert(0, elapsed.size() < 8 ? 8 - elapsed.size() : 0, ' ');
    std::string line = "job " + std::to_string(j.id) + " " + cell + "  " + state_text(j.state) +
                       std::string(pad, ' ') + "  " + elapsed + "  ";
    line +=
        j.state == core::JobState::succeeded ? clean_log_line(j.wheel) : clean_log_line(j.reason);
    while (line.ends_with(' ')) line.pop_back();
    emit(line);
  }
  std::map<core::JobState, std::size_t> by_state;
  for (const auto& j : jobs) ++by_state[j.state];
  std::string totals = std::to_string(by_state[core::JobState::succeeded]) + " succeeded, " +
                       std::to_string(by_state[core::JobState::failed]) + " failed";
  for (const auto state : {core::JobState::cancelled, core::JobState::interrupted}) {
    if (by_state[state] != 0) {
      totals += ", " + std::to_string(by_state[state]) + " " + std::string(core::state_name(state));
    }
  }
  emit(paint(totals + " in " + format_elapsed(total), failed == 0 ? kGreen : kRed));
  return failed;
}

}  // namespace wf::app
