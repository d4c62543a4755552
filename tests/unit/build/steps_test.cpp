// Every step of a build job, its success and its failures, driven through a Runner on a
// FakeExecutor (no compiler, no Python): what each step runs, with which environment, and what
// the job records when a step fails.

#include "build/steps.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "build/runner_bed.hpp"

namespace wf::build::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kLabelledWheel = "demo_pkg-1.0.0+cu130torch2.8-py3-none-any.whl";

// The position of the first command containing `match`, or -1.
int position(const std::vector<Recorded>& commands, std::string_view match) {
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].line().find(match) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

class Steps : public ::testing::Test {
 protected:
  Steps() : bed(::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  RunnerBed bed;
};

TEST_F(Steps, EveryStepRunsInOrderAndTheWheelIsPublished) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(job.wheel, kLabelledWheel);
  EXPECT_EQ(job.attempts, 1);
  EXPECT_EQ(bed.ingested.load(), 1);
  auto contents = bed.catalog->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(contents->files.front().filename, kLabelledWheel);

  const auto commands = bed.fake.commands();
  const std::vector<std::string> order = {
      "/opt/wf-test/cuda-13.0/bin/nvcc --version",
      "command -v ninja",
      std::string(kPython) + " -m venv " + (bed.data_dir / "builds" / "envs").string(),
      "-m pip install --index-url http://127.0.0.1:9/cu130/torch2.8/simple/ torch==2.8.* "
      "setuptools wheel",
      "print('python_version=",
      "/bin/cp -a /opt/wf-test/src/demo/. ",
      "fake-build",
      "test-env",
      "test-env/bin/python -m pip install --index-url http://127.0.0.1:9/cu130/torch2.8/simple/ "
      "torch==2.8.*",
      "test-env/bin/python -m pip install --no-index --no-deps",
      "test-env/bin/python -c import demo_pkg",
  };
  int last = -1;
  for (const auto& step : order) {
    const int at = position(commands, step);
    EXPECT_GT(at, last) << "'" << step << "' did not run after the previous step";
    last = std::max(last, at);
  }
  EXPECT_EQ(commands.size(), order.size());

  // The build's environment: the grant, the toolkit, the recipe's variables, nothing else
  // from the server.
  const auto build = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(build.size(), 1U);
  EXPECT_EQ(build[0].env_value("MAX_JOBS"), std::to_string(job.max_jobs));
  EXPECT_EQ(build[0].env_value("NVCC_THREADS"), std::to_string(job.nvcc_threads));
  EXPECT_EQ(build[0].env_value("CUDA_HOME"), std::string(kCudaHome));
  EXPECT_EQ(build[0].env_value("TORCH_CUDA_ARCH_LIST"), "8.0");
  EXPECT_EQ(build[0].env_value("PIP_NO_INDEX"), "1");
  EXPECT_EQ(build[0].env_value("WHEELFORGE_JOB"),
            (bed.data_dir / "builds").string() + "#" + std::to_string(job.id));
  const auto path = build[0].env_value("PATH").value_or("");
  EXPECT_THAT(path, ::testing::StartsWith((bed.data_dir / "builds" / "envs").string()));
  EXPECT_THAT(path, HasSubstr("/bin:" + std::string(kCudaHome) + "/bin:/usr/local/bin"));
  EXPECT_EQ(build[0].cwd, bed.data_dir / "builds" / ("job-" + std::to_string(job.id)) / "src");
  EXPECT_EQ(build[0].timeout, std::chrono::milliseconds(60000));

