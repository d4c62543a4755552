#include "wheelforge/build/process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "test_files.hpp"

namespace wf::build {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing_files::read_file;

// Members of a process group that can still run. kill(-pgid, 0) would also count zombies, and
// orphans reparented to a PID 1 that never reaps them (as in some containers) stay zombies.
int live_members(pid_t pgid) {
  if (::kill(-pgid, 0) == -1 && errno == ESRCH) return 0;
  int live = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    long pgrp = 0;
    if (!(fields >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') ++live;
  }
  return live;
}

// Waits (up to a generous bound) until nothing in the group can run any more.
bool group_gone_within(pid_t pgid, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (live_members(pgid) == 0) return true;
    std::this_thread::sleep_for(10ms);
  }
  return live_members(pgid) == 0;
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf_process_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    log_ = dir_ / "build.log";
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessSpec sh(const std::string& script) const {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = minimal_environment();
    spec.cwd = dir_;
    spec.log_file = log_;
    return spec;
  }

  // Waits until the script has written `marker` to the log, so that traps and background
  // children exist before the test signals the group.
  bool log_contains_within(const std::string& marker, std::chrono::milliseconds limit) const {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (read_file(log_).find(marker) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  fs::path dir_;
  fs::path log_;
};

ExitStatus run(const ProcessSpec& spec) {
  auto status = run_to_completion(spec, {}, 10ms);
  EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message);
  return status.ok() ? status.value() : ExitStatus{};
}

TEST_F(ProcessTest, ReportsExitCodes) {
  const ExitStatus ok = run(sh("exit 0"));
  EXPECT_TRUE(ok.exited);
  EXPECT_EQ(ok.code, 0);
  EXPECT_TRUE(ok.success());
  EXPECT_EQ(ok.describe(), "exit 0");

  const ExitStatus three = run(sh("exit 3"));
  EXPECT_TRUE(three.exited);
  EXPECT_EQ(three.code, 3);
  EXPECT_FALSE(three.success());
  EXPECT_EQ(three.describe(), "exit 3");
}

TEST_F(ProcessTest, Exit137AndDeathBySigkillAreDistinguishable) {
  const ExitStatus code = run(sh("exit 137"));
  EXPECT_TRUE(code.exited);
  EXPECT_EQ(code.code, 137);
  EXPECT_EQ(code.signal, 0);
  EXPECT_EQ(code.describe(), "exit 137");

  const ExitStatus killed = run(sh("kill -KILL $$"));
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_FALSE(killed.success());
  EXPECT_EQ(killed.describe(), "killed by SIGKILL");
}

TEST_F(ProcessTest, EnvironmentIsExactlyTheGivenOne) {
  ProcessSpec spec = sh("");
  spec.argv = {"env"};  // looked up in the build's PATH
  spec.env = {{"WF_FIRST", "1"}, {"PATH", "/usr/bin:/bin"}, {"WF_SPACES", "a b=c"}};
  const ExitStatus status = run(spec);
  EXPECT_TRUE(status.success()) << status.describe();
  EXPECT_EQ(read_file(log_), "WF_FIRST=1\nPATH=/usr/bin:/bin\nWF_SPACES=a b=c\n");
}

TEST_F(ProcessTest, RunsInTheGivenWorkingDirectory) {
  fs::create_directories(dir_ / "src");
  ProcessSpec spec = sh("");
  spec.argv = {"/bin/pwd", "-P"};
  spec.cwd = dir_ / "src";
  EXPECT_TRUE(run(spec).success());
  EXPECT_EQ(read_file(log_), fs::canonical(dir_ / "src").string() + "\n");
}

TEST_F(ProcessTest, RelativeProgramPathIsTakenFromTheWorkingDirectory) {
  {
    std::ofstream script(dir_ / "configure");
    script << "#!/bin/sh\necho configured\n";
  }
  fs::permissions(dir_ / "configure", fs::perms::owner_all);
  ProcessSpec spec = sh("");
  spec.argv = {"./configure"};
  EXPECT_TRUE(run(spec).success());
  EXPECT_EQ(read_file(log_), "configured\n");
}

TEST_F(ProcessTest, AppendsStdoutAndStderrToTheLog) {
  EXPECT_TRUE(run(sh("echo first; echo to-stderr >&2")).success());
  EXPECT_TRUE(run(sh("echo second")).success());
  EXPECT_EQ(read_file(log_), "first\nto-stderr\nsecond\n");
}

TEST_F(ProcessTest, StdinIsDevNull) {
  EXPECT_TRUE(run(sh("cat; readlink /proc/self/fd/0")).success());
  EXPECT_EQ(read_file(log_), "/dev/null\n");
}

TEST_F(ProcessTest, DoesNotLeakDescriptors) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 0);
  const ExitStatus status =
      run(sh("test -e /proc/$$/fd/" + std::to_string(leaked) + " && echo leaked || echo closed"));
  ::close(leaked);
  EXPECT_TRUE(status.success());
  EXPECT_EQ(read_file(log_), "closed\n");
}

