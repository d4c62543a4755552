// Every step of a build job, its success and its failures, driven through a Runner on a
// FakeExecutor (no compiler, no Python): what each step runs, with which environment, and what
// the job records when a step fails.

#include "build/steps.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>

#include "archive/shell.hpp"
#include "build/runner_bed.hpp"
#include "build/test_files.hpp"
#include "wheelforge/archive/retag.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/manylinux.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fixtures = archive::fixtures;

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
  // The runner is recorded as the file's uploader, and in the audit trail with its job.
  EXPECT_EQ(contents->files.front().uploaded_by, "build");
  const auto trail = bed.catalog->audit(catalog::AuditQuery{});
  ASSERT_TRUE(trail);
  ASSERT_EQ(trail->size(), 1U);
  EXPECT_EQ(trail->front().action, "upload");
  EXPECT_EQ(trail->front().actor.label(), "build");
  EXPECT_EQ(trail->front().actor.address, "job " + std::to_string(job.id));

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
  std::string path = build[0].env_value("PATH").value_or("");
  // With ccache on the host, the compile cache's compiler wrappers come first.
  if (const std::string wrappers = (bed.data_dir / "builds" / "compilers").string() + "/";
      path.starts_with(wrappers)) {
    path.erase(0, path.find(':') + 1);
    EXPECT_EQ(build[0].env_value("CCACHE_DIR"),
              (bed.data_dir / "builds" / "ccache" / "demo").string());
  }
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

  // A succeeded job keeps only its log and what the compile cache did.
  std::vector<std::string> left;
  for (const auto& e :
       fs::directory_iterator(bed.data_dir / "builds" / ("job-" + std::to_string(job.id)))) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"compile-cache.txt", "log.txt"}));
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

TEST_F(Steps, GitSourceIsClonedAtItsRefWithItsSubmodules) {
  bed.config.recipes["demo"].recipe.source = {core::SourceSpec::Kind::git,
                                              "https://example.invalid/demo.git", "v1.0.0"};
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto commands = bed.fake.commands();
  const int clone = position(commands, "clone --quiet https://example.invalid/demo.git");
  const int checkout = position(commands, "checkout --quiet v1.0.0");
  const int submodules = position(commands, "submodule update --init --recursive");
  const int commit = position(commands, "rev-parse HEAD");
  EXPECT_GE(clone, 0);
  EXPECT_GT(checkout, clone);
  EXPECT_GT(submodules, checkout);
  EXPECT_GT(commit, submodules);
  EXPECT_THAT(bed.log(job.id),
              HasSubstr("==> [preparing] source at commit " + std::string(kCommit)));
  for (const int i : {clone, checkout, submodules}) {
    const Recorded& git = commands[static_cast<std::size_t>(i)];
    // The system's credential helpers are dropped; nothing prompts.
    EXPECT_THAT(git.line(), HasSubstr("/usr/bin/git -c credential.helper= "));
    EXPECT_EQ(git.env_value("GIT_TERMINAL_PROMPT"), "0");
    EXPECT_EQ(git.env_value("HOME"),
              (bed.data_dir / "builds" / ("job-" + std::to_string(job.id))).string());
  }
}

TEST_F(Steps, ACheckoutWithoutACommitFailsTheFetch) {
  bed.config.recipes["demo"].recipe.source = {core::SourceSpec::Kind::git,
                                              "https://example.invalid/demo.git", ""};
  bed.fake.on("rev-parse HEAD", Outcome::exit(128, "fatal: not a git repository\n"));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_THAT(job.reason, HasSubstr("fetch source: git rev-parse HEAD failed (exit 128)"));
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
}

TEST_F(Steps, SubmodulesFalseFetchesNone) {
  core::SourceSpec source{core::SourceSpec::Kind::git, "https://example.invalid/demo.git", ""};
  source.submodules = core::SourceSpec::Submodules::none;
  bed.config.recipes["demo"].recipe.source = source;
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_TRUE(bed.fake.commands_matching("submodule").empty());
}

