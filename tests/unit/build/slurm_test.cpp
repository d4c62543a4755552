// The Slurm executor without a cluster: its parsers of sbatch, scontrol and sacct output, the
// mapping of a batch job's end to a command's, the sbatch command lines, the scripts it writes
// (run for real with bash: the agent, a command, the parallelism formula against
// core::compute_parallelism), and the executor itself over a fake client that records every
// sbatch/scontrol/scancel command line and answers from a script, with the test playing the
// agent's part on the files.

#include "build/slurm.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "build/remote.hpp"
#include "test_files.hpp"
#include "wheelforge/core/build.hpp"

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

void write(const fs::path& p, std::string_view text) {
  std::ofstream(p, std::ios::binary) << text;
}

// ---------------------------------------------------------------------------------------------
// Parsers and the state mapping

TEST(SlurmParse, SbatchPrintsTheJobIdAndMaybeTheCluster) {
  EXPECT_EQ(parse_sbatch_id("1234\n"), "1234");
  EXPECT_EQ(parse_sbatch_id("77;wftest\n"), "77");
  EXPECT_EQ(parse_sbatch_id(""), std::nullopt);
  EXPECT_EQ(parse_sbatch_id("sbatch: error: Batch job submission failed: Invalid account\n"),
            std::nullopt);
}

TEST(SlurmParse, ScontrolLineAsTheClusterPrintsIt) {
  // As scontrol show job -o printed it on the test cluster (shortened), with a Command that
  // has spaces in it.
  const std::string line =
      "JobId=9 JobName=wheelforge-job3-build UserId=root(0) GroupId=root(0) Priority=4294901752 "
      "JobState=OUT_OF_MEMORY Reason=OutOfMemory Dependency=(null) Requeue=1 Restarts=0 "
      "BatchFlag=1 ExitCode=0:125 RunTime=00:00:02 TimeLimit=00:05:00 "
      "Partition=wftest NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=2 "
      "TRES=cpu=2,mem=512M,node=1,billing=2 Command=/data/builds/job 3/slurm/1-build/agent.sh "
      "WorkDir=/data/builds/job-3/slurm/1-build StdOut=/data/out\n";
  const SlurmJob job = parse_scontrol_job(line);
  EXPECT_TRUE(job.known);
  EXPECT_EQ(job.id, "9");
  EXPECT_EQ(job.state, "OUT_OF_MEMORY");
  EXPECT_EQ(job.reason, "OutOfMemory");
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_EQ(job.signal, 125);
  EXPECT_EQ(job.node, "vm");

  const SlurmJob pending = parse_scontrol_job(
      "JobId=10 JobName=x JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)\n");
  EXPECT_EQ(pending.state, "PENDING");
  EXPECT_EQ(pending.reason, "Resources");
  EXPECT_EQ(pending.node, "");
  EXPECT_FALSE(parse_scontrol_job("slurm_load_jobs error: Invalid job id specified\n").known);
  EXPECT_FALSE(parse_scontrol_job("").known);
}

TEST(SlurmParse, SacctStateAndExitCode) {
  const SlurmJob job = parse_sacct_job("CANCELLED by 0|0:15\n");
  EXPECT_TRUE(job.known);
  EXPECT_EQ(job.state, "CANCELLED");
  EXPECT_EQ(job.signal, 15);
  const SlurmJob failed = parse_sacct_job("FAILED|3:0\n");
  EXPECT_EQ(failed.state, "FAILED");
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_FALSE(parse_sacct_job("").known);
  EXPECT_FALSE(parse_sacct_job("Slurm accounting storage is disabled\n").known);
}

TEST(SlurmParse, ActiveStates) {
  for (const char* s : {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
                        "RESIZING", "SIGNALING", "STAGE_OUT"}) {
    EXPECT_TRUE(is_active_state(s)) << s;
  }
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                        "BOOT_FAIL", "PREEMPTED", "DEADLINE", ""}) {
    EXPECT_FALSE(is_active_state(s)) << s;
  }
}

SlurmJob ended(const std::string& state, int code = 0, int signal = 0) {
  SlurmJob j;
  j.id = "12";
  j.known = true;
  j.state = state;
  j.exit_code = code;
  j.signal = signal;
  j.node = "gpu7";
  return j;
}