  // The toolchain is recorded with the job and written to the log.
  EXPECT_EQ(job.toolchain.nvcc, std::string(kCudaHome) + "/bin/nvcc");
  EXPECT_EQ(job.toolchain.nvcc_version, "13.0.48");
  EXPECT_EQ(job.toolchain.torch_version, "2.8.0+cu130");
  EXPECT_EQ(job.toolchain.torch_cuda, "13.0");
  EXPECT_EQ(job.toolchain.python, std::string(kPython));
  EXPECT_EQ(job.toolchain.python_version, "3.12.1");
  const std::string log = bed.log(job.id);
  for (const auto& step : job_steps()) {
    EXPECT_THAT(log, HasSubstr("step: " + std::string(step.name))) << log;
  }
  EXPECT_THAT(log, HasSubstr("==> [preparing] toolchain: nvcc 13.0.48 (" + std::string(kCudaHome) +
                             "/bin/nvcc), torch 2.8.0+cu130 (CUDA 13.0), Python 3.12.1 (" +
                             std::string(kPython) + ")"));
  EXPECT_THAT(log, HasSubstr("==> [retagging] demo_pkg-1.0.0-py3-none-any.whl -> " +
                             std::string(kLabelledWheel)));
  EXPECT_THAT(log, HasSubstr("==> succeeded"));

  // A succeeded job keeps only its log.
  std::vector<std::string> left;
  for (const auto& e :
       fs::directory_iterator(bed.data_dir / "builds" / ("job-" + std::to_string(job.id)))) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"log.txt"});
}

TEST_F(Steps, LogsAreReadThroughTheExecutor) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  const std::string log = bed.log(job.id);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(bed.runner().read_log(job.id, 0, 1U << 20U), log);
  EXPECT_EQ(bed.runner().read_log(job.id, 10, 5), log.substr(10, 5));
  EXPECT_EQ(bed.runner().read_log(job.id, log.size(), 100), "");
  const LogChunk tail = bed.runner().read_log_tail(job.id, 20);
  EXPECT_EQ(tail.offset, log.size() - 20);
  EXPECT_EQ(tail.data, log.substr(log.size() - 20));
  EXPECT_EQ(bed.runner().read_log(987654, 0, 100), "");
}

// ---- 1. verify CUDA toolkit

TEST_F(Steps, MissingNvccIsRefusedBeforeAnythingIsBuilt) {
  bed.fake.on("bin/nvcc --version",
              Outcome::fails_to_start(Errc::not_found,
                                      "cannot start '/opt/wf-test/cuda-13.0/bin/nvcc': No such "
                                      "file or directory"));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_THAT(job.reason,
              HasSubstr("CUDA 13.0: no usable nvcc in the CUDA home " + std::string(kCudaHome)));
  EXPECT_THAT(job.reason, HasSubstr(std::string(kCudaHome) + "/bin/nvcc"));
  EXPECT_EQ(bed.fake.commands().size(), 1U) << "nothing may run after the toolkit check";
  EXPECT_EQ(job.attempts, 0);
}

TEST_F(Steps, CellWithoutConfiguredToolkitIsRefused) {
  bed.config.host.cuda_homes.clear();
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "no CUDA toolkit configured for CUDA 13.0");
  EXPECT_TRUE(bed.fake.commands().empty());
}

TEST_F(Steps, NvccOfAnotherReleaseIsRefused) {
  HostScript host;
  host.nvcc_release = "12.8";
  host.nvcc_full = "12.8.93";
  script_host(bed.fake, host);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "CUDA 13.0 cell, but " + std::string(kCudaHome) + "/bin/nvcc is CUDA 12.8 (V12.8.93)");
  EXPECT_EQ(job.toolchain.nvcc_version, "12.8.93") << "what was found is recorded";
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
}

TEST_F(Steps, NvccThatFailsOrPrintsNoReleaseIsRefused) {
  bed.fake.on("bin/nvcc --version", Outcome::exit(0, "nvcc: command not understood\n"), 1);
  bed.fake.on("bin/nvcc --version",
              Outcome::exit(127,
                            "/opt/wf-test/cuda-13.0/bin/nvcc: error while loading shared "
                            "libraries: libcudart.so.13: cannot open shared object file\n"),
              1);
  script_host(bed.fake);
  const auto first = bed.run_one();
  ASSERT_EQ(first.state, core::JobState::failed);
  EXPECT_THAT(first.reason, HasSubstr("cannot read a CUDA release from `" + std::string(kCudaHome) +
                                      "/bin/nvcc --version`"));
  auto retried = bed.runner().retry(first.id);
  ASSERT_TRUE(retried);
  const auto second = bed.wait_until(
      first.id, [](const catalog::JobRecord& j) { return j.state == core::JobState::failed; });
  EXPECT_THAT(second.reason, HasSubstr("--version failed (exit 127)"));
  EXPECT_THAT(second.reason, HasSubstr("libcudart.so.13"));
}

