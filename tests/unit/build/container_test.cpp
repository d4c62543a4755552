// The container executor without an engine: the run command line it builds (mounts, limits,
// environment, GPUs, user), its remove and list command lines, and the executor driving a
// stand-in engine program (a shell script that records its arguments and plays a container)
// through start, exit status, cancel and timeout, plus release and check over a fake client.

#include "build/container.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "test_files.hpp"

namespace wf::build {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Where = CommandPlacement::Where;

using testing_files::read_file;

ProcessSpec command(const fs::path& work_dir, Where where) {
  ProcessSpec s;
  s.argv = {"/data/envs/e/bin/python", "-m", "pip", "wheel", "-w", (work_dir / "out").string()};
  s.env = {{"PATH", "/data/envs/e/bin:/usr/local/cuda/bin:/usr/bin:/bin"},
           {"HOME", work_dir.string()},
           {"MAX_JOBS", "4"}};
  s.cwd = work_dir / "src";
  s.log_file = work_dir / "log.txt";
  s.placement.where = where;
  s.placement.job_id = 7;
  s.placement.job_tag = "/data/builds#7";
  s.placement.work_dir = work_dir;
  s.placement.log = work_dir / "log.txt";
  s.placement.envs_dir = "/data/builds/envs";
  s.placement.python = "3.12";
  s.placement.cuda = "12.8";
  s.placement.memory_bytes = (3ULL << 30U) + 1;
  s.placement.cpus = 4;
  return s;
}

ContainerConfig podman() {
  ContainerConfig c;
  c.engine = ContainerConfig::Engine::podman;
  c.engine_args = {"--runtime", "runc"};
  c.run_args = {"--ulimit", "nofile=20000:20000"};
  c.images = {{"12.8", "builder:12.8"}};
  c.mounts = {"/usr/local/cuda-12.8", "/opt/cuda-13.0:/usr/local/cuda"};
  return c;
}

TEST(ContainerArgv, EveryCommandSeesOnlyItsJobAndTheMountsWithinItsGrant) {
  const fs::path work = "/data/builds/job-7";
  ContainerRun run;
  run.name = "wf-abc-7-build-1";
  run.image = "builder:12.8";
  run.memory = memory_arg((3ULL << 30U) + 1);
  run.cpus = "4";
  run.user = "998:997";
  const std::string label = job_label(command(work, Where::build).placement);
  EXPECT_THAT(container_run_argv(podman(), command(work, Where::build), run),
              ElementsAre("podman", "--runtime", "runc", "run", "--rm", "--init", "--name",
                          "wf-abc-7-build-1", "--label", label, "--user", "998:997", "--network",
                          "host", "--volume", "/data/builds/job-7:/data/builds/job-7:rw",
                          "--volume", "/data/builds/envs:/data/builds/envs:rw", "--volume",
                          "/usr/local/cuda-12.8:/usr/local/cuda-12.8:ro", "--volume",
                          "/opt/cuda-13.0:/usr/local/cuda:ro", "--memory", "3073m", "--memory-swap",
                          "3073m", "--cpus", "4", "--workdir", "/data/builds/job-7/src", "--env",
                          "PATH=/data/envs/e/bin:/usr/local/cuda/bin:/usr/bin:/bin", "--env",
                          "HOME=/data/builds/job-7", "--env", "MAX_JOBS=4", "--ulimit",
                          "nofile=20000:20000", "builder:12.8", "/data/envs/e/bin/python", "-m",
                          "pip", "wheel", "-w", "/data/builds/job-7/out"));
}

TEST(ContainerArgv, TheBuildGetsTheCompileCacheMountedReadWrite) {
  const fs::path work = "/data/builds/job-7";
  ContainerRun run;
  run.name = "n";
  run.image = "i";
  ProcessSpec spec = command(work, Where::build);
  EXPECT_THAT(container_run_argv(podman(), spec, run), Not(Contains(HasSubstr("ccache"))));
  spec.placement.compile_cache = "/shared/ccache/demo";
  const auto argv = container_run_argv(podman(), spec, run);
  const auto at = std::find(argv.begin(), argv.end(), "/shared/ccache/demo:/shared/ccache/demo:rw");
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at - 1), "--volume");
}