TEST_F(Steps, ATokenInTheGitUrlGoesToACredentialFileNotToGit) {
  const std::string token = "ghp_steps0123456789secret";
  bed.config.recipes["demo"].recipe.source = {
      core::SourceSpec::Kind::git, "https://builder:" + token + "@example.invalid/demo.git", ""};
  std::string store_seen;
  bed.fake.on("clone --quiet", Outcome::does([&store_seen](const ProcessSpec& spec) {
                // The helper's file, as git would read it during the clone.
                store_seen = testing_files::read_file(spec.placement.work_dir / "git-credentials");
              }));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(store_seen, "https://builder:" + token + "@example.invalid\n");
  for (const auto& c : bed.fake.commands_matching("/usr/bin/git")) {
    EXPECT_THAT(c.line(), Not(HasSubstr(token)));
  }
  const auto clone = bed.fake.commands_matching("clone --quiet https://example.invalid/demo.git");
  ASSERT_EQ(clone.size(), 1U);
  EXPECT_THAT(clone[0].line(), HasSubstr("credential.helper=!wf_get()"));
  EXPECT_THAT(clone[0].line(), HasSubstr("git-credentials"));
  EXPECT_THAT(bed.log(job.id), Not(HasSubstr(token)));
  EXPECT_FALSE(
      fs::exists(bed.data_dir / "builds" / ("job-" + std::to_string(job.id)) / "git-credentials"));
}