// ---- 2. prepare environment

TEST_F(Steps, InstallFailureNamesTheMissingDistribution) {
  bed.fake.on("-m pip install --index-url",
              Outcome::exit(1,
                            "Looking in indexes: http://127.0.0.1:9/cu130/torch2.8/simple/\n"
                            "ERROR: Could not find a version that satisfies the requirement "
                            "torch==2.8.* (from versions: none)\n"
                            "ERROR: No matching distribution found for torch==2.8.*\n"),
              1);
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "prepare environment failed (exit 1): No matching distribution found for torch==2.8.*");
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
  EXPECT_TRUE(bed.fake.commands_matching("print('python_version=").empty());
}

TEST_F(Steps, CellWithoutConfiguredInterpreterIsRefused) {
  bed.config.host.pythons.clear();
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "no interpreter configured for Python 3.12");
}

TEST_F(Steps, VenvFailureFailsTheJob) {
  bed.fake.on(" -m venv ", Outcome::exit(1, "Error: [Errno 28] No space left on device\n"));
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "prepare environment failed (exit 1): Error: [Errno 28] No space left on device");
}

// ---- 3. verify torch and Python

struct ToolchainCase {
  const char* name;
  HostScript host;
  std::string reason;
};

class ToolchainRefusal : public ::testing::TestWithParam<ToolchainCase> {};

TEST_P(ToolchainRefusal, IsRefusedBeforeBuilding) {
  RunnerBed bed(std::string("toolchain-") + GetParam().name);
  script_host(bed.fake, GetParam().host);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_EQ(job.reason, GetParam().reason);
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
  EXPECT_EQ(job.toolchain.python_version, GetParam().host.python_version);
  EXPECT_EQ(job.toolchain.torch_version, GetParam().host.torch_version);
}

HostScript with(std::string python, std::string torch, std::string cuda) {
  HostScript h;
  h.python_version = std::move(python);
  h.torch_version = std::move(torch);
  h.torch_cuda = std::move(cuda);
  return h;
}