TEST(SlurmState, HowABatchJobsEndBecomesTheCommands) {
  const auto limit = std::chrono::milliseconds(std::chrono::minutes(5));
  const ExitStatus cancelled = ended_status(ended("CANCELLED", 0, 15), true, true, limit);
  EXPECT_TRUE(cancelled.cancelled);
  const ExitStatus foreign = ended_status(ended("CANCELLED", 0, 15), false, true, limit);
  EXPECT_FALSE(foreign.cancelled);
  EXPECT_FALSE(foreign.success());
  EXPECT_THAT(foreign.describe(), HasSubstr("was cancelled in Slurm, not by wheelforge"));
  const ExitStatus timeout = ended_status(ended("TIMEOUT"), false, true, limit);
  EXPECT_TRUE(timeout.timed_out);
  EXPECT_EQ(timeout.describe(),
            "timed out after 300s (Slurm job 12: TIMEOUT, its --time ran "
            "out on gpu7)");
  // Out of memory reads as the OOM killer's SIGKILL: the OOM retry.
  const ExitStatus oom = ended_status(ended("OUT_OF_MEMORY", 0, 125), false, true, limit);
  EXPECT_FALSE(oom.exited);
  EXPECT_EQ(oom.signal, SIGKILL);
  EXPECT_TRUE(core::looks_like_oom(0, true, oom.signal, ""));
  EXPECT_EQ(oom.describe(), "killed by SIGKILL (Slurm job 12: OUT_OF_MEMORY on gpu7)");
  const ExitStatus failed = ended_status(ended("FAILED", 70), false, false, limit);
  EXPECT_TRUE(failed.exited);
  EXPECT_EQ(failed.code, 70);
  EXPECT_THAT(failed.describe(), HasSubstr("before it started its commands (is DATA_DIR/builds "
                                           "on a filesystem this node shares with the server?"));
  const ExitStatus unreported = ended_status(ended("FAILED"), false, true, limit);
  EXPECT_FALSE(unreported.success());
  EXPECT_FALSE(ended_status(ended("COMPLETED"), false, true, limit).success());
  const ExitStatus killed = ended_status(ended("FAILED", 0, 9), false, true, limit);
  EXPECT_EQ(killed.signal, 9);
  const ExitStatus node = ended_status(ended("NODE_FAIL"), false, true, limit);
  EXPECT_FALSE(node.success());
  EXPECT_THAT(node.describe(), HasSubstr("Slurm job 12: NODE_FAIL on gpu7"));
  SlurmJob lost;
  lost.id = "12";
  const ExitStatus gone = ended_status(lost, false, true, limit);
  EXPECT_FALSE(gone.success());
  EXPECT_THAT(gone.describe(), HasSubstr("no longer known to the cluster"));
}

TEST(SlurmState, TimeLimitsAreWholeMinutesRoundedUp) {
  EXPECT_EQ(time_limit(0ms).count(), 0);
  EXPECT_EQ(time_limit(1ms).count(), 1);
  EXPECT_EQ(time_limit(60s).count(), 1);
  EXPECT_EQ(time_limit(61s).count(), 2);
  EXPECT_EQ(time_limit(std::chrono::hours(3)).count(), 180);
}

// ---------------------------------------------------------------------------------------------
// Command lines and scripts

ProcessSpec spec_of(const fs::path& work_dir, Where where) {
  ProcessSpec s;
  s.argv = {"/bin/sh", "-c", "echo hello"};
  s.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", work_dir.string()}};
  s.cwd = work_dir;
  s.log_file = work_dir / "log.txt";
  s.timeout = 90s;
  s.placement.where = where;
  s.placement.job_id = 7;
  s.placement.job_tag = "/data/builds#7";
  s.placement.work_dir = work_dir;
  s.placement.log = work_dir / "log.txt";
  s.placement.envs_dir = work_dir.parent_path() / "envs";
  s.placement.python = "3.12";
  s.placement.cuda = "12.8";
  s.placement.cpus = 4;
  s.placement.memory_bytes = 8ULL << 30U;
  return s;
}

SlurmConfig cluster_config() {
  SlurmConfig c;
  c.partition = "build";
  c.account = "ml";
  c.smoke_partition = "gpu";
  c.gres = "gpu:1";
  c.sbatch_args = {"--qos=normal"};
  return c;
}

TEST(SlurmScripts, SbatchAsksForTheRecipesResourcesOrAGpu) {
  const fs::path dir = "/data/builds/job-7/slurm/1-build";
  EXPECT_THAT(sbatch_argv(cluster_config(), spec_of("/data/builds/job-7", Where::build), dir, {}),
              ElementsAre("sbatch", "--parsable", "--job-name=wheelforge-job7-build",
                          "--chdir=" + dir.string(), "--output=" + dir.string() + "/agent.out",
                          "--nodes=1", "--ntasks=1", "--export=NONE", "--cpus-per-task=4",
                          "--mem=8192M", "--partition=build", "--time=2", "--account=ml",
                          "--qos=normal", dir.string() + "/agent.sh"));
  const fs::path test_dir = "/data/builds/job-7/slurm/2-test";
  EXPECT_THAT(
      sbatch_argv(cluster_config(), spec_of("/data/builds/job-7", Where::test), test_dir,
                  {"CONTAINERS_CONF", "DOCKER_HOST"}),
      ElementsAre("sbatch", "--parsable", "--job-name=wheelforge-job7-test",
                  "--chdir=" + test_dir.string(), "--output=" + test_dir.string() + "/agent.out",
                  "--nodes=1", "--ntasks=1", "--export=CONTAINERS_CONF,DOCKER_HOST",
                  "--cpus-per-task=1", "--partition=gpu", "--gres=gpu:1", "--time=2",
                  "--account=ml", "--qos=normal", test_dir.string() + "/agent.sh"));
  // Without a smoke partition the build's partition; without a timeout no --time.
  SlurmConfig plain;
  plain.partition = "all";
  ProcessSpec untimed = spec_of("/w", Where::test);
  untimed.timeout = 0ms;
  const auto argv = sbatch_argv(plain, untimed, "/w/slurm/1-test", {});
  EXPECT_THAT(argv, Contains("--partition=all"));
  EXPECT_THAT(argv, Not(Contains(::testing::StartsWith("--time"))));
  EXPECT_THAT(argv, Not(Contains(::testing::StartsWith("--gres"))));
}

