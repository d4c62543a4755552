// Detached commands of the local executor (src/build/detached.hpp): a build that outlives the
// execution (the server) that started it, and an executor made afresh (a restarted server)
// that re-attaches to it, while it runs and after it ended, with real processes.

#include "build/detached.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_files.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing_files::read_file;

bool alive(pid_t pid) {
  return process_start_ticks(pid).has_value();
}

class Detached : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf_detached_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A build of job 1 (detached) running `script`.
  ProcessSpec build(const std::string& script) const {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = minimal_environment();
    spec.env.emplace_back("WHEELFORGE_JOB", dir_.string() + "#1");
    spec.cwd = dir_;
    spec.log_file = dir_ / "log.txt";
    spec.kill_grace = 2s;
    spec.placement.job_id = 1;
    spec.placement.job_tag = dir_.string() + "#1";
    spec.placement.work_dir = dir_;
    spec.placement.log = dir_ / "log.txt";
    spec.placement.lifetime = CommandPlacement::Lifetime::detached;
    return spec;
  }

  // Waits until `file` exists (a bounded wait: the commands here take well under a second).
  bool appears(const fs::path& file) const {
    const auto until = Clock::now() + 20s;
    while (Clock::now() < until) {
      if (fs::exists(file)) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static ExitStatus wait(Execution& e) {
    const auto until = Clock::now() + 30s;
    while (Clock::now() < until) {
      if (auto s = e.poll()) return *s;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the command did not end within 30 s";
    e.cancel();
    return ExitStatus{};
  }

  // Starts `spec` on an executor and lets go of it while it runs, as a stopping server does.
  void start_and_leave(const ProcessSpec& spec) {
    auto executor = make_local_executor();
    auto started = executor->start(spec);
    ASSERT_TRUE(started) << started.error().message;
    EXPECT_TRUE((*started)->detached());
  }

  // The supervisor's pid from the command's record.
  pid_t supervisor(const ProcessSpec& spec) const {
    auto record = read_detached_record(detached_dir(dir_, command_identity(spec)));
    EXPECT_TRUE(record) << (record ? "" : record.error().message);
    return record ? record->pid : -1;
  }

  fs::path dir_;
};

TEST_F(Detached, ACommandStartedHereReportsItsExitStatus) {
  auto executor = make_local_executor();
  EXPECT_TRUE(executor->reattaches());
  auto started = executor->start(build("echo building; exit 3"));
  ASSERT_TRUE(started) << started.error().message;
  const ExitStatus status = wait(**started);
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 3);
  EXPECT_EQ(read_file(dir_ / "log.txt"), "building\n");
}

TEST_F(Detached, ItOutlivesItsExecutionAndARestartedExecutorReattachesToIt) {
  const fs::path go = dir_ / "go";
  const ProcessSpec spec =
      build("echo started >> runs; while [ ! -e go ]; do sleep 0.05; done; echo finished; exit 0");
  start_and_leave(spec);
  ASSERT_TRUE(appears(dir_ / "runs"));
  const pid_t pid = supervisor(spec);
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(alive(pid)) << "destroying the execution ended the detached command";

  auto restarted = make_local_executor();
  auto attached = restarted->reattach(spec);
  ASSERT_TRUE(attached) << attached.error().message;
  EXPECT_FALSE((*attached)->poll()) << "reported ended while it runs";
  std::ofstream(go).put('\n');
  const ExitStatus status = wait(**attached);
  EXPECT_TRUE(status.success()) << status.describe();
  EXPECT_EQ(read_file(dir_ / "runs"), "started\n");  // it ran once
  EXPECT_EQ(read_file(dir_ / "log.txt"), "finished\n");
}

TEST_F(Detached, ACommandThatEndedWhileNobodyWatchedIsCollected) {
  const ProcessSpec spec = build("echo done; exit 7");
  start_and_leave(spec);
  const fs::path dir = detached_dir(dir_, command_identity(spec));
  ASSERT_TRUE(appears(dir / "exit"));
  auto attached = make_local_executor()->reattach(spec);
  ASSERT_TRUE(attached) << attached.error().message;
  const ExitStatus status = wait(**attached);
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 7);
}

TEST_F(Detached, AnotherCommandOrOneWithoutItsSupervisorIsNotReattachedTo) {
  const ProcessSpec spec = build("touch started; sleep 30");
  start_and_leave(spec);
  // The supervisor has started the command (a loaded machine may take a while to fork it).
  ASSERT_TRUE(appears(dir_ / "started"));
  // The configuration changed: another command line or environment.
  ProcessSpec other = spec;
  other.env.emplace_back("MAX_JOBS", "2");
  auto refused = make_local_executor()->reattach(other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::not_found);
  // A supervisor killed on its own leaves no exit status: nothing to attach to.
  const pid_t pid = supervisor(spec);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto until = Clock::now() + 10s;
  while (alive(pid) && Clock::now() < until) std::this_thread::sleep_for(20ms);
  auto gone = make_local_executor()->reattach(spec);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, Errc::not_found);
  EXPECT_NE(gone.error().message.find("without recording how the command ended"), std::string::npos)
      << gone.error().message;
  // What is left of it (the shell and its sleep) ends with the job's release.
  EXPECT_TRUE(group_has_live_members(pid));
  make_local_executor()->release(spec.placement, Executor::Release::abandoned);
  EXPECT_NE(read_file(dir_ / "log.txt").find("process(es) left from the previous attempt"),
            std::string::npos)
      << read_file(dir_ / "log.txt");
  const auto gone_by = Clock::now() + 10s;
  while (group_has_live_members(pid) && Clock::now() < gone_by) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(group_has_live_members(pid));
}

TEST_F(Detached, CancellingAReattachedCommandEndsItsWholeGroup) {
  // The pid is written whole before the name appears, so the test never reads a half file.
  const ProcessSpec spec = build("sleep 30 & echo $! > child.tmp && mv child.tmp child; wait");
  start_and_leave(spec);
  ASSERT_TRUE(appears(dir_ / "child"));
  const auto child = parse_u64(trim(read_file(dir_ / "child")));
  ASSERT_TRUE(child);
  auto attached = make_local_executor()->reattach(spec);
  ASSERT_TRUE(attached) << attached.error().message;
  (*attached)->cancel();
  const ExitStatus status = wait(**attached);
  EXPECT_TRUE(status.cancelled) << status.describe();
  const auto until = Clock::now() + 10s;
  while (alive(static_cast<pid_t>(*child)) && Clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(alive(static_cast<pid_t>(*child))) << "the build's compiler survived the cancel";
}

TEST_F(Detached, TheTimeoutOfAReattachedCommandCountsFromItsStart) {
  ProcessSpec spec = build("sleep 30");
  spec.timeout = 2s;
  start_and_leave(spec);
  std::this_thread::sleep_for(2200ms);
  // Its time is up already: the restarted executor ends it at once, where a timeout counted
  // afresh from the re-attach would give it 2 s more.
  const auto attached_at = Clock::now();
  auto attached = make_local_executor()->reattach(spec);
  ASSERT_TRUE(attached) << attached.error().message;
  const ExitStatus status = wait(**attached);
  EXPECT_TRUE(status.timed_out) << status.describe();
  EXPECT_LT(Clock::now() - attached_at, spec.timeout);
}

}  // namespace
}  // namespace wf::build