TEST_F(Steps, AMissingCredentialsFileIsNamed) {
  core::SourceSpec source{core::SourceSpec::Kind::git, "https://example.invalid/demo.git", ""};
  source.credentials = "/opt/wf-test/no-such-credentials";
  bed.config.recipes["demo"].recipe.source = source;
  script_host(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_THAT(job.reason, HasSubstr("fetch source: the credentials file "
                                    "/opt/wf-test/no-such-credentials: "));
  EXPECT_TRUE(bed.fake.commands_matching("clone").empty());
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

// ---- 7. analyze binaries

// Shared objects compiled here with gcc, for wheels with real binaries.
class Binaries : public Steps {
 protected:
  void SetUp() override {
    if (fixtures::shell("command -v gcc && command -v objdump").first != 0) {
      GTEST_SKIP() << "gcc or objdump is not on PATH";
    }
    arch_ = trim_copy(fixtures::shell("uname -m").second);
    dir_ = bed.data_dir / "objects";
    fs::create_directories(dir_);
  }

  // Compiles `source` into dir_/`name` as a shared object, with `flags` (e.g. "-L... -lx").
  fs::path compile(const std::string& name, const std::string& source,
                   const std::string& flags = {}) {
    const fs::path c = dir_ / (name + ".c");
    std::ofstream(c) << source;
    const fs::path so = dir_ / name;
    const auto [status, out] = fixtures::shell("gcc -shared -fPIC -O1 -o " + fixtures::quote(so) +
                                               " " + fixtures::quote(c) + " " + flags);
    EXPECT_EQ(status, 0) << out;
    return so;
  }

  // A wheel of demo-pkg 1.0.0 for cp312 on linux_<arch> holding `so` as demo_pkg/_C.so.
  fs::path wheel_with(const fs::path& so, const std::string& platform = {}) {
    std::ifstream in(so, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    return write_wheel_with(
        dir_ / "wheels" / so.filename(), "demo-pkg", "1.0.0",
        "cp312-cp312-" + (platform.empty() ? "linux_" + arch_ : platform),
        {{"demo_pkg/__init__.py", "from . import _C\n"}, {"demo_pkg/_C.so", bytes}});
  }

  // The highest GLIBC_x.y that `objdump -T` lists for `so`.
  static std::string objdump_glibc_floor(const fs::path& so) {
    const auto [status, out] = fixtures::shell("objdump -T " + fixtures::quote(so));
    EXPECT_EQ(status, 0) << out;
    std::vector<int> best;
    std::string best_text;
    for (std::size_t pos = out.find("GLIBC_"); pos != std::string::npos;
         pos = out.find("GLIBC_", pos + 1)) {
      std::size_t end = pos + 6;
      while (end < out.size() &&
             (std::isdigit(static_cast<unsigned char>(out[end])) != 0 || out[end] == '.')) {
        ++end;
      }
      const std::string text = out.substr(pos + 6, end - pos - 6);
      std::vector<int> numbers;
      for (const auto part : split(text, '.')) {
        if (!part.empty()) numbers.push_back(std::stoi(std::string(part)));
      }
      if (!numbers.empty() && numbers > best) {
        best = numbers;
        best_text = text;
      }
    }
    return best_text;
  }

  static std::string trim_copy(const std::string& s) { return std::string(trim(s)); }

  std::string arch_;
  fs::path dir_;
};

constexpr std::string_view kUsesGlibc =
    "#include <string.h>\n#include <stdio.h>\n"
    "int demo(char* d, const char* s, unsigned long n) { memcpy(d, s, n); return puts(d); }\n";

TEST_F(Binaries, LinuxWheelGetsTheLowestHonestManylinuxTag) {
  const fs::path so = compile("_C.so", std::string(kUsesGlibc));
  const std::string floor = objdump_glibc_floor(so);
  ASSERT_FALSE(floor.empty());
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(job.glibc_floor, floor);
  // The label and the manylinux tag in one rewrite.
  auto name = core::parse_dist_filename(job.wheel);
  ASSERT_TRUE(name) << job.wheel;
  EXPECT_EQ(name->version.str(), "1.0.0+cu130torch2.8");
  const auto tags = name->tags.platform_tags();
  ASSERT_FALSE(tags.empty());
  EXPECT_THAT(tags.front(), ::testing::StartsWith("manylinux_2_"));
  EXPECT_THAT(tags.front(), ::testing::EndsWith("_" + arch_));
  // The lowest policy that allows the floor: 2_17 (with its alias) up to glibc 2.17, else the
  // floor's own.
  const auto glibc = core::glibc_of_platform_tags(tags);
  ASSERT_TRUE(glibc);
  const auto floor_minor = std::stoi(floor.substr(floor.find('.') + 1));
  const auto tag_minor = std::stoi(glibc->substr(glibc->find('.') + 1));
  EXPECT_EQ(tag_minor, std::max(17, floor_minor)) << job.wheel;
  const std::string log = bed.log(job.id);
  EXPECT_THAT(log, HasSubstr("==> [retagging] demo_pkg/_C.so (" + arch_ + "): NEEDED libc.so.6"));
  EXPECT_THAT(log, HasSubstr("glibc floor " + floor));
  EXPECT_THAT(log, HasSubstr("==> [retagging] manylinux: " + tags.front()));
  EXPECT_THAT(log, HasSubstr("==> [retagging] demo_pkg-1.0.0-cp312-cp312-linux_" + arch_ +
                             ".whl -> " + job.wheel));
  EXPECT_EQ(position(bed.fake.commands(), "--no-deps"), position(bed.fake.commands(), job.wheel))
      << "the smoke test installs the retagged wheel";
  auto contents = bed.catalog->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(contents->files.front().filename, job.wheel);
}

TEST_F(Binaries, UnprovidedLibraryFailsTheJobWithItsName) {
  const fs::path stub = compile("libwfmissing.so", "int wf_missing(void) { return 1; }\n");
  const fs::path so =
      compile("_C.so", "int wf_missing(void);\nint demo(void) { return wf_missing(); }\n",
              "-L" + fixtures::quote(dir_) + " -lwfmissing");
  ASSERT_TRUE(fs::exists(stub));
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_THAT(job.reason, HasSubstr("analyze binaries: not manylinux: demo_pkg/_C.so needs "
                                    "libwfmissing.so, which neither the wheel, torch, CUDA nor any "
                                    "manylinux policy provides"));
  EXPECT_EQ(bed.ingested.load(), 0);
  EXPECT_TRUE(bed.fake.commands_matching("test-env").empty()) << "no smoke test";
}

TEST_F(Binaries, TorchAndCudaLibrariesAndTheWheelsOwnAreProvided) {
  // Stand-ins named as torch's and CUDA's libraries, and one the wheel carries itself.
  compile("libc10.so", "int c10(void) { return 1; }\n");
  compile("libcudart.so.13", "int cudart(void) { return 1; }\n", "-Wl,-soname,libcudart.so.13");
  const fs::path own = compile("libdemo_helper.so", "int helper(void) { return 1; }\n");
  const fs::path so =
      compile("_C.so",
              "int c10(void); int cudart(void); int helper(void);\n"
              "int demo(void) { return c10() + cudart() + helper(); }\n",
              "-L" + fixtures::quote(dir_) + " -lc10 -l:libcudart.so.13 -ldemo_helper");
  std::ifstream in(so, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ifstream hin(own, std::ios::binary);
  const std::string helper((std::istreambuf_iterator<char>(hin)), {});
  const fs::path wheel =
      write_wheel_with(dir_ / "wheels", "demo-pkg", "1.0.0", "cp312-cp312-linux_" + arch_,
                       {{"demo_pkg/_C.so", bytes}, {"demo_pkg.libs/libdemo_helper.so", helper}});
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_THAT(job.wheel, HasSubstr("-manylinux_2_"));
  EXPECT_THAT(bed.log(job.id), HasSubstr("NEEDED libc10.so, libcudart.so.13, libdemo_helper.so"));
}

TEST_F(Binaries, ManylinuxTagOfTheBuildIsKeptWhenHonestAndRefusedWhenNot) {
  const fs::path so = compile("_C.so", std::string(kUsesGlibc));
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so, "manylinux_2_28_" + arch_), 1);
  const auto honest = bed.run_one();
  ASSERT_EQ(honest.state, core::JobState::succeeded) << bed.log(honest.id);
  EXPECT_EQ(honest.wheel,
            "demo_pkg-1.0.0+cu130torch2.8-cp312-cp312-manylinux_2_28_" + arch_ + ".whl");
  EXPECT_THAT(bed.log(honest.id), HasSubstr("is honest; kept"));

  // A binary that needs a newer glibc than its tag promises. The objects gcc makes here need
  // what this host's glibc offers; the tag claims manylinux1 (glibc 2.5), older than any
  // floor a binary calling memcpy can have (2.14 on x86_64).
  RunnerBed second("dishonest-tag");
  script_host(second.fake);
  script_build_copies(second.fake, wheel_with(so, "manylinux1_" + arch_));
  const auto dishonest = second.run_one();
  ASSERT_EQ(dishonest.state, core::JobState::failed);
  EXPECT_THAT(dishonest.reason,
              HasSubstr("analyze binaries: the wheel is tagged manylinux1_" + arch_ +
                        " (glibc 2.5), but its binaries need manylinux_2_"));
}

// Needs pthread_create@GLIBC_2.34 on glibc 2.34 and later (libpthread moved into libc there).
constexpr std::string_view kUsesThreads =
    "#include <pthread.h>\n"
    "static void* run(void* arg) { return arg; }\n"
    "int demo(void) { pthread_t t; return pthread_create(&t, 0, run, 0) || pthread_join(t, 0); }\n";

// The minor of a glibc floor ("2.34" -> 34).
int glibc_minor(const std::string& floor) {
  return floor.empty() ? 0 : std::stoi(floor.substr(floor.find('.') + 1));
}

TEST_F(Binaries, WheelAboveTheRecipesManylinuxCeilingFailsNamingItAndIsNotPublished) {
  const fs::path so = compile("_C.so", std::string(kUsesThreads), "-pthread");
  const std::string floor = objdump_glibc_floor(so);
  if (glibc_minor(floor) < 34) GTEST_SKIP() << "this host's glibc links pthread_create@" << floor;
  bed.config.recipes.at("demo").recipe.manylinux = core::ManylinuxCeiling{28};
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_THAT(job.reason, ::testing::StartsWith("analyze binaries: the wheel needs manylinux_2_"));
  EXPECT_THAT(job.reason, HasSubstr("_" + arch_ +
                                    ", above the ceiling manylinux_2_28 (the recipe's manylinux "
                                    "= \"2_28\"): GLIBC_2.34 (libc.so.6: pthread_create"));
  EXPECT_THAT(job.reason, HasSubstr(") needed by demo_pkg/_C.so"));
  EXPECT_THAT(job.reason, ::testing::EndsWith("; build on an older system (a container of an older "
                                              "image) or raise the recipe's manylinux key"));
  EXPECT_EQ(bed.ingested.load(), 0);
  EXPECT_TRUE(bed.fake.commands_matching("test-env").empty()) << "no smoke test";
  auto contents = bed.catalog->load();
  ASSERT_TRUE(contents);
  EXPECT_TRUE(contents->files.empty());
}

TEST_F(Binaries, TheDefaultCeilingIsThePlatformTagOfTheEnvironmentsTorchWheel) {
  const fs::path so = compile("_C.so", std::string(kUsesThreads), "-pthread");
  const std::string floor = objdump_glibc_floor(so);
  if (glibc_minor(floor) < 34) GTEST_SKIP() << "this host's glibc links pthread_create@" << floor;
  const fs::path wheel = wheel_with(so);
  HostScript host;
  host.torch_wheel_tags = "cp312-cp312-manylinux_2_28_" + arch_;
  script_host(bed.fake, host);
  script_build_copies(bed.fake, wheel);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_THAT(job.reason, HasSubstr(", above the ceiling manylinux_2_28 (the platform tag of torch "
                                    "2.8.0+cu130 in the build environment (manylinux_2_28_" +
                                    arch_ + ")): GLIBC_2.34 (libc.so.6: pthread_create"));
  EXPECT_EQ(bed.ingested.load(), 0);

  // The recipe's key wins over torch's tag.
  RunnerBed raised("ceiling-raised");
  raised.config.recipes.at("demo").recipe.manylinux =
      core::ManylinuxCeiling{static_cast<std::uint32_t>(std::max(34, glibc_minor(floor)))};
  script_host(raised.fake, host);
  script_build_copies(raised.fake, wheel);
  const auto built = raised.run_one();
  ASSERT_EQ(built.state, core::JobState::succeeded) << raised.log(built.id);
  EXPECT_THAT(raised.log(built.id),
              HasSubstr("==> [retagging] within the ceiling manylinux_2_" +
                        std::to_string(std::max(34, glibc_minor(floor))) + " (the recipe's"));

  // A torch installed from no manylinux wheel (a local build: linux_<arch>) sets no ceiling.
  RunnerBed local("ceiling-none");
  host.torch_wheel_tags = "cp312-cp312-linux_" + arch_;
  script_host(local.fake, host);
  script_build_copies(local.fake, wheel);
  const auto unbounded = local.run_one();
  ASSERT_EQ(unbounded.state, core::JobState::succeeded) << local.log(unbounded.id);
  EXPECT_THAT(local.log(unbounded.id), Not(HasSubstr("within the ceiling")));
}

TEST_F(Binaries, WheelTaggedAboveTheCeilingByItsBuildFails) {
  const fs::path so = compile("_C.so", std::string(kUsesGlibc));
  bed.config.recipes.at("demo").recipe.manylinux = core::ManylinuxCeiling{17};
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so, "manylinux_2_28_" + arch_));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_EQ(job.reason, "analyze binaries: the wheel is tagged manylinux_2_28_" + arch_ +
                            ", above the ceiling manylinux_2_17 (the recipe's manylinux = "
                            "\"2_17\"); its binaries need only manylinux_2_17_" +
                            arch_);
  EXPECT_EQ(bed.ingested.load(), 0);
}