class ScriptTest : public ::testing::Test {
 protected:
  ScriptTest()
      : dir_(fs::path(::testing::TempDir()) /
             ("wf-slurm-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~ScriptTest() override { fs::remove_all(dir_); }

  // Runs bash `script` with `env` to its end; its output (stdout and stderr).
  std::string bash(const fs::path& script,
                   const std::vector<std::pair<std::string, std::string>>& env) {
    auto out = run_client({"/bin/bash", script.string()}, env, 60s);
    EXPECT_TRUE(out) << out.error().message;
    return out ? out->output : std::string();
  }

  fs::path dir_;
};

TEST_F(ScriptTest, TheParallelismFormulaIsComputeParallelisms) {
  // Every combination here, as core::compute_parallelism and core::halve compute it.
  std::vector<std::string> cases;
  std::vector<std::string> expected;
  for (const unsigned cpus : {1U, 3U, 8U}) {
    for (const std::uint64_t mem_mb : {0ULL, 100ULL, 1024ULL, 5000ULL, 1'000'000ULL}) {
      for (const double gb : {0.25, 1.5, 5.0}) {
        for (const unsigned archs : {0U, 1U, 3U, 7U}) {
          for (const unsigned halvings : {0U, 3U}) {
            core::Resources res;
            res.available_memory_bytes = mem_mb << 20U;
            res.cores = cpus;
            core::Parallelism p = core::compute_parallelism(res, gb, archs, mem_mb << 20U);
            for (unsigned i = 0; i < halvings; ++i) p = core::halve(p);
            char line[256];
            std::snprintf(line, sizeof line,
                          "awk -v cpus=%u -v mem_mb=%llu -v gb=%.17g -v archs=%u -v halvings=%u "
                          "\"$program\"",
                          cpus, static_cast<unsigned long long>(mem_mb), gb, archs, halvings);
            cases.emplace_back(line);
            expected.push_back(std::to_string(p.max_jobs) + " " + std::to_string(p.nvcc_threads));
          }
        }
      }
    }
  }
  std::string script = "program=$(cat " + (dir_ / "formula.awk").string() + ")\n";
  for (const auto& c : cases) script += c + "\n";
  write(dir_ / "formula.awk", parallelism_awk());
  write(dir_ / "grid.sh", script);
  const std::string out = bash(dir_ / "grid.sh", {{"PATH", "/usr/bin:/bin"}});
  std::istringstream lines(out);
  std::string line;
  std::size_t i = 0;
  for (; std::getline(lines, line) && i < expected.size(); ++i) {
    EXPECT_EQ(line, expected[i]) << cases[i];
  }
  EXPECT_EQ(i, expected.size()) << out.substr(0, 2000);
}

TEST_F(ScriptTest, ACommandRunsWithExactlyItsEnvironmentAndTheJobsGrant) {
  const fs::path work = dir_ / "job-7";
  fs::create_directories(work / "src");
  ProcessSpec spec = spec_of(work, Where::build);
  spec.cwd = work / "src";
  spec.argv = {"/bin/sh", "-c", "pwd; env | sort", "arg with 'quotes' and $dollars"};
  spec.env = {{"PATH", "/usr/bin:/bin"},
              {"ODD", "it's \"quoted\" $HOME `x`"},
              {"MAX_JOBS", "9"},
              {"NVCC_THREADS", "9"}};
  spec.placement.sizing = BuildSizing{0.5, 3, 1};
  write(work / "cmd-1.sh", command_script(spec, nullptr, "unused"));
  const std::string printed = bash(work / "cmd-1.sh", {{"PATH", "/usr/bin:/bin"},
                                                       {"SLURM_CPUS_PER_TASK", "4"},
                                                       {"SLURM_MEM_PER_NODE", "3072"},
                                                       {"SLURM_JOB_ID", "31"},
                                                       {"LEAKED", "from the job"}});
  EXPECT_EQ(printed, "") << "the output goes to the command's log";
  core::Resources res;
  res.available_memory_bytes = 3072ULL << 20U;
  res.cores = 4;
  const core::Parallelism p = core::halve(core::compute_parallelism(res, 0.5, 3, 3072ULL << 20U));
  const std::string log = read_file(work / "log.txt");
  EXPECT_THAT(log, HasSubstr("==> [building] batch job 31 on "));
  EXPECT_THAT(
      log, HasSubstr(" was granted 4 CPU(s) and 3072 MiB: MAX_JOBS=" + std::to_string(p.max_jobs) +
                     " NVCC_THREADS=" + std::to_string(p.nvcc_threads) + "\n"));
  EXPECT_THAT(log, HasSubstr((work / "src").string() + "\n"));
  EXPECT_THAT(log, HasSubstr("ODD=it's \"quoted\" $HOME `x`\n"));
  EXPECT_THAT(log, HasSubstr("MAX_JOBS=" + std::to_string(p.max_jobs) + "\n"));
  EXPECT_THAT(log, HasSubstr("NVCC_THREADS=" + std::to_string(p.nvcc_threads) + "\n"));
  EXPECT_THAT(log, Not(HasSubstr("LEAKED")));
  EXPECT_THAT(log, Not(HasSubstr("SLURM_")));
}

TEST_F(ScriptTest, AContainerCommandGetsTheGrantAsLimitsAndIsRemovedOnTerm) {
  const fs::path work = dir_ / "job-7";
  fs::create_directories(work / "bin");
  // A stand-in engine: records its arguments and the variables the command passes by name.
  write(work / "bin" / "podman", "#!/bin/sh\nprintf '%s\\n' \"$@\" > " +
                                     (work / "args.txt").string() +
                                     "\necho \"MAX_JOBS=$MAX_JOBS NVCC_THREADS=$NVCC_THREADS\" > " +
                                     (work / "env.txt").string() + "\n");
  fs::permissions(work / "bin" / "podman", fs::perms::owner_all);
  ContainerConfig containers;
  containers.images = {{"12.8", "builder:12.8"}};
  ProcessSpec spec = spec_of(work, Where::build);
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"MAX_JOBS", "9"}, {"NVCC_THREADS", "9"}};
  spec.placement.sizing = BuildSizing{1.0, 1, 0};
  const std::string script = command_script(spec, &containers, "wf-x-7-s1-c1");
  EXPECT_THAT(script, HasSubstr("trap ''\\''podman'\\'' '\\''rm'\\'' '\\''--force'\\'' "
                                "'\\''--time'\\'' '\\''0'\\'' '\\''wf-x-7-s1-c1'\\'' >/dev/null "
                                "2>&1' TERM"));
  write(work / "cmd-1.sh", script);
  (void)bash(work / "cmd-1.sh", {{"PATH", (work / "bin").string() + ":/usr/bin:/bin"},
                                 {"SLURM_CPUS_PER_TASK", "2"},
                                 {"SLURM_MEM_PER_NODE", "2048"}});
  std::vector<std::string> args;
  std::istringstream in(read_file(work / "args.txt"));
  for (std::string a; std::getline(in, a);) args.push_back(a);
  ASSERT_GE(args.size(), 3U) << read_file(work / "log.txt");
  EXPECT_EQ(args[0], "run");
  // The limits of what Slurm granted, right after `run`.
  const std::string user = std::to_string(::getuid()) + ":" + std::to_string(::getgid());
  EXPECT_THAT(
      std::vector<std::string>(args.begin() + 1, args.begin() + 9),
      ElementsAre("--cpus", "2", "--memory", "2048m", "--memory-swap", "2048m", "--user", user));
  EXPECT_THAT(args, Contains("MAX_JOBS"));
  EXPECT_THAT(args, Not(Contains("MAX_JOBS=9")));
  EXPECT_THAT(args, Contains("builder:12.8"));
  EXPECT_EQ(args.back(), "echo hello");
  EXPECT_EQ(read_file(work / "env.txt"), "MAX_JOBS=2 NVCC_THREADS=1\n");
}