TEST(ContainerArgv, TheSmokeTestGetsTheGpusAsConfigured) {
  const fs::path work = "/data/builds/job-7";
  ContainerRun run;
  run.name = "n";
  run.image = "i";
  ContainerConfig c = podman();
  const auto cdi = container_run_argv(c, command(work, Where::test), run);
  EXPECT_THAT(cdi, Contains("nvidia.com/gpu=all"));
  EXPECT_THAT(container_run_argv(c, command(work, Where::build), run),
              Not(Contains("nvidia.com/gpu=all")));
  c.gpus = ContainerConfig::Gpus::all;
  const auto all = container_run_argv(c, command(work, Where::test), run);
  const auto at = std::find(all.begin(), all.end(), "--gpus");
  ASSERT_NE(at, all.end());
  EXPECT_EQ(*(at + 1), "all");
  c.gpus = ContainerConfig::Gpus::none;
  const auto none = container_run_argv(c, command(work, Where::test), run);
  EXPECT_THAT(none, Not(Contains("--gpus")));
  EXPECT_THAT(none, Not(Contains("--device")));
  // No limits, no user: none given. Variables passed by name, others left out.
  EXPECT_THAT(none, Not(Contains("--memory")));
  EXPECT_THAT(none, Not(Contains("--user")));
  run.env_by_name = {"CUDA_VISIBLE_DEVICES"};
  run.env_omitted = {"MAX_JOBS"};
  const auto named = container_run_argv(c, command(work, Where::test), run);
  EXPECT_THAT(named, Contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_THAT(named, Not(Contains("MAX_JOBS=4")));
}

TEST(ContainerArgv, RemoveListAndTheEnginesOwnSpellings) {
  ContainerConfig p = podman();
  EXPECT_THAT(container_remove_argv(p, "n"),
              ElementsAre("podman", "--runtime", "runc", "rm", "--force", "--time", "0", "n"));
  EXPECT_THAT(container_list_argv(p, "org.wheelforge.job=x"),
              ElementsAre("podman", "--runtime", "runc", "ps", "--all", "--quiet", "--filter",
                          "label=org.wheelforge.job=x"));
  ContainerConfig d;
  d.engine = ContainerConfig::Engine::docker;
  EXPECT_THAT(container_remove_argv(d, "n"), ElementsAre("docker", "rm", "--force", "n"));
  d.program = "/opt/bin/docker";
  EXPECT_EQ(engine_program(d), "/opt/bin/docker");
  EXPECT_EQ(memory_arg(0), "");
  EXPECT_EQ(memory_arg(1), "1m");
  EXPECT_EQ(memory_arg(1ULL << 20U), "1m");
  EXPECT_EQ(memory_arg((1ULL << 30U) * 5 / 2), "2560m");
}

TEST(ContainerArgv, NamesAndLabelsFollowTheJob) {
  CommandPlacement a;
  a.job_id = 7;
  a.job_tag = "/data/builds#7";
  CommandPlacement b = a;
  b.job_tag = "/other/builds#7";
  EXPECT_NE(job_label(a), job_label(b));
  EXPECT_EQ(job_label(a), job_label(a));
  EXPECT_THAT(container_name(a, "build-1"), ::testing::MatchesRegex("wf-[0-9a-f]{12}-7-build-1"));
}

TEST(ContainerArgv, TheImageDigestIsTheRepositoryDigestElseTheId) {
  const std::string id(64, 'a');
  const std::string repo(64, 'b');
  EXPECT_EQ(
      parse_image_digest("sha256:" + id + " docker.io/pytorch/builder@sha256:" + repo + " \n"),
      "sha256:" + repo);
  EXPECT_EQ(parse_image_digest("sha256:" + id + " \n"), "sha256:" + id);
  EXPECT_EQ(parse_image_digest(id + "\n"), "sha256:" + id);  // podman leaves the prefix out
  EXPECT_EQ(parse_image_digest(""), "");
}

TEST(ContainerArgv, TheLoggedCommandMasksVariablesThatLookLikeSecrets) {
  const std::vector<std::string> argv = {
      "podman",       "run",   "--env",      "HF_TOKEN=hf_abc", "--env",
      "my_api_key=k", "--env", "MAX_JOBS=4", "--env",           "DB_PASSWORD=p=q",
      "img",          "sh",    "-c",         "echo TOKEN=x"};
  EXPECT_THAT(
      argv_for_log(argv),
      ElementsAre("podman", "run", "--env", "HF_TOKEN=***", "--env", "my_api_key=***", "--env",
                  "MAX_JOBS=4", "--env", "DB_PASSWORD=***", "img", "sh", "-c", "echo TOKEN=x"));
}

TEST(ContainerArgv, TheEnginesClientGetsItsSettingsAndNothingElse) {
  ::setenv("CONTAINERS_CONF", "/etc/wf/containers.conf", 1);
  ::setenv("DOCKER_HOST", "unix:///run/wf/docker.sock", 1);
  ::setenv("WF_UNRELATED_SECRET", "x", 1);
  const auto env = engine_environment();
  ::unsetenv("WF_UNRELATED_SECRET");
  EXPECT_THAT(env, Contains(std::pair<std::string, std::string>("CONTAINERS_CONF",
                                                                "/etc/wf/containers.conf")));
  EXPECT_THAT(env, Contains(std::pair<std::string, std::string>("DOCKER_HOST",
                                                                "unix:///run/wf/docker.sock")));
  for (const auto& [k, v] : env) EXPECT_NE(k, "WF_UNRELATED_SECRET");
  ::unsetenv("CONTAINERS_CONF");
  ::unsetenv("DOCKER_HOST");
}

// The executor with a stand-in engine: `run` records its arguments and plays a container
// that prints a line and exits with $WF_EXIT (or sleeps while $WF_SLEEP), `rm` records its
// arguments and ends the sleeping "container".
class ContainerExecutorTest : public ::testing::Test {
 protected:
  ContainerExecutorTest()
      : dir_(fs::path(::testing::TempDir()) /
             ("wf-container-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        work_(dir_ / "job-7") {
    fs::remove_all(dir_);
    fs::create_directories(work_ / "src");
    const fs::path engine = dir_ / "engine";
    std::ofstream(engine)
        << "#!/bin/bash\n"
           "d="
        << dir_.string()
        << "\n"
           // `image inspect` (the image's digest, asked before the run) answers at once:
           // it is no container, and must not stand in for the run's pid file.
           "if [ \"$1\" = image ]; then echo sha256:"
        << std::string(64, 'a')
        << "; exit 0; fi\n"
           "if [ \"$1\" = rm ]; then\n"
           "  printf '%s\\n' \"$@\" > \"$d/rm-args.txt\"\n"
           "  kill \"$(cat \"$d/run.pid\")\" 2>/dev/null\n"
           "  exit 0\n"
           "fi\n"
           "printf '%s\\n' \"$@\" > \"$d/run-args.txt\"\n"
           // Renamed into place: `rm` never reads a pid file half written.
           "echo $$ > \"$d/run.pid.tmp\" && mv \"$d/run.pid.tmp\" \"$d/run.pid\"\n"
           "echo \"a line from the container\"\n"
           "if [ -e \"$d/sleep\" ]; then sleep 60 & wait; exit 137; fi\n"
           "exit \"$(cat \"$d/exit\" 2>/dev/null || echo 0)\"\n";
    fs::permissions(engine, fs::perms::owner_all);
    config_ = podman();
    config_.program = engine.string();
    config_.engine_args.clear();
    config_.run_args.clear();
    config_.mounts.clear();
    executor_ = make_container_executor(config_);
  }
  ~ContainerExecutorTest() override { fs::remove_all(dir_); }

  ProcessSpec spec(Where where) { return command(work_, where); }
  static std::optional<ExitStatus> finish(Execution& e) {
    for (int i = 0; i < 1000; ++i) {
      if (auto s = e.poll()) return s;
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }
  bool wait_file(const fs::path& p) const {
    for (int i = 0; i < 1000 && !fs::exists(p); ++i) std::this_thread::sleep_for(10ms);
    return fs::exists(p);
  }
  std::vector<std::string> args(const std::string& file) const {
    std::vector<std::string> out;
    std::istringstream in(read_file(dir_ / file));
    for (std::string a; std::getline(in, a);) out.push_back(a);
    return out;
  }

  fs::path dir_;
  fs::path work_;
  ContainerConfig config_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ContainerExecutorTest, ACommandRunsInTheCellsImageAndEndsWithItsStatus) {
  std::ofstream(dir_ / "exit") << "7";
  auto e = executor_->start(spec(Where::build));
  ASSERT_TRUE(e) << e.error().message;
  const auto done = finish(**e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->exited);
  EXPECT_EQ(done->code, 7);
  const auto run = args("run-args.txt");
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(run[0], "run");
  EXPECT_THAT(run, Contains("builder:12.8"));
  EXPECT_THAT(run, Contains("3073m"));
  EXPECT_THAT(run, Contains(std::to_string(::getuid()) + ":" + std::to_string(::getgid())));
  EXPECT_THAT(read_file(work_ / "log.txt"), HasSubstr("a line from the container\n"));
}

TEST_F(ContainerExecutorTest, CancelRemovesTheContainerByName) {
  std::ofstream(dir_ / "sleep") << "";
  auto e = executor_->start(spec(Where::build));
  ASSERT_TRUE(e) << e.error().message;
  ASSERT_TRUE(wait_file(dir_ / "run.pid"));
  EXPECT_FALSE((*e)->poll());
  (*e)->cancel();
  const auto done = finish(**e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->cancelled);
  const auto run = args("run-args.txt");
  const auto name = std::find(run.begin(), run.end(), "--name");
  ASSERT_NE(name, run.end());
  EXPECT_THAT(args("rm-args.txt"), ElementsAre("rm", "--force", "--time", "0", *(name + 1)));
}

TEST_F(ContainerExecutorTest, ATimeoutRemovesTheContainerToo) {
  std::ofstream(dir_ / "sleep") << "";
  ProcessSpec s = spec(Where::build);
  s.timeout = 200ms;
  auto e = executor_->start(s);
  ASSERT_TRUE(e) << e.error().message;
  const auto done = finish(**e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->timed_out);
  EXPECT_TRUE(fs::exists(dir_ / "rm-args.txt"));
}

TEST_F(ContainerExecutorTest, ServerCommandsRunOnTheHostAndUnknownCellsAreRefused) {
  ProcessSpec local = spec(Where::server);
  local.argv = {"/bin/sh", "-c", "echo on the host"};
  local.cwd = work_;
  auto e = executor_->start(local);
  ASSERT_TRUE(e) << e.error().message;
  ASSERT_TRUE(finish(**e));
  EXPECT_FALSE(fs::exists(dir_ / "run-args.txt"));
  EXPECT_THAT(read_file(work_ / "log.txt"), HasSubstr("on the host\n"));

  ProcessSpec other = spec(Where::build);
  other.placement.cuda = "13.0";
  auto refused = executor_->start(other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid);
  EXPECT_THAT(refused.error().message, HasSubstr("no container image for CUDA 13.0"));
}

TEST(ContainerExecutorClient, ReleaseRemovesWhatADeadServerLeftAndCheckNamesMissingImages) {
  std::vector<std::vector<std::string>> calls;
  ContainerConfig c = podman();
  c.images["13.0"] = "missing:13.0";
  auto executor = make_container_executor(
      c, [&calls](const std::vector<std::string>& argv) -> Result<ClientOutput> {
        calls.push_back(argv);
        ClientOutput out;
        out.status.exited = true;
        if (argv[3] == "ps") out.output = "abc\ndef\n";
        if (argv.back() == "missing:13.0") {
          out.status.code = 125;
          out.output = "Error: missing:13.0: image not known\n";
        }
        return out;
      });
  const fs::path log =
      fs::path(::testing::TempDir()) / ("wf-container-log-" + std::to_string(::getpid()));
  CommandPlacement job;
  job.job_id = 7;
  job.job_tag = "/data/builds#7";
  job.log = log;
  executor->release(job, Executor::Release::finished);
  EXPECT_TRUE(calls.empty()) << "a finished job's containers are gone already";
  executor->release(job, Executor::Release::abandoned);
  ASSERT_EQ(calls.size(), 3U);
  EXPECT_EQ(calls[0], container_list_argv(c, job_label(job)));
  EXPECT_EQ(calls[1], container_remove_argv(c, "abc"));
  EXPECT_EQ(calls[2], container_remove_argv(c, "def"));
  EXPECT_THAT(read_file(log), HasSubstr("removed 2 container(s) left from the previous attempt"));
  fs::remove(log);

  std::vector<std::string> notes;
  const auto problems = executor->check("/data/builds", ResourceRequest{}, 10s, notes);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_THAT(problems[0],
              HasSubstr("build.images.13.0: image 'missing:13.0' is not on this host"));
  EXPECT_THAT(notes, Contains("image builder:12.8 is there"));
}

}  // namespace
}  // namespace wf::build