TEST_F(Binaries, WheelOfAnotherArchitectureIsRefused) {
  const fs::path so = compile("_C.so", std::string(kUsesGlibc));
  const std::string other = arch_ == "aarch64" ? "x86_64" : "aarch64";
  script_host(bed.fake);
  script_build_copies(bed.fake, wheel_with(so, "linux_" + other));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "analyze binaries: the wheel is tagged linux_" + other +
                            ", but its binaries are " + arch_);
}

TEST_F(Steps, WheelWithoutBinariesKeepsItsPlatformTag) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(job.wheel, kLabelledWheel);
  EXPECT_EQ(job.glibc_floor, "");
  EXPECT_THAT(bed.log(job.id), HasSubstr("==> [retagging] manylinux: no ELF binaries"));
}

TEST_F(Steps, DamagedWheelFailsTheAnalysis) {
  script_host(bed.fake);
  bed.fake.on("fake-build", Outcome::does([](const ProcessSpec& spec) {
                for (const auto& [k, v] : spec.env) {
                  if (k != "HOME") continue;
                  fs::create_directories(fs::path(v) / "out");
                  std::ofstream(fs::path(v) / "out" / "demo_pkg-1.0.0-py3-none-any.whl")
                      << "not a zip";
                }
              }));
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::failed);
  EXPECT_THAT(job.reason, HasSubstr("analyze binaries: "));
  EXPECT_EQ(bed.ingested.load(), 0);
}