INSTANTIATE_TEST_SUITE_P(
    Steps, ToolchainRefusal,
    ::testing::Values(
        ToolchainCase{"other_series", with("3.12.1", "2.9.0+cu130", "13.0"),
                      "torch 2.9.0+cu130 is not of the cell's series 2.8"},
        ToolchainCase{"other_cuda_major", with("3.12.1", "2.8.0+cu128", "12.8"),
                      "torch 2.8.0+cu128 was built for CUDA 12.8, the cell is CUDA 13.0 (the "
                      "CUDA major must match)"},
        ToolchainCase{"cpu_torch", with("3.12.1", "2.8.0+cpu", "None"),
                      "torch 2.8.0+cpu is a CPU build (torch.version.cuda is None), the cell is "
                      "CUDA 13.0"},
        ToolchainCase{"no_torch", with("3.12.1", "", ""),
                      "torch cannot be imported in the build environment (ModuleNotFoundError: "
                      "No module named 'torch')"},
        ToolchainCase{"other_python", with("3.11.7", "2.8.0+cu130", "13.0"),
                      "Python 3.12 cell, but the interpreter is Python 3.11.7 (" +
                          std::string(kPython) + ")"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(Steps, OtherCudaMinorOfTheSameMajorIsAccepted) {
  // A torch built for CUDA 13.1 loads an extension built with CUDA 13.0 (same major).
  script_host(bed.fake, with("3.12.1", "2.8.0+cu131", "13.1"));
  script_build(bed.fake);
  const auto job = bed.run_one();
  EXPECT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
}

// ---- 4. fetch source

TEST_F(Steps, SourceCopyFailureFailsTheJob) {
  bed.fake.on("/bin/cp -a",
              Outcome::exit(1,
                            "/bin/cp: cannot stat '/opt/wf-test/src/demo/.': No such file or "
                            "directory\n"));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "fetch source failed (exit 1): /bin/cp: cannot stat '/opt/wf-test/src/demo/.': No "
            "such file or directory");
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
}

TEST_F(Steps, GitSourceIsClonedAtItsRef) {
  bed.config.recipes["demo"].recipe.source = {core::SourceSpec::Kind::git,
                                              "https://example.invalid/demo.git", "v1.0.0"};
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto commands = bed.fake.commands();
  const int clone =
      position(commands, "/usr/bin/git clone --quiet https://example.invalid/demo.git");
  const int checkout = position(commands, "checkout --quiet v1.0.0");
  EXPECT_GE(clone, 0);
  EXPECT_GT(checkout, clone);
}

TEST_F(Steps, MissingSdistFailsTheJob) {
  bed.config.recipes["demo"].recipe.source = {core::SourceSpec::Kind::index_sdist, "", ""};
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "no sdist of demo-pkg 1.0.0 in the index");
}

// ---- 5. build

TEST_F(Steps, CompileErrorIsTheReasonAndIsNotRetried) {
  bed.fake.on("fake-build",
              Outcome::exit(1,
                            "[1/2] /opt/wf-test/cuda-13.0/bin/nvcc -c kernel.cu -o kernel.o\n"
                            "FAILED: kernel.o\n"
                            "kernel.cu(3): error: identifier \"x\" is undefined\n"
                            "1 error detected in the compilation of \"kernel.cu\".\n"
                            "ninja: build stopped: subcommand failed.\n"
                            "error: subprocess-exited-with-error\n"));
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "build failed (exit 1): kernel.cu(3): error: identifier \"x\" is undefined");
  EXPECT_EQ(job.attempts, 1);
  EXPECT_EQ(bed.fake.commands_matching("fake-build").size(), 1U);
  EXPECT_THAT(bed.log(job.id), HasSubstr("==> failed: build failed (exit 1): kernel.cu(3)"));
}

TEST_F(Steps, OomIsRetriedWithHalfTheParallelism) {
  bed.fake.capacity_value = Capacity{8ULL << 30U, 8};
  bed.fake.on("fake-build",
              Outcome::exit(137, "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n"), 2);
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 3U);
  EXPECT_EQ(builds[0].env_value("MAX_JOBS"), "8");
  EXPECT_EQ(builds[1].env_value("MAX_JOBS"), "4");
  EXPECT_EQ(builds[2].env_value("MAX_JOBS"), "2");
  EXPECT_EQ(job.attempts, 3);
  EXPECT_EQ(job.max_jobs, 2U);
  EXPECT_THAT(bed.log(job.id),
              HasSubstr("==> [building] out of memory (exit 137); retrying with half the "
                        "parallelism: MAX_JOBS=4 NVCC_THREADS=1"));
}

TEST_F(Steps, OomRetriesAreBounded) {
  bed.config.host.oom_retries = 1;
  bed.fake.on("fake-build",
              Outcome::exit(1, "g++: fatal error: Killed signal terminated program cc1plus\n"));
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.attempts, 2);
  EXPECT_EQ(job.reason,
            "build ran out of memory (exit 1): g++: fatal error: Killed signal terminated program "
            "cc1plus");
}

TEST_F(Steps, BuildTimeoutFailsTheJob) {
  bed.config.recipes["demo"].recipe.timeout = std::chrono::seconds(1);
  bed.fake.on("fake-build", Outcome::hangs());
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "build timed out after 1s; its process tree was killed");
  EXPECT_EQ(job.attempts, 1) << "a timeout is not an OOM";
}

TEST_F(Steps, BuildWithoutOneWheelFails) {
  bed.fake.on("fake-build", Outcome::prints("nothing written\n"));
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "the build produced 0 wheels (expected 1)");
}

// ---- 6. retag