TEST_F(ScriptTest, TheAgentRunsCommandsInTurnStopsThemAndLeavesWhenTold) {
  const fs::path session = dir_ / "1-build";
  fs::create_directories(session);
  write(session / "agent.sh", agent_script(session, 60s, 1s));
  ProcessSpec agent;
  agent.argv = {"/bin/bash", (session / "agent.sh").string()};
  agent.env = {{"PATH", "/usr/bin:/bin"}, {"SLURM_JOB_ID", "5"}, {"SLURM_CPUS_PER_TASK", "2"}};
  agent.log_file = session / "agent.out";
  agent.timeout = 60s;
  auto process = Process::start(agent);
  ASSERT_TRUE(process) << process.error().message;
  const auto wait_file = [](const fs::path& p) {
    for (int i = 0; i < 1000 && !fs::exists(p); ++i) std::this_thread::sleep_for(20ms);
    return fs::exists(p);
  };
  ASSERT_TRUE(wait_file(session / "started"));
  EXPECT_THAT(read_file(session / "started"), ::testing::StartsWith("5 "));
  // The server writes its commands atomically, one after another.
  write(session / "cmd-1.tmp", "exit 3\n");
  fs::rename(session / "cmd-1.tmp", session / "cmd-1.sh");
  ASSERT_TRUE(wait_file(session / "cmd-1.exit"));
  EXPECT_EQ(read_file(session / "cmd-1.exit"), "3\n");
  EXPECT_TRUE(fs::exists(session / "cmd-1.started"));
  // A command the server stops (its timeout): TERM to its process group, then KILL.
  write(session / "cmd-2.tmp", "trap '' TERM\nsleep 60 &\nwait\nwait\n");
  fs::rename(session / "cmd-2.tmp", session / "cmd-2.sh");
  ASSERT_TRUE(wait_file(session / "cmd-2.started"));
  write(session / "cmd-2.stop", "timeout\n");
  ASSERT_TRUE(wait_file(session / "cmd-2.exit"));
  EXPECT_EQ(read_file(session / "cmd-2.exit"), "137\n");
  write(session / "end", "end\n");
  const ExitStatus status = process->wait();
  EXPECT_TRUE(status.success()) << status.describe() << read_file(session / "agent.out");
  EXPECT_EQ(read_file(session / "exited"), "end\n");
}

// ---------------------------------------------------------------------------------------------
// The executor over a fake client

// Answers the executor's clients as a cluster would: sbatch hands out job ids, scontrol tells
// each job's state as the test sets it, scancel cancels.
class FakeCluster {
 public:
  ClientRunner runner() {
    return [this](const std::vector<std::string>& argv) -> Result<ClientOutput> {
      std::lock_guard lock(mu_);
      calls.push_back(argv);
      ClientOutput out;
      out.status.exited = true;
      if (argv[0] == "sbatch") {
        const std::string id = std::to_string(next_id_++);
        states[id] = "RUNNING";
        out.output = id + "\n";
      } else if (argv[0] == "scontrol") {
        const auto it = states.find(argv.back());
        if (it == states.end()) {
          out.status.code = 1;
          out.output = "slurm_load_jobs error: Invalid job id specified\n";
        } else {
          const auto reason = reasons.find(argv.back());
          out.output = "JobId=" + argv.back() + " JobState=" + it->second + " Reason=" +
                       (reason != reasons.end()   ? reason->second
                        : it->second == "PENDING" ? "Priority"
                                                  : "None") +
                       " ExitCode=0:0 BatchHost=node1\n";
        }
      } else if (argv[0] == "scancel") {
        states[argv.back()] = "CANCELLED";
      } else if (argv[0] == "sacct") {
        out.status.code = 1;
        out.output = "Slurm accounting storage is disabled\n";
      } else if (argv[0] == "sinfo") {
        out.output = sinfo;
      }
      return out;
    };
  }