// ---- 8. number the build

std::vector<std::string> catalog_files(RunnerBed& bed) {
  std::vector<std::string> out;
  auto contents = bed.catalog->load();
  EXPECT_TRUE(contents);
  if (!contents) return out;
  for (const auto& f : contents->files) {
    out.push_back(f.filename + (f.yanked ? " yanked: " + *f.yanked : std::string()));
  }
  return out;
}

TEST_F(Steps, RebuildIsPublishedUnderTheNextBuildNumber) {
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 1\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 3\n", 1);
  const auto first = bed.run_one();
  ASSERT_EQ(first.state, core::JobState::succeeded) << bed.log(first.id);
  EXPECT_EQ(first.build_number, 0U);
  const auto second = bed.rebuild();
  ASSERT_EQ(second.state, core::JobState::succeeded) << bed.log(second.id);
  EXPECT_EQ(second.wheel, "demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl");
  EXPECT_EQ(second.build_number, 1U);
  EXPECT_EQ(second.reason, "");
  EXPECT_THAT(bed.log(second.id),
              HasSubstr("was published before (highest build 0, other contents): this rebuild "
                        "is build 1"));
  EXPECT_THAT(bed.log(second.id),
              HasSubstr("==> [retagging] " + std::string(kLabelledWheel) + " -> " + second.wheel));
  const auto third = bed.rebuild();
  ASSERT_EQ(third.state, core::JobState::succeeded) << bed.log(third.id);
  EXPECT_EQ(third.wheel, "demo_pkg-1.0.0+cu130torch2.8-2-py3-none-any.whl");
  EXPECT_EQ(third.build_number, 2U);
  // Every build stays published (nothing is yanked without yank_superseded).
  EXPECT_THAT(catalog_files(bed),
              ::testing::ElementsAre("demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl",
                                     "demo_pkg-1.0.0+cu130torch2.8-2-py3-none-any.whl",
                                     std::string(kLabelledWheel)));
  // The smoke test installed the numbered wheel.
  EXPECT_EQ(bed.fake
                .commands_matching("--no-deps " + (bed.data_dir / "builds").string() + "/job-" +
                                   std::to_string(third.id) + "/numbered/" + third.wheel)
                .size(),
            1U);
}