TEST_F(ProcessTest, ChildSignalsAreUnblockedAndDefaultEvenWhenTheServerBlocksThem) {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGHUP);
  sigset_t old_mask;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_pipe {};
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old_pipe), 0);

  // grep directly, not through sh: dash clears its signal mask at startup and would hide an
  // inherited one.
  ProcessSpec spec = sh("");
  spec.argv = {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"};
  const ExitStatus status = run(spec);

  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  EXPECT_TRUE(status.success());
  const std::string log = read_file(log_);
  EXPECT_NE(log.find("SigBlk:\t0000000000000000\n"), std::string::npos) << log;
  const auto ign = log.find("SigIgn:\t");
  ASSERT_NE(ign, std::string::npos) << log;
  const std::uint64_t ignored = std::stoull(log.substr(ign + 8, 16), nullptr, 16);
  // glibc's posix_spawn always leaves its two reserved signals (32 and 33, below SIGRTMIN)
  // ignored in the child; no program can use them, and glibc reinstalls its handlers.
  const std::uint64_t glibc_reserved = (1ULL << 31) | (1ULL << 32);
  EXPECT_EQ(ignored & ~glibc_reserved, 0U) << log;
}

TEST_F(ProcessTest, CancelKillsTheWholeTree) {
  ProcessSpec spec = sh("sleep 30 & sleep 30 & echo ready; wait");
  spec.kill_grace = 5s;
  auto process = Process::start(spec);
  ASSERT_TRUE(process.ok()) << process.error().message;
  const pid_t pgid = process->pid();
  ASSERT_TRUE(log_contains_within("ready", 10s));
  EXPECT_EQ(live_members(pgid), 3);

  const auto begin = Clock::now();
  process->cancel();
  const ExitStatus status = process->wait();
  EXPECT_TRUE(status.cancelled);
  EXPECT_TRUE(process->cancelled());
  EXPECT_FALSE(status.timed_out);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.describe(), "cancelled");
  EXPECT_TRUE(group_gone_within(pgid, 10s));
  EXPECT_LT(Clock::now() - begin, 10s);
}

TEST_F(ProcessTest, TimeoutKillsTheWholeTree) {
  ProcessSpec spec = sh("sleep 30 & sleep 30 & wait");
  spec.timeout = 300ms;
  spec.kill_grace = 2s;
  auto process = Process::start(spec);
  ASSERT_TRUE(process.ok()) << process.error().message;
  const pid_t pgid = process->pid();

  const auto begin = Clock::now();
  const ExitStatus status = process->wait();
  EXPECT_TRUE(status.timed_out);
  EXPECT_TRUE(process->timed_out());
  EXPECT_FALSE(status.cancelled);
  EXPECT_EQ(status.timeout, 300ms);
  EXPECT_EQ(status.describe(), "timed out after 300ms");
  EXPECT_TRUE(group_gone_within(pgid, 10s));
  EXPECT_LT(Clock::now() - begin, 10s);
}