  std::vector<std::vector<std::string>> calls_of(const std::string& program) {
    std::lock_guard lock(mu_);
    std::vector<std::vector<std::string>> out;
    for (const auto& c : calls) {
      if (c[0] == program) out.push_back(c);
    }
    return out;
  }
  void set(const std::string& id, std::string state) {
    std::lock_guard lock(mu_);
    states[id] = std::move(state);
  }

  std::vector<std::vector<std::string>> calls;
  std::map<std::string, std::string> states;
  std::map<std::string, std::string> reasons;  ///< a pending job's Reason (default Priority)
  std::string sinfo = "node1|2|6000|build\nnode2|8|6000|build\nbig|64|512000|other\n";

 private:
  std::mutex mu_;
  int next_id_ = 100;
};

class SlurmExecutorTest : public ScriptTest {
 protected:
  SlurmExecutorTest() : work_(dir_ / "job-7") {
    fs::create_directories(work_);
    executor_ = make_slurm_executor(cluster_config(), nullptr, cluster.runner());
  }

  ProcessSpec command(Where where, std::string line = "echo hello") {
    ProcessSpec s = spec_of(work_, where);
    s.argv = {"/bin/sh", "-c", std::move(line)};
    return s;
  }
  std::unique_ptr<Execution> start(const ProcessSpec& spec) {
    auto e = executor_->start(spec);
    EXPECT_TRUE(e) << e.error().message;
    return e ? std::move(*e) : nullptr;
  }
  // Polls until the command ends (or ~10 s).
  static std::optional<ExitStatus> finish(Execution& e) {
    for (int i = 0; i < 1000; ++i) {
      if (auto s = e.poll()) return s;
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }
  fs::path session(const std::string& name) const { return work_ / "slurm" / name; }

  FakeCluster cluster;
  fs::path work_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(SlurmExecutorTest, ABuildsCommandsShareOneBatchJob) {
  EXPECT_EQ(executor_->admission(), Executor::Admission::cluster);
  EXPECT_TRUE(executor_->reattaches());
  auto first = start(command(Where::build));
  ASSERT_TRUE(first);
  ASSERT_EQ(cluster.calls_of("sbatch").size(), 1U);
  EXPECT_EQ(first->remote_id(), "100");
  const fs::path s1 = session("1-build");
  EXPECT_EQ(read_file(s1 / "job-id"), "100\n");
  EXPECT_THAT(read_file(s1 / "agent.sh"), HasSubstr("dir='" + s1.string() + "'"));
  EXPECT_THAT(read_file(s1 / "cmd-1.sh"), HasSubstr("'echo hello'"));
  EXPECT_THAT(read_file(work_ / "log.txt"),
              HasSubstr("==> [slurm] build commands run in batch job 100 (4 CPU(s), 8192 MiB, "
                        "--time=2 min; sbatch --parsable"));
  EXPECT_FALSE(first->poll());
  // The agent's part.
  write(s1 / "cmd-1.exit", "0\n");
  const auto done = finish(*first);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->success());

  auto second = start(command(Where::build, "echo again"));
  EXPECT_EQ(cluster.calls_of("sbatch").size(), 1U) << "a second batch job for the same build";
  EXPECT_THAT(read_file(s1 / "cmd-2.sh"), HasSubstr("'echo again'"));
  write(s1 / "cmd-2.exit", "5\n");
  const auto failed = finish(*second);
  ASSERT_TRUE(failed);
  EXPECT_TRUE(failed->exited);
  EXPECT_EQ(failed->code, 5);
  EXPECT_FALSE(fs::exists(s1 / "end")) << "a failed check does not end the batch job";
}

TEST_F(SlurmExecutorTest, TheSmokeTestRunsInABatchJobOfItsOwnAndEndsTheBuilds) {
  auto build = start(command(Where::build));
  write(session("1-build") / "cmd-1.exit", "0\n");
  ASSERT_TRUE(finish(*build));
  auto test = start(command(Where::test));
  ASSERT_TRUE(test);
  const auto sbatches = cluster.calls_of("sbatch");
  ASSERT_EQ(sbatches.size(), 2U);
  EXPECT_THAT(sbatches[1], Contains("--gres=gpu:1"));
  EXPECT_THAT(sbatches[1], Contains("--partition=gpu"));
  EXPECT_THAT(sbatches[1], Contains("--job-name=wheelforge-job7-test"));
  EXPECT_TRUE(fs::exists(session("1-build") / "end"));
  EXPECT_TRUE(fs::exists(session("2-test") / "cmd-1.sh"));
  EXPECT_EQ(test->remote_id(), "101");
}

TEST_F(SlurmExecutorTest, CommandsOfTheServerRunHere) {
  ProcessSpec spec = command(Where::server, "echo on the server");
  auto local = start(spec);
  ASSERT_TRUE(local);
  const auto done = finish(*local);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->success());
  EXPECT_TRUE(cluster.calls.empty());
  EXPECT_THAT(read_file(work_ / "log.txt"), HasSubstr("on the server\n"));
}