TEST_F(Steps, IdenticalRebuildPublishesNothing) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto first = bed.run_one();
  ASSERT_EQ(first.state, core::JobState::succeeded);
  const auto tests_before = bed.fake.commands_matching("test-env").size();
  const auto second = bed.rebuild();
  ASSERT_EQ(second.state, core::JobState::succeeded) << bed.log(second.id);
  EXPECT_EQ(second.wheel, kLabelledWheel);
  EXPECT_EQ(second.build_number, 0U);
  EXPECT_EQ(second.reason, "the identical file is already published: " +
                               std::string(kLabelledWheel) + " (build 0); nothing new to publish");
  EXPECT_THAT(bed.log(second.id), HasSubstr("==> succeeded: the identical file is already"));
  EXPECT_THAT(bed.log(second.id), Not(HasSubstr("step: smoke test")));
  EXPECT_EQ(bed.fake.commands_matching("test-env").size(), tests_before) << "no smoke test";
  EXPECT_EQ(bed.ingested.load(), 1);
  EXPECT_THAT(catalog_files(bed), ::testing::ElementsAre(std::string(kLabelledWheel)));
}

TEST_F(Steps, DeletedBuildNumbersStayTaken) {
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 1\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n", 1);
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  const auto second = bed.rebuild();
  ASSERT_EQ(second.build_number, 1U) << bed.log(second.id);
  ASSERT_TRUE(bed.catalog->delete_file(second.wheel, wf::catalog::Actor{}));
  // The same contents as the deleted build 1: the published build is 0, whose contents differ,
  // and build 1's name is reserved.
  const auto third = bed.rebuild();
  ASSERT_EQ(third.state, core::JobState::succeeded) << bed.log(third.id);
  EXPECT_EQ(third.wheel, "demo_pkg-1.0.0+cu130torch2.8-2-py3-none-any.whl");
  EXPECT_THAT(bed.log(third.id), HasSubstr("highest build 1, other contents"));
}

TEST_F(Steps, YankSupersededYanksTheEarlierBuilds) {
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 1\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 3\n", 1);
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  ASSERT_EQ(bed.rebuild().state, core::JobState::succeeded);
  const int reloads = bed.ingested.load();
  const auto third = bed.rebuild(true);
  ASSERT_EQ(third.state, core::JobState::succeeded) << bed.log(third.id);
  EXPECT_EQ(third.build_number, 2U);
  EXPECT_THAT(catalog_files(bed),
              ::testing::ElementsAre(
                  "demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl yanked: superseded by build 2",
                  "demo_pkg-1.0.0+cu130torch2.8-2-py3-none-any.whl",
                  std::string(kLabelledWheel) + " yanked: superseded by build 2"));
  EXPECT_THAT(bed.log(third.id), HasSubstr("==> [ingesting] yanked " + std::string(kLabelledWheel) +
                                           " (superseded by build 2)"));
  EXPECT_EQ(bed.ingested.load(), reloads + 1);
  // The runner's yanks are in the audit trail, with the job that made them.
  const auto trail = bed.catalog->audit(catalog::AuditQuery{});
  ASSERT_TRUE(trail);
  const auto yanks = std::count_if(trail->begin(), trail->end(), [&](const auto& e) {
    return e.action == "yank" && e.actor.label() == "build" &&
           e.actor.address == "job " + std::to_string(third.id);
  });
  EXPECT_EQ(yanks, 2);
  auto build = bed.jobs->find_build(third.build_id);
  ASSERT_TRUE(build && build->has_value());
  EXPECT_TRUE((*build)->yank_superseded);
}