TEST_F(Steps, WheelOfAnotherProjectOrVersionIsRefused) {
  script_host(bed.fake);
  script_build(bed.fake, "other-pkg", "1.0.0");
  const auto other = bed.run_one();
  ASSERT_EQ(other.state, core::JobState::failed);
  EXPECT_EQ(other.reason, "the build produced a wheel of 'other-pkg', not 'demo-pkg'");

  RunnerBed second("retag-version");
  script_host(second.fake);
  script_build(second.fake, "demo-pkg", "1.0.1");
  const auto version = second.run_one();
  ASSERT_EQ(version.state, core::JobState::failed);
  EXPECT_EQ(version.reason, "the build produced version 1.0.1, not 1.0.0");
}

TEST_F(Steps, WheelLabelledAtBuildTimeIsNotRetagged) {
  bed.config.recipes["demo"].recipe.local_version_variable = "DEMO_LOCAL_VERSION";
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0+cu130torch2.8");
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(job.wheel, kLabelledWheel);
  EXPECT_THAT(bed.log(job.id), HasSubstr("already carries +cu130torch2.8"));
  EXPECT_EQ(bed.fake.commands_matching("fake-build")[0].env_value("DEMO_LOCAL_VERSION"),
            "cu130torch2.8");
}

// ---- 7. smoke test

TEST_F(Steps, FailingImportCheckNamesTheError) {
  bed.fake.on("-c import demo_pkg",
              Outcome::exit(1,
                            "Traceback (most recent call last):\n"
                            "  File \"<string>\", line 1, in <module>\n"
                            "ModuleNotFoundError: No module named 'demo_pkg._C'\n"));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason,
            "smoke test failed (exit 1): ModuleNotFoundError: No module named 'demo_pkg._C'");
  EXPECT_EQ(bed.ingested.load(), 0);
  // The import check runs from an empty directory, not the source tree.
  const auto check = bed.fake.commands_matching("-c import demo_pkg");
  ASSERT_EQ(check.size(), 1U);
  EXPECT_EQ(check[0].cwd.filename(), "empty");
  // A failed job keeps its work directory for inspection.
  EXPECT_TRUE(fs::exists(bed.data_dir / "builds" / ("job-" + std::to_string(job.id)) / "out"));
}

TEST_F(Steps, FailedWorkDirectoriesAreRemovedWhenConfigured) {
  bed.config.host.keep_failed_work_dirs = false;
  bed.fake.on("-c import demo_pkg", Outcome::exit(1));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  std::vector<std::string> left;
  for (const auto& e :
       fs::directory_iterator(bed.data_dir / "builds" / ("job-" + std::to_string(job.id)))) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"log.txt"});
}

// ---- 8. ingest

TEST_F(Steps, IngestConflictFailsTheJob) {
  // A file of the name the retagged wheel gets is stored already, with other bytes.
  const fs::path other = write_wheel(bed.data_dir / "elsewhere", "demo-pkg", "1.0.0+cu130torch2.8");
  ASSERT_TRUE(bed.ingestor->ingest_path(other));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_THAT(job.reason, HasSubstr("ingest: File already exists"));
  EXPECT_EQ(bed.ingested.load(), 0);
}

// ---- Cancellation and shutdown

TEST_F(Steps, CancelKillsTheRunningCommand) {
  bed.fake.on("fake-build", Outcome::hangs());
  script_host(bed.fake);
  bed.start();
  const auto job = bed.submit();
  ASSERT_TRUE(bed.fake.wait_started("fake-build", 30s));
  auto cancelled = bed.runner().cancel(job.id);
  ASSERT_TRUE(cancelled) << cancelled.error().message;
  const auto done = bed.wait_terminal(job.id);
  EXPECT_EQ(done.state, core::JobState::cancelled);
  EXPECT_EQ(done.reason, "cancelled while running");
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 1U);
  EXPECT_TRUE(builds[0].cancelled);
  EXPECT_EQ(bed.fake.running(), 0);
  EXPECT_THAT(bed.log(job.id), HasSubstr("==> cancelled: the process tree was killed"));
}

TEST_F(Steps, CancelBeforeStartAndRetry) {
  const auto job = bed.submit();  // the runner is not started: the job stays queued
  auto cancelled = bed.runner().cancel(job.id);
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->state, core::JobState::cancelled);
  EXPECT_EQ(cancelled->reason, "cancelled before it started");
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start();
  ASSERT_TRUE(bed.runner().retry(job.id));
  EXPECT_EQ(bed.wait_terminal(job.id).state, core::JobState::succeeded);
}