TEST_F(SlurmExecutorTest, CancelIsScancelAndTheBatchJobsEndTellsHow) {
  auto e = start(command(Where::build));
  e->cancel();
  EXPECT_THAT(cluster.calls_of("scancel"), ElementsAre(ElementsAre("scancel", "100")));
  const auto done = finish(*e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->cancelled);
  EXPECT_TRUE(fs::exists(session("1-build") / "final"));
}

TEST_F(SlurmExecutorTest, ABatchJobEndedBySlurmEndsItsCommand) {
  auto oom = start(command(Where::build));
  write(session("1-build") / "started", "100 node1 4 8192 0\n");
  cluster.set("100", "OUT_OF_MEMORY");
  const auto killed = finish(*oom);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->signal, SIGKILL);
  EXPECT_THAT(read_file(work_ / "log.txt"), HasSubstr("==> [slurm] killed by SIGKILL (Slurm job "
                                                      "100: OUT_OF_MEMORY on node1)"));
  // The next command needs a new batch job.
  auto next = start(command(Where::build));
  EXPECT_EQ(cluster.calls_of("sbatch").size(), 2U);
  EXPECT_EQ(next->remote_id(), "101");
  cluster.set("101", "TIMEOUT");
  const auto timed_out = finish(*next);
  ASSERT_TRUE(timed_out);
  EXPECT_TRUE(timed_out->timed_out);
}

TEST_F(SlurmExecutorTest, ABatchJobThatNeverStartedItsAgentPointsAtTheSharedDirectory) {
  auto e = start(command(Where::build));
  cluster.set("100", "FAILED");
  const auto failed = finish(*e);
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->success());
  EXPECT_THAT(failed->describe(),
              HasSubstr("before it started its commands (is DATA_DIR/builds on a filesystem"));
}

TEST_F(SlurmExecutorTest, AFailedBuildEndsItsBatchJobSoThatARetryGetsANewOne) {
  ProcessSpec build = command(Where::build, "make");
  build.placement.sizing = BuildSizing{1.0, 1, 0};
  auto first = start(build);
  write(session("1-build") / "cmd-1.exit", "137\n");
  const auto oom = finish(*first);
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->code, 137);
  EXPECT_TRUE(fs::exists(session("1-build") / "end"));
  build.placement.sizing->halvings = 1;
  auto retry = start(build);
  EXPECT_EQ(cluster.calls_of("sbatch").size(), 2U);
  EXPECT_TRUE(fs::exists(session("2-build") / "cmd-1.sh"));
  EXPECT_THAT(read_file(session("2-build") / "cmd-1.sh"), HasSubstr("-v halvings=1"));
}

TEST_F(SlurmExecutorTest, TheCommandsTimeoutRunsFromItsStartOnTheNode) {
  ProcessSpec spec = command(Where::build);
  spec.timeout = 1s;
  auto e = start(spec);
  EXPECT_FALSE(e->poll());
  EXPECT_FALSE(fs::exists(session("1-build") / "cmd-1.stop")) << "not started yet";
  const auto started = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() -
                       5;
  write(session("1-build") / "cmd-1.started", std::to_string(started) + "\n");
  EXPECT_FALSE(e->poll());
  EXPECT_TRUE(fs::exists(session("1-build") / "cmd-1.stop"));
  write(session("1-build") / "cmd-1.exit", "143\n");
  const auto done = finish(*e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->timed_out);
}

TEST_F(SlurmExecutorTest, ACommandTheIdleAgentMissedGoesToANewBatchJob) {
  auto e = start(command(Where::build));
  write(session("1-build") / "started", "100 node1 4 8192 0\n");
  write(session("1-build") / "exited", "idle\n");
  cluster.set("100", "COMPLETED");
  EXPECT_FALSE(e->poll());
  EXPECT_EQ(cluster.calls_of("sbatch").size(), 2U);
  EXPECT_EQ(e->remote_id(), "101");
  write(session("2-build") / "cmd-1.exit", "0\n");
  const auto done = finish(*e);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->success());
}

TEST_F(SlurmExecutorTest, ARestartedServerReattachesToTheBuildItLeft) {
  ProcessSpec build = command(Where::build, "make -j");
  build.placement.sizing = BuildSizing{1.0, 1, 0};
  auto first = start(command(Where::build, "nvcc --version"));
  write(session("1-build") / "cmd-1.exit", "0\n");
  ASSERT_TRUE(finish(*first));
  auto running = start(build);
  ASSERT_TRUE(running);
  running.reset();  // the server goes away

  auto restarted = make_slurm_executor(cluster_config(), nullptr, cluster.runner());
  ProcessSpec other = build;
  other.argv.back() = "make -j8";
  auto refused = restarted->reattach(other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::not_found);
  auto attached = restarted->reattach(build);
  ASSERT_TRUE(attached) << attached.error().message;
  EXPECT_EQ((*attached)->remote_id(), "100");
  EXPECT_EQ(cluster.calls_of("sbatch").size(), 1U);
  EXPECT_FALSE((*attached)->poll());
  write(session("1-build") / "cmd-2.exit", "0\n");
  const auto done = finish(**attached);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->success());
}