TEST_F(Steps, RecipeDefaultYanksUnlessTheRequestSaysOtherwise) {
  bed.config.recipes["demo"].recipe.yank_superseded = true;
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 1\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 3\n", 1);
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  const auto kept = bed.rebuild(false);
  ASSERT_EQ(kept.state, core::JobState::succeeded) << bed.log(kept.id);
  EXPECT_THAT(catalog_files(bed),
              ::testing::ElementsAre("demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl",
                                     std::string(kLabelledWheel)));
  const auto yanking = bed.rebuild();
  ASSERT_EQ(yanking.state, core::JobState::succeeded) << bed.log(yanking.id);
  EXPECT_THAT(catalog_files(bed),
              ::testing::ElementsAre(
                  "demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl yanked: superseded by build 2",
                  "demo_pkg-1.0.0+cu130torch2.8-2-py3-none-any.whl",
                  std::string(kLabelledWheel) + " yanked: superseded by build 2"));
}

TEST_F(Steps, RequestWithNothingToBuildIsRefusedAndRecordsNothing) {
  script_host(bed.fake);
  script_build(bed.fake);
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  core::BuildRequest request;
  request.recipe = "demo";
  request.version = "1.0.0";
  auto created = bed.runner().submit(request);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::conflict);
  EXPECT_EQ(created.error().message,
            "all cells built; use force to rebuild (demo 1.0.0: py3.12-torch2.8-cu130)");
  auto builds = bed.jobs->list_builds(10);
  ASSERT_TRUE(builds);
  EXPECT_EQ(builds->size(), 1U);
}

// ---- 9. smoke test

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
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"compile-cache.txt", "log.txt"}));
}

// ---- 10. ingest

