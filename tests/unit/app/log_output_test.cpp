#include "wheelforge/app/log_output.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace wf::app {
namespace {

using namespace std::chrono;

/// An in-memory file the output writes to.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("wf-log-test", 0)) { EXPECT_GE(fd_, 0); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { ::close(fd_); }
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] std::string text() const {
    std::string out;
    char buf[65536];
    off_t at = 0;
    while (true) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return out;
  }
  [[nodiscard]] std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  int fd_;
};

const system_clock::time_point kWhen =
    system_clock::time_point(seconds(1795342272)) + microseconds(345);  // 2026-11-22T10:11:12Z

TEST(LogOutput, TextLinesCarryUtcTimeWithMicrosecondsAndTheLevel) {
  MemFile file;
  LogOutput out(file.fd(), LogOutput::Style::text);
  out.line(LogLevel::info, kWhen, "hello {} world");
  out.line(LogLevel::warn, kWhen + microseconds(999'655), "next second");
  out.line(LogLevel::error, kWhen - seconds(86400), "a day earlier");
  out.flush();
  EXPECT_EQ(file.lines(), (std::vector<std::string>{
                              "2026-11-22T10:11:12.000345Z info hello {} world",
                              "2026-11-22T10:11:13.000000Z warning next second",
                              "2026-11-21T10:11:12.000345Z error a day earlier",
                          }));
}

TEST(LogOutput, JournalLinesStartWithTheSyslogPriority) {
  MemFile file;
  LogOutput out(file.fd(), LogOutput::Style::journal);
  out.line(LogLevel::critical, kWhen, "c");
  out.line(LogLevel::error, kWhen, "e");
  out.line(LogLevel::warn, kWhen, "w");
  out.line(LogLevel::info, kWhen, "i");
  out.line(LogLevel::debug, kWhen, "d");
  out.flush();
  EXPECT_EQ(file.lines(), (std::vector<std::string>{"<2>c", "<3>e", "<4>w", "<6>i", "<7>d"}));
}

TEST(LogOutput, KeepsEveryLineOfManyThreadsInEachThreadsOrder) {
  MemFile file;
  constexpr int kThreads = 4;
  constexpr int kLines = 20000;
  {
    LogOutput out(file.fd(), LogOutput::Style::journal);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&out, t] {
        for (int i = 0; i < kLines; ++i) {
          out.line(LogLevel::info, system_clock::now(),
                   "t" + std::to_string(t) + " " + std::to_string(i));
        }
      });
    }
    for (auto& th : threads) th.join();
    out.flush();
    // flush() covers the lines of threads that have ended.
    EXPECT_EQ(file.lines().size(), static_cast<std::size_t>(kThreads * kLines));
  }
  std::map<int, int> next;
  for (const auto& line : file.lines()) {
    ASSERT_TRUE(line.starts_with("<6>t")) << line;
    const auto space = line.find(' ');
    const int t = std::stoi(line.substr(4, space - 4));
    const int i = std::stoi(line.substr(space + 1));
    ASSERT_EQ(i, next[t]) << "thread " << t << " out of order";
    ++next[t];
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kLines);
}

TEST(LogOutput, WritesWhatIsLeftWhenDestroyed) {
  MemFile file;
  {
    LogOutput out(file.fd(), LogOutput::Style::journal);
    out.line(LogLevel::info, kWhen, "last words");
  }
  EXPECT_EQ(file.text(), "<6>last words\n");
}

TEST(LogOutput, WarningsAreWrittenWithoutAFlush) {
  MemFile file;
  LogOutput out(file.fd(), LogOutput::Style::journal);
  out.line(LogLevel::error, kWhen, "urgent");
  // The writer is woken at once; wait (bounded) for it rather than assume a time.
  const auto deadline = steady_clock::now() + seconds(10);
  while (file.text().empty() && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(file.text(), "<3>urgent\n");
}

TEST(LogOutput, DropsAndCountsLinesAboveThePendingLimit) {
  MemFile file;
  constexpr int kLines = 2000;
  LogOutput out(file.fd(), LogOutput::Style::journal, /*max_pending=*/64);
  for (int i = 0; i < kLines; ++i) out.line(LogLevel::info, kWhen, "line " + std::to_string(i));
  out.flush();
  int written = 0;
  int dropped = 0;
  for (const auto& line : file.lines()) {
    if (line.starts_with("<6>line ")) {
      ++written;
    } else {
      ASSERT_TRUE(line.starts_with("<4>log: ")) << line;
      dropped += std::stoi(line.substr(8));
      EXPECT_NE(line.find("line(s) dropped, the log output is too slow"), std::string::npos);
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(written + dropped, kLines);
}

}  // namespace
}  // namespace wf::app