TEST_F(SlurmExecutorTest, ReleaseEndsOrCancelsWhatAJobHolds) {
  auto build = start(command(Where::build));
  write(session("1-build") / "cmd-1.exit", "0\n");
  ASSERT_TRUE(finish(*build));
  CommandPlacement job = spec_of(work_, Where::build).placement;
  executor_->release(job, Executor::Release::finished);
  EXPECT_TRUE(fs::exists(session("1-build") / "end"));
  EXPECT_TRUE(cluster.calls_of("scancel").empty());

  auto test = start(command(Where::test));
  executor_->release(job, Executor::Release::abandoned);
  EXPECT_THAT(cluster.calls_of("scancel"), ElementsAre(ElementsAre("scancel", "101")));
  EXPECT_THAT(read_file(work_ / "log.txt"),
              HasSubstr("cancelled batch job 101 left from the previous attempt"));
}

TEST_F(SlurmExecutorTest, APendingBatchJobIsNotedOnceWithItsReason) {
  auto e = start(command(Where::build));
  cluster.set("100", "PENDING");
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(e->poll());
  const std::string log = read_file(work_ / "log.txt");
  EXPECT_THAT(log, HasSubstr("==> [slurm] batch job 100 is pending (Priority)\n"));
  EXPECT_EQ(log.find("is pending"), log.rfind("is pending"));
}

TEST_F(SlurmExecutorTest, AFailedSbatchFailsTheCommandWithItsMessage) {
  auto failing = make_slurm_executor(
      cluster_config(), nullptr, [](const std::vector<std::string>&) -> Result<ClientOutput> {
        ClientOutput out;
        out.status.exited = true;
        out.status.code = 1;
        out.output =
            "sbatch: error: Batch job submission failed: Invalid account or "
            "account/partition combination specified\n";
        return out;
      });
  auto e = failing->start(command(Where::build));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::unavailable);
  EXPECT_THAT(e.error().message, HasSubstr("sbatch failed (exit 1): sbatch: error: Batch job "
                                           "submission failed: Invalid account"));
}

TEST_F(SlurmExecutorTest, APendingBatchJobThatCanNeverStartIsCancelledAndFailsItsCommand) {
  auto e = start(command(Where::build));
  cluster.set("100", "PENDING");
  cluster.reasons["100"] = "PartitionConfig";
  const auto status = finish(*e);
  ASSERT_TRUE(status);
  EXPECT_FALSE(status->success());
  EXPECT_FALSE(status->cancelled);
  EXPECT_THAT(cluster.calls_of("scancel"), ElementsAre(ElementsAre("scancel", "100")));
  EXPECT_EQ(status->describe(),
            "Slurm batch job 100 can never start: it is pending for PartitionConfig (it asked for "
            "4 CPU(s) and 8192 MiB; see `scontrol show job 100` for its limits); cancelled");
  EXPECT_THAT(read_file(work_ / "log.txt"), HasSubstr("==> [slurm] Slurm batch job 100 can never "
                                                      "start: it is pending for PartitionConfig"));
  // A reason that passes (the node is down for now) is waited out.
  auto waiting = start(command(Where::test));
  cluster.set("101", "PENDING");
  cluster.reasons["101"] = "ReqNodeNotAvail,_UnavailableNodes:node1";
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(waiting->poll());
  EXPECT_THAT(cluster.calls_of("scancel"), ::testing::SizeIs(1));
}

TEST_F(SlurmExecutorTest, ARequestIsFittedToThePartitionsNodes) {
  ResourceRequest asked{16, 64ULL << 30U, ResourceRequest::Source::defaults};
  auto fitted = executor_->fit_request(asked);
  ASSERT_TRUE(fitted) << fitted.error().message;
  EXPECT_THAT(
      cluster.calls_of("sinfo"),
      ElementsAre(ElementsAre("sinfo", "-h", "-N", "-o", "%N|%c|%m|%P", "--partition=build")));
  // node2 holds most of it: 8 CPUs, but only 6000 MiB, so 1 CPU of 4 GiB each.
  EXPECT_EQ(fitted->request.cpus, 1U);
  EXPECT_EQ(fitted->request.memory_bytes, 4096ULL << 20U);
  EXPECT_THAT(fitted->note, HasSubstr("the default request of 16 CPU(s) and 65536 MiB is more "
                                      "than any node of partition build holds"));
  asked.source = ResourceRequest::Source::recipe;
  auto refused = executor_->fit_request(asked);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid);
  // Without a readable node list the request stands.
  cluster.sinfo = "";
  auto unknown = executor_->fit_request(asked);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->request, asked);
  EXPECT_THAT(unknown->note, HasSubstr("could not be read (sinfo lists no node)"));
}