TEST_F(Steps, StopLeavesTheJobToBeRequeuedAndRunAgain) {
  bed.fake.on("fake-build", Outcome::hangs(), 1);
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start();
  const auto job = bed.submit();
  ASSERT_TRUE(bed.fake.wait_started("fake-build", 30s));
  bed.runner().stop();
  auto stopped = bed.jobs->find_job(job.id);
  ASSERT_TRUE(stopped && stopped->has_value());
  EXPECT_EQ((*stopped)->state, core::JobState::building) << "left running, to be requeued";
  EXPECT_THAT(bed.log(job.id), HasSubstr("the job will be requeued at the next start"));

  // Crash recovery: the next runner requeues the interrupted job and runs it to the end.
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(job.id);
  EXPECT_EQ(done.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_THAT(bed.log(job.id), HasSubstr("the server stopped while this job ran; requeued"));
  EXPECT_EQ(bed.fake.commands_matching("fake-build").size(), 2U);
}

TEST_F(Steps, OneOffRunnerLeavesInterruptedJobsAlone) {
  const auto job = bed.submit();
  ASSERT_TRUE(bed.jobs->transition(job.id, core::JobState::preparing));
  ASSERT_TRUE(bed.jobs->transition(job.id, core::JobState::building));
  bed.start(Runner::Recovery::leave);
  auto left = bed.jobs->find_job(job.id);
  ASSERT_TRUE(left && left->has_value());
  EXPECT_EQ((*left)->state, core::JobState::building);
}

TEST_F(Steps, RecipeRemovedWhileQueuedFailsTheJob) {
  const auto job = bed.submit();
  bed.runner().set_recipes({});
  bed.start();
  const auto done = bed.wait_terminal(job.id);
  EXPECT_EQ(done.state, core::JobState::failed);
  EXPECT_EQ(done.reason, "recipe 'demo' is no longer configured");
}

// ---- Disk and permission errors fail the job, not the runner

TEST_F(Steps, FileWhereTheWorkDirectoryShouldBeFailsTheJobCleanly) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.submit();  // queued; the runner is not started yet
  const fs::path work = bed.data_dir / "builds" / ("job-" + std::to_string(job.id));
  fs::create_directories(work.parent_path());
  std::ofstream(work) << "not a directory\n";
  bed.start();
  const auto failed = bed.wait_terminal(job.id);
  ASSERT_EQ(failed.state, core::JobState::failed);
  EXPECT_THAT(failed.reason, HasSubstr(work.string()));
  EXPECT_TRUE(bed.fake.commands().empty());

  // The runner goes on: the next job builds.
  fs::remove(work);
  const auto next = bed.submit(bed.runner(), "demo", true);
  EXPECT_EQ(bed.wait_terminal(next.id).state, core::JobState::succeeded) << bed.log(next.id);
}

TEST_F(Steps, FileWhereTheEnvironmentsShouldBeFailsTheJobCleanly) {
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start();
  const fs::path envs = bed.data_dir / "builds" / "envs";
  fs::remove_all(envs);
  std::ofstream(envs) << "not a directory\n";
  const auto job = bed.submit();
  const auto failed = bed.wait_terminal(job.id);
  ASSERT_EQ(failed.state, core::JobState::failed);
  EXPECT_THAT(failed.reason, HasSubstr("cannot create directory " + envs.string()));
  EXPECT_TRUE(bed.fake.commands_matching(" -m venv ").empty());

  fs::remove(envs);
  const auto next = bed.submit(bed.runner(), "demo", true);
  EXPECT_EQ(bed.wait_terminal(next.id).state, core::JobState::succeeded) << bed.log(next.id);
}

TEST_F(Steps, ExecutorThatCannotPrepareTheWorkDirectoryFailsTheJob) {
  bed.fake.fail_prepare(
      make_error(Errc::storage_full, "create /mnt/work: No space left on device"));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "create /mnt/work: No space left on device");
}

}  // namespace
}  // namespace wf::build::testing