TEST_F(ProcessTest, RunToCompletionEnforcesTheTimeout) {
  ProcessSpec spec = sh("sleep 30");
  spec.timeout = 1s;
  const ExitStatus status = run(spec);
  EXPECT_TRUE(status.timed_out);
  EXPECT_EQ(status.describe(), "timed out after 1s");
}

TEST_F(ProcessTest, RunToCompletionHonoursCancellation) {
  std::atomic<int> asked{0};
  const auto begin = Clock::now();
  auto status = run_to_completion(
      sh("sleep 30 & echo ready; wait"),
      [&] { return ++asked > 3 && read_file(log_).find("ready") != std::string::npos; }, 10ms);
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_TRUE(status->cancelled);
  EXPECT_LT(Clock::now() - begin, 10s);
}

TEST_F(ProcessTest, SigtermIgnoringChildIsKilledAfterTheGrace) {
  ProcessSpec spec = sh("trap '' TERM; echo ready; sleep 30");
  spec.kill_grace = 300ms;
  auto process = Process::start(spec);
  ASSERT_TRUE(process.ok()) << process.error().message;
  const pid_t pgid = process->pid();
  ASSERT_TRUE(log_contains_within("ready", 10s));

  const auto begin = Clock::now();
  process->cancel();
  const ExitStatus status = process->wait();
  const auto elapsed = Clock::now() - begin;
  EXPECT_TRUE(status.cancelled);
  EXPECT_FALSE(status.exited);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_GE(elapsed, 300ms);  // SIGKILL never comes before the grace is over
  EXPECT_LT(elapsed, 10s);
  EXPECT_TRUE(group_gone_within(pgid, 10s));
}

TEST_F(ProcessTest, LeaderExitLeavesNoOrphans) {
  auto process = Process::start(sh("sleep 30 & echo started"));
  ASSERT_TRUE(process.ok()) << process.error().message;
  const pid_t pgid = process->pid();
  std::optional<ExitStatus> status;
  const auto until = Clock::now() + 10s;
  while (!status && Clock::now() < until) {
    status = process->poll();
    if (!status) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->success()) << status->describe();
  EXPECT_TRUE(group_gone_within(pgid, 10s));
  // Finished is final: poll() keeps answering the same.
  ASSERT_TRUE(process->poll().has_value());
  EXPECT_TRUE(process->poll()->success());
}

TEST_F(ProcessTest, DestructorKillsARunningGroup) {
  pid_t pgid = -1;
  {
    auto process = Process::start(sh("sleep 30 & sleep 30"));
    ASSERT_TRUE(process.ok()) << process.error().message;
    pgid = process->pid();
  }
  EXPECT_TRUE(group_gone_within(pgid, 10s));
}

TEST_F(ProcessTest, MovedProcessKeepsOwnership) {
  auto started = Process::start(sh("exit 4"));
  ASSERT_TRUE(started.ok()) << started.error().message;
  Process moved = std::move(started.value());
  const ExitStatus status = moved.wait();
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 4);
}

TEST_F(ProcessTest, KillGroupSignalsEveryMember) {
  auto process = Process::start(sh("sleep 30 & echo ready; wait"));
  ASSERT_TRUE(process.ok()) << process.error().message;
  ASSERT_TRUE(log_contains_within("ready", 10s));
  process->kill_group(SIGKILL);
  const ExitStatus status = process->wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_FALSE(status.cancelled);
  EXPECT_EQ(status.describe(), "killed by SIGKILL");
  EXPECT_TRUE(group_gone_within(process->pid(), 10s));
}

TEST_F(ProcessTest, MissingProgramIsAClearError) {
  ProcessSpec spec = sh("");
  spec.argv = {"/nonexistent/wf-compiler"};
  auto absolute = Process::start(spec);
  ASSERT_FALSE(absolute.ok());
  EXPECT_EQ(absolute.error().code, Errc::not_found);
  EXPECT_NE(absolute.error().message.find("/nonexistent/wf-compiler"), std::string::npos)
      << absolute.error().message;

  spec.argv = {"wf-no-such-program"};
  auto searched = run_to_completion(spec, {});
  ASSERT_FALSE(searched.ok());
  EXPECT_EQ(searched.error().code, Errc::not_found);
  EXPECT_NE(searched.error().message.find("wf-no-such-program"), std::string::npos);
  EXPECT_NE(searched.error().message.find("not found in PATH=/usr/local/bin:/usr/bin:/bin"),
            std::string::npos)
      << searched.error().message;

  spec.env = {{"HOME", "/tmp"}};
  auto no_path = Process::start(spec);
  ASSERT_FALSE(no_path.ok());
  EXPECT_NE(no_path.error().message.find("no PATH"), std::string::npos) << no_path.error().message;
}