TEST_F(SlurmExecutorTest, TheConfigCheckProbesWithTheSizeOfABuildJobFromAnAbsolutePath) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  std::vector<std::string> notes;
  cluster.reasons["100"] = "PartitionTimeLimit";
  cluster.states["100"] = "PENDING";
  // The fake's sbatch starts every job RUNNING: the test sets it pending as soon as it exists.
  std::thread pend([this] {
    for (int i = 0; i < 500 && cluster.calls_of("sbatch").empty(); ++i) {
      std::this_thread::sleep_for(2ms);
    }
    cluster.set("100", "PENDING");
  });
  const auto problems =
      executor_->check("data/builds", ResourceRequest{2, 3000ULL << 20U}, 5s, notes);
  pend.join();
  fs::current_path(cwd);
  const auto sbatch = cluster.calls_of("sbatch");
  ASSERT_EQ(sbatch.size(), 1U);
  EXPECT_THAT(sbatch[0], Contains("--cpus-per-task=2"));
  EXPECT_THAT(sbatch[0], Contains("--mem=3000M"));
  EXPECT_THAT(sbatch[0],
              Contains(::testing::StartsWith("--chdir=" + (dir_ / "data" / "builds").string())));
  ASSERT_EQ(problems.size(), 1U) << ::testing::PrintToString(notes);
  EXPECT_THAT(problems[0], HasSubstr("a batch job of the size of a build job (2 CPU(s), 3000 MiB) "
                                     "can never start: it is pending for PartitionTimeLimit"));
  EXPECT_THAT(cluster.calls_of("scancel"), ElementsAre(ElementsAre("scancel", "100")));
}

// ---------------------------------------------------------------------------------------------
// Fitting requests to nodes, and reasons that never pass

TEST(SlurmNodes, SinfoListsTheNodesOfThePartitionOnce) {
  const std::string out =
      "a1|16|64000|cpu*\n"
      "a1|16|64000|all\n"
      "g1|32|256000+|gpu\n"
      "a2|16|64000|cpu*\n"
      "a2|16|64000|cpu*\n"
      "garbage line\n";
  EXPECT_THAT(parse_sinfo_nodes(out, "gpu"), ElementsAre(SlurmNode{"g1", 32, 256000}));
  EXPECT_THAT(parse_sinfo_nodes(out, ""),
              ElementsAre(SlurmNode{"a1", 16, 64000}, SlurmNode{"a2", 16, 64000}));
  EXPECT_THAT(parse_sinfo_nodes(out, "none"), ::testing::IsEmpty());
  // No default partition: every node listed.
  EXPECT_THAT(parse_sinfo_nodes("x|2|100|p\ny|4|200|q\n", ""),
              ElementsAre(SlurmNode{"x", 2, 100}, SlurmNode{"y", 4, 200}));
}

TEST(SlurmNodes, RequestsAreFittedToTheNodes) {
  const std::vector<SlurmNode> nodes = {{"small", 2, 24105}, {"wide", 8, 8192}};
  const auto request = [](unsigned cpus, std::uint64_t mib, ResourceRequest::Source source) {
    return ResourceRequest{cpus, mib << 20U, source};
  };
  using Source = ResourceRequest::Source;
  // A request a node holds stands, whoever made it.
  for (const auto source : {Source::recipe, Source::defaults}) {
    auto fits = fit_to_nodes(request(2, 16384, source), nodes, "partition p");
    ASSERT_TRUE(fits);
    EXPECT_EQ(fits->request, request(2, 16384, source));
    EXPECT_EQ(fits->note, "");
  }
  // The default, 4 CPUs x 4 GiB: "small" has 2 CPUs, "wide" 2 CPUs' worth of memory.
  auto lowered =
      fit_to_nodes(request(4, 16384, Source::defaults), {{"vm", 2, 24105}}, "partition wftest");
  ASSERT_TRUE(lowered);
  EXPECT_EQ(lowered->request, request(2, 8192, Source::defaults));
  EXPECT_EQ(lowered->note,
            "the default request of 4 CPU(s) and 16384 MiB is more than any node of partition "
            "wftest holds (the largest node is vm with 2 CPU(s) and 24105 MiB): build jobs ask "
            "for 2 CPU(s) and 8192 MiB");
  auto wide = fit_to_nodes(request(8, 32768, Source::defaults), nodes, "partition p");
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->request, request(2, 8192, Source::defaults));
  // More memory per CPU than any node has: 1 CPU and the largest node's memory.
  auto heavy = fit_to_nodes(request(2, 65536, Source::defaults), nodes, "partition p");
  ASSERT_TRUE(heavy);
  EXPECT_EQ(heavy->request, request(1, 24105, Source::defaults));
  // A recipe's own request that no node holds: refused, naming both.
  auto refused = fit_to_nodes(request(16, 65536, Source::recipe), nodes, "partition p");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid);
  EXPECT_EQ(refused.error().message,
            "the recipe's build jobs ask for 16 CPU(s) and 65536 MiB (cpus x gb_per_job), more "
            "than any node of partition p holds: the largest nodes are wide with 8 CPU(s) and "
            "small with 24105 MiB");
}

TEST(SlurmState, ReasonsThatNeverPass) {
  for (const char* never :
       {"PartitionConfig", "PartitionTimeLimit", "PartitionNodeLimit", "BadConstraints",
        "InvalidAccount", "InvalidQOS", "DependencyNeverSatisfied", "QOSMaxCpuPerJobLimit",
        "QOSMaxWallDurationPerJobLimit", "AssocMaxMemPerJob",
        "ReqNodeNotAvail,_UnavailableNodes:", "ReqNodeNotAvail, UnavailableNodes:"}) {
    EXPECT_TRUE(never_starts(never)) << never;
  }
  for (const char* passes :
       {"Resources", "Priority", "None", "", "Dependency", "JobHeldUser", "PartitionDown",
        "ReqNodeNotAvail,_UnavailableNodes:node[1-2]", "ReqNodeNotAvail", "QOSMaxCpuPerUserLimit",
        "AssocGrpCpuLimit", "BeginTime"}) {
    EXPECT_FALSE(never_starts(passes)) << passes;
  }
}

}  // namespace
}  // namespace wf::build