TEST_F(Steps, IngestConflictFailsTheJob) {
  // Between the numbering and the ingest, another file takes the name the rebuild gets.
  script_host(bed.fake);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 1\n", 1);
  script_build(bed.fake, "demo-pkg", "1.0.0", "ANSWER = 2\n");
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  const fs::path other =
      write_wheel(bed.data_dir / "elsewhere", "demo-pkg", "1.0.0+cu130torch2.8", "ANSWER = 3\n");
  bed.fake.on("-c import demo_pkg", Outcome::does([&](const ProcessSpec&) {
                archive::WheelChanges c;
                c.build_tag = "1";
                auto numbered = archive::rewrite_wheel(other, c, bed.data_dir / "elsewhere" / "1");
                ASSERT_TRUE(numbered) << numbered.error().message;
                ASSERT_TRUE(bed.ingestor->ingest_path(*numbered));
              }));
  const auto job = bed.rebuild();
  ASSERT_EQ(job.state, core::JobState::failed) << bed.log(job.id);
  EXPECT_THAT(job.reason, HasSubstr("ingest: File already exists"));
  EXPECT_THAT(job.reason, HasSubstr("demo_pkg-1.0.0+cu130torch2.8-1-py3-none-any.whl"));
  EXPECT_EQ(bed.ingested.load(), 1);
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

// A job store whose database is briefly out of reach: the first `outages` writes of a final
// state fail as unavailable, and recording the wheel's name always fails.
class FlakyJobs final : public catalog::JobStore {
 public:
  FlakyJobs(catalog::JobStore& real, int outages) : real_(real), outages_(outages) {}
  std::atomic<int> final_attempts{0};

  Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> create_build(
      const catalog::BuildRecord& build, const std::vector<core::Cell>& cells) override {
    return real_.create_build(build, cells);
  }
  Result<std::vector<catalog::BuildRecord>> list_builds(std::size_t limit) override {
    return real_.list_builds(limit);
  }
  Result<std::optional<catalog::BuildRecord>> find_build(std::int64_t id) override {
    return real_.find_build(id);
  }
  Result<std::vector<catalog::JobRecord>> jobs_of_build(std::int64_t id) override {
    return real_.jobs_of_build(id);
  }
  Result<std::optional<catalog::JobRecord>> find_job(std::int64_t id) override {
    return real_.find_job(id);
  }
  Result<std::vector<catalog::JobRecord>> jobs_in_state(core::JobState state) override {
    return real_.jobs_in_state(state);
  }
  Result<catalog::JobRecord> transition(std::int64_t id, core::JobState to,
                                        const std::string& reason) override {
    if (core::is_terminal(to) && final_attempts.fetch_add(1) < outages_) {
      return make_error(Errc::unavailable, "PostgreSQL at 127.0.0.1:1/wf: connection lost");
    }
    return real_.transition(id, to, reason);
  }
  Result<catalog::JobRecord> transition_as(const std::string& runner, std::int64_t id,
                                           core::JobState to, const std::string& reason) override {
    if (core::is_terminal(to) && final_attempts.fetch_add(1) < outages_) {
      return make_error(Errc::unavailable, "PostgreSQL at 127.0.0.1:1/wf: connection lost");
    }
    return real_.transition_as(runner, id, to, reason);
  }
  Result<std::optional<catalog::JobRecord>> claim(std::int64_t id, const std::string& runner,
                                                  Micros lease_until) override {
    return real_.claim(id, runner, lease_until);
  }
  Result<catalog::Lease> renew_lease(std::int64_t id, const std::string& runner,
                                     Micros lease_until) override {
    return real_.renew_lease(id, runner, lease_until);
  }
  Status adopt(std::int64_t id, const std::string& runner, Micros lease_until) override {
    return real_.adopt(id, runner, lease_until);
  }
  Result<std::vector<catalog::JobRecord>> requeue_expired(Micros now) override {
    return real_.requeue_expired(now);
  }
  Status record_attempt(std::int64_t id, unsigned max_jobs, unsigned nvcc_threads) override {
    return real_.record_attempt(id, max_jobs, nvcc_threads);
  }
  Status record_wheel(std::int64_t, const std::string&, std::uint64_t) override {
    return make_error(Errc::unavailable, "PostgreSQL at 127.0.0.1:1/wf: connection lost");
  }
  Status record_glibc_floor(std::int64_t id, const std::string& floor) override {
    return real_.record_glibc_floor(id, floor);
  }
  Status record_toolchain(std::int64_t id, const catalog::Toolchain& toolchain) override {
    return real_.record_toolchain(id, toolchain);
  }
  Status record_executor_job(std::int64_t id, const std::string& job) override {
    return real_.record_executor_job(id, job);
  }
  Status record_provenance(std::int64_t id, const catalog::Provenance& provenance) override {
    return real_.record_provenance(id, provenance);
  }
  Result<std::vector<catalog::JobRecord>> requeue_interrupted(
      const std::set<std::int64_t>& still_running) override {
    return real_.requeue_interrupted(still_running);
  }
  Result<bool> cell_built(const std::string& recipe, const std::string& version,
                          const core::Cell& cell) override {
    return real_.cell_built(recipe, version, cell);
  }

 private:
  catalog::JobStore& real_;
  int outages_;
};

TEST_F(Steps, AFinalStateIsWrittenOnceTheJobStoreIsBackAndLostRecordsAreSaid) {
  script_host(bed.fake);
  script_build(bed.fake);
  FlakyJobs flaky(*bed.jobs, 3);
  Runner runner(bed.config, bed.fake, flaky, *bed.catalog, *bed.store, *bed.ingestor, bed.data_dir,
                [] {});
  runner.set_server_url(std::string(kServer));
  ASSERT_TRUE(runner.start(Runner::Recovery::requeue_interrupted));
  const auto job = bed.submit(runner);
  const auto done = bed.wait_terminal(job.id);
  // Three refused writes, then the fourth one lands: the build's outcome is not lost.
  EXPECT_EQ(done.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_EQ(flaky.final_attempts.load(), 4);
  // The wheel was published; only its name in the job record is missing, and the log says so.
  EXPECT_EQ(bed.ingested.load(), 0);  // the bed's own callback is not this runner's
  auto contents = bed.catalog->load();
  ASSERT_TRUE(contents);
  EXPECT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(done.wheel, "");
  EXPECT_THAT(bed.log(job.id),
              HasSubstr("could not record the wheel's name in the job store: PostgreSQL at"));
}

}  // namespace
}  // namespace wf::build::testing