TEST_F(ProcessTest, NonExecutableProgramIsInvalid) {
  { std::ofstream(dir_ / "data.txt") << "not a program\n"; }
  ProcessSpec spec = sh("");
  spec.argv = {(dir_ / "data.txt").string()};
  auto process = Process::start(spec);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.error().code, Errc::invalid);
  EXPECT_NE(process.error().message.find("not an executable"), std::string::npos);
}

TEST_F(ProcessTest, MissingWorkingDirectoryIsAClearError) {
  ProcessSpec spec = sh("true");
  spec.cwd = dir_ / "missing";
  auto process = Process::start(spec);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.error().code, Errc::not_found);
  EXPECT_NE(process.error().message.find("missing"), std::string::npos);
}

TEST_F(ProcessTest, InvalidSpecReportsEveryProblem) {
  ProcessSpec spec;
  spec.env = {{"", "x"}, {"A=B", "y"}};
  auto process = Process::start(spec);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.error().code, Errc::invalid);
  const std::string& message = process.error().message;
  EXPECT_NE(message.find("argv is empty"), std::string::npos) << message;
  EXPECT_NE(message.find("no log file"), std::string::npos) << message;
  EXPECT_NE(message.find("'A=B'"), std::string::npos) << message;
}

TEST(ExitStatusTest, Describe) {
  ExitStatus s;
  s.signal = SIGSEGV;
  EXPECT_EQ(s.describe(), "killed by SIGSEGV");
  s.signal = 64;
  EXPECT_EQ(s.describe(), "killed by signal 64");
  s.timed_out = true;
  s.timeout = 5000ms;
  EXPECT_EQ(s.describe(), "timed out after 5s");
  s.cancelled = true;
  EXPECT_EQ(s.describe(), "cancelled");
}

TEST_F(ProcessTest, ReadLogTail) {
  EXPECT_EQ(read_log_tail(dir_ / "missing.log", 100), "");
  { std::ofstream(log_) << "line one\nline two\n"; }
  EXPECT_EQ(read_log_tail(log_, 1000), "line one\nline two\n");
  EXPECT_EQ(read_log_tail(log_, 9), "line two\n");
  EXPECT_EQ(read_log_tail(log_, 0), "");
  // "é" is two bytes; a cut between them must not leave a stray continuation byte.
  { std::ofstream(log_) << "caf\xC3\xA9!"; }
  EXPECT_EQ(read_log_tail(log_, 2), "!");
  EXPECT_EQ(read_log_tail(log_, 3), "\xC3\xA9!");
}

TEST(EnvironmentTest, MinimalEnvironment) {
  const auto env = minimal_environment();
  ASSERT_EQ(env.size(), 3U);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"PATH", "/usr/local/bin:/usr/bin:/bin"}));
  EXPECT_EQ(env[1].first, "HOME");
  EXPECT_FALSE(env[1].second.empty());
  EXPECT_EQ(env[2], (std::pair<std::string, std::string>{"LANG", "C.UTF-8"}));
}

TEST(ResourceProbeTest, ReportsPlausibleValues) {
  const std::uint64_t memory = available_memory_bytes();
  EXPECT_GT(memory, 0U);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    EXPECT_LE(memory, static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size));
  }
  const unsigned cores = available_cores();
  EXPECT_GE(cores, 1U);
  if (std::thread::hardware_concurrency() > 0) {
    EXPECT_LE(cores, std::thread::hardware_concurrency());
  }
}

}  // namespace
}  // namespace wf::build
