// What `wheelforge build` prints: clean log lines, the per-job prefixes, state lines with their
// elapsed time, the summary, and the terminal-only status line and colours.

#include "app/build_progress.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace wf::app {
namespace {

using std::chrono::milliseconds;
constexpr Micros kSecond = 1'000'000;

catalog::JobRecord job(std::int64_t id, const std::string& python, core::JobState state) {
  catalog::JobRecord j;
  j.id = id;
  j.build_id = 1;
  j.recipe = "demo";
  j.version = "1.0.0";
  j.cell = core::Cell{python, *core::parse_torch_series("2.8"), *core::parse_cuda_version("13.0")};
  j.state = state;
  return j;
}

catalog::BuildRecord build_record() {
  catalog::BuildRecord b;
  b.id = 4;
  b.recipe = "demo";
  b.version = "1.0.0";
  return b;
}

std::filesystem::path log_of(std::int64_t id) {
  return "/data/builds/job-" + std::to_string(id) + "/log.txt";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(text.substr(start, nl - start));
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

std::string replace_every(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

bool has_control_characters(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n') || u == 0x7f;
  });
}

TEST(CleanLogLine, RemovesEscapesAndControlCharacters) {
  EXPECT_EQ(clean_log_line("\x1b[1m\x1b[31merror:\x1b[0m expected ';'"), "error: expected ';'");
  EXPECT_EQ(clean_log_line("a\x1b]0;title\x07"
                           "b\x1b]8;;http://x\x1b\\c"),
            "abc");
  EXPECT_EQ(clean_log_line(std::string_view("bell\x07 nul\x00 del\x7f end", 19)),
            "bell nul del end");
  EXPECT_EQ(clean_log_line("\xc2\x9b"
                           "31mc1"),
            "31mc1");  // C1 CSI dropped, text kept
  EXPECT_EQ(clean_log_line("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(clean_log_line("a\tb"), "a       b");
  EXPECT_EQ(clean_log_line("\xc3\xa9\tb"), "\xc3\xa9       b");  // one column for the é
  EXPECT_EQ(clean_log_line(std::string(10, 'x') + "\xc3\xa9", 11), "xxxxxxxxxx [...]");
}

TEST(LogLines, SplitsAsTheLogGrows) {
  LogLines lines;
  EXPECT_TRUE(lines.feed("Coll").empty());
  EXPECT_EQ(lines.feed("ecting torch\nInstall"), std::vector<std::string>{"Collecting torch"});
  EXPECT_EQ(lines.feed("ing\r\n10%\r50%\r100%\n"),
            (std::vector<std::string>{"Installing", "100%"}));
  EXPECT_TRUE(lines.feed("no newline at the end").empty());
  EXPECT_EQ(lines.finish(), "no newline at the end");
  EXPECT_EQ(lines.finish(), std::nullopt);
}

TEST(FormatElapsed, ReadsNaturally) {
  EXPECT_EQ(format_elapsed(milliseconds(0)), "0.0s");
  EXPECT_EQ(format_elapsed(milliseconds(420)), "0.4s");
  EXPECT_EQ(format_elapsed(milliseconds(9'950)), "9.9s");
  EXPECT_EQ(format_elapsed(milliseconds(12'345)), "12s");
  EXPECT_EQ(format_elapsed(milliseconds(245'000)), "4m05s");
  EXPECT_EQ(format_elapsed(milliseconds(7'387'000)), "2h03m07s");
  EXPECT_EQ(format_elapsed(milliseconds(-5)), "0.0s");
}

TEST(BuildProgress, OneJobInPlainText) {
  std::string out;
  BuildProgress p([&out](std::string_view s) { out += s; }, {});
  auto j = job(7, "3.12", core::JobState::queued);
  p.start(build_record(), {j}, log_of, "http://127.0.0.1:9001/{cuda}/torch{torch}/simple/");
  p.running_states({j});
  j.state = core::JobState::building;
  j.attempts = 1;
  j.max_jobs = 4;
  j.nvcc_threads = 2;
  j.started_at = 100 * kSecond;
  p.running_states({j});
  p.log(7, "==> [building] attempt 1\n\x1b[32mcompiling\x1b[0m kernel.cu\npartial");
  p.tick(milliseconds(1000), 101 * kSecond);  // no status line without a terminal
  j.state = core::JobState::succeeded;
  j.finished_at = 165 * kSecond;
  j.wheel = "demo-1.0.0+cu130torch2.8-py3-none-any.whl";
  p.finished_states({j}, 200 * kSecond);
  EXPECT_EQ(p.summary({j}, milliseconds(66'000), 200 * kSecond), 0);

  EXPECT_FALSE(has_control_characters(out)) << out;
  EXPECT_EQ(lines_of(out),
            (std::vector<std::string>{
                "build 4: demo 1.0.0, 1 job, torch from "
                "http://127.0.0.1:9001/{cuda}/torch{torch}/simple/",
                "job 7 py3.12-torch2.8-cu130: log /data/builds/job-7/log.txt",
                "job 7 py3.12-torch2.8-cu130: building (attempt 1, MAX_JOBS=4 NVCC_THREADS=2)",
                "  ==> [building] attempt 1",
                "  compiling kernel.cu",
                "  partial",
                "job 7 py3.12-torch2.8-cu130: succeeded in 1m05s -> "
                "demo-1.0.0+cu130torch2.8-py3-none-any.whl",
                "",
                "job 7 py3.12-torch2.8-cu130  succeeded     1m05s  "
                "demo-1.0.0+cu130torch2.8-py3-none-any.whl",
                "1 succeeded, 0 failed in 1m06s",
            }))
      << out;
}

TEST(BuildProgress, ARebuildWithNothingNewSaysWhichFileIsPublished) {
  std::string out;
  BuildProgress p([&out](std::string_view s) { out += s; }, {});
  auto j = job(8, "3.12", core::JobState::queued);
  p.start(build_record(), {j}, log_of, "http://127.0.0.1:9001/{cuda}/torch{torch}/simple/");
  j.state = core::JobState::succeeded;
  j.started_at = 100 * kSecond;
  j.finished_at = 103 * kSecond;
  j.wheel = "demo-1.0.0+cu130torch2.8-1-py3-none-any.whl";
  j.build_number = 1;
  j.reason =
      "the identical file is already published: " + j.wheel + " (build 1); nothing new to publish";
  p.finished_states({j}, 200 * kSecond);
  EXPECT_NE(out.find("job 8 py3.12-torch2.8-cu130: succeeded in 3.0s -> " + j.wheel + " (" +
                     j.reason + ")"),
            std::string::npos)
      << out;
}

TEST(BuildProgress, SeveralJobsPrefixTheirLinesWithTheCell) {
  std::string out;
  BuildProgress p([&out](std::string_view s) { out += s; }, {});
  auto a = job(1, "3.11", core::JobState::building);
  auto b = job(2, "3.12", core::JobState::testing);
  auto c = job(3, "3.9", core::JobState::queued);
  p.start(build_record(), {a, b, c}, log_of, "");
  p.log(1, "line of a\n");
  p.log(2, "line of b\n");
  a.state = core::JobState::failed;
  a.reason = "build failed: exit 1";
  a.started_at = 0;
  a.finished_at = 3 * kSecond;
  b.state = core::JobState::cancelled;
  b.reason = "cancelled while running";
  b.started_at = kSecond;
  b.finished_at = 2 * kSecond;
  c.state = core::JobState::cancelled;
  c.reason = "cancelled before it started";
  p.finished_states({a, b, c}, 10 * kSecond);
  EXPECT_EQ(p.summary({a, b, c}, milliseconds(4000), 10 * kSecond), 3);

  EXPECT_FALSE(has_control_characters(out)) << out;
  const auto lines = lines_of(out);
  const std::vector<std::string> expected = {
      "build 4: demo 1.0.0, 3 jobs",
      "job 1 py3.11-torch2.8-cu130: log /data/builds/job-1/log.txt",
      "job 2 py3.12-torch2.8-cu130: log /data/builds/job-2/log.txt",
      "job 3 py3.9-torch2.8-cu130: log /data/builds/job-3/log.txt",
      "py3.11-torch2.8-cu130 | line of a",
      "py3.12-torch2.8-cu130 | line of b",
      "job 1 py3.11-torch2.8-cu130: failed in 3.0s (build failed: exit 1)",
      "job 2 py3.12-torch2.8-cu130: cancelled in 1.0s (cancelled while running)",
      "job 3 py3.9-torch2.8-cu130: cancelled (cancelled before it started)",
      "",
      "job 1 py3.11-torch2.8-cu130  failed         3.0s  build failed: exit 1",
      "job 2 py3.12-torch2.8-cu130  cancelled      1.0s  cancelled while running",
      "job 3 py3.9-torch2.8-cu130   cancelled         -  cancelled before it started",
      "0 succeeded, 1 failed, 2 cancelled in 4.0s",
  };
  EXPECT_EQ(lines, expected) << out;
}

TEST(BuildProgress, ATerminalGetsColoursAndAStatusLineThatFits) {
  std::string out;
  BuildProgress::Options options;
  options.terminal = true;
  options.color = true;
  options.width = [] { return 40U; };
  BuildProgress p([&out](std::string_view s) { out += s; }, options);
  auto a = job(1, "3.11", core::JobState::building);
  auto b = job(2, "3.12", core::JobState::queued);
  p.start(build_record(), {a, b}, log_of, "");
  p.running_states({a, b});
  out.clear();
  p.tick(milliseconds(62'000), 0);
  // Drawn in place, cut to the width (39 visible columns), dimmed.
  EXPECT_EQ(out, "\x1b[2m[1m02s] 0/2 done, 1 queued: py3.11-torc\x1b[0m");
  out.clear();
  p.log(1, "next line\n");
  // The status line is cleared before the next line is printed.
  EXPECT_TRUE(out.starts_with("\r\x1b[K")) << out;
  EXPECT_NE(out.find("\x1b[36mpy3.11-torch2.8-cu130 |\x1b[0m next line\n"), std::string::npos)
      << out;
  out.clear();
  a.state = core::JobState::succeeded;
  p.finished_states({a, b}, 0);
  EXPECT_NE(out.find("\x1b[32msucceeded\x1b[0m"), std::string::npos) << out;

  // Without colours (NO_COLOR), a terminal still gets the status line but no SGR codes.
  std::string plain;
  options.color = false;
  BuildProgress q([&plain](std::string_view s) { plain += s; }, options);
  q.start(build_record(), {a, b}, log_of, "");
  q.tick(milliseconds(1000), 0);
  q.log(2, "x\n");
  EXPECT_NE(plain.find("\r\x1b[K"), std::string::npos) << plain;
  EXPECT_NE(plain.find("[1.0s] 0/2 done"), std::string::npos) << plain;
  EXPECT_EQ(replace_every(plain, "\r\x1b[K", "").find('\x1b'), std::string::npos) << plain;
}

}  // namespace
}  // namespace wf::app
