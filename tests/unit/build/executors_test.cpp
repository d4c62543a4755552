// What the runner tells executors and how it uses what they can do, through the fake executor:
// where each step's commands belong (CommandPlacement), admission of cluster jobs by count
// only, the hold an executor has on a job released when it ends, and the resumption of jobs on
// an executor whose commands outlive the server (re-attaching to the build, or running the
// steps after it again).

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <ctime>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "build/runner_bed.hpp"
#include "build/steps.hpp"

namespace wf::build::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using Where = CommandPlacement::Where;

class Executors : public ::testing::Test {
 protected:
  Executors() : bed(::testing::UnitTest::GetInstance()->current_test_info()->name()) {}

  // The commands started anew (not re-attached to) whose line contains `match`.
  std::vector<Recorded> started(std::string_view match) const {
    std::vector<Recorded> out;
    for (auto& c : bed.fake.commands_matching(match)) {
      if (!c.reattached) out.push_back(std::move(c));
    }
    return out;
  }

  RunnerBed bed;
};

TEST_F(Executors, EachStepsCommandsArePlacedWhereTheyBelong) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const fs::path work_dir = bed.data_dir / "builds" / ("job-" + std::to_string(job.id));
  const std::vector<std::pair<std::string, Where>> expected = {
      {"bin/nvcc --version", Where::build},
      {"command -v ninja", Where::build},
      {"-m venv " + (bed.data_dir / "builds" / "envs").string(), Where::build},
      {"torch==2.8.* setuptools wheel", Where::build},
      {"print('python_version=", Where::build},
      {"/bin/cp -a", Where::server},
      {"fake-build", Where::build},
      {"-m venv " + (work_dir / "test-env").string(), Where::test},
      {"--no-index --no-deps", Where::test},
      {"import demo_pkg", Where::test},
  };
  for (const auto& [match, where] : expected) {
    const auto found = bed.fake.commands_matching(match);
    ASSERT_EQ(found.size(), 1U) << match;
    const CommandPlacement& p = found[0].placement;
    EXPECT_EQ(p.where, where) << match;
    EXPECT_EQ(p.job_id, job.id);
    EXPECT_EQ(p.work_dir, work_dir);
    EXPECT_EQ(p.log, work_dir / "log.txt");
    EXPECT_EQ(p.envs_dir, bed.data_dir / "builds" / "envs");
    EXPECT_EQ(p.python, "3.12");
    EXPECT_EQ(p.cuda, "13.0");
    EXPECT_EQ(p.job_tag, (bed.data_dir / "builds").string() + "#" + std::to_string(job.id));
    // The grant, as limits: its memory, a core per compile job.
    EXPECT_EQ(p.memory_bytes, job.max_jobs * job.nvcc_threads * (1ULL << 30U)) << match;
    EXPECT_EQ(p.cpus, job.max_jobs * job.nvcc_threads) << match;
    EXPECT_EQ(p.sizing.has_value(), match == "fake-build") << match;
  }
  const auto build = bed.fake.commands_matching("fake-build").front().placement;
  ASSERT_TRUE(build.sizing);
  EXPECT_EQ(build.sizing->gb_per_job, 1.0);
  EXPECT_EQ(build.sizing->arch_count, 1U);
  EXPECT_EQ(build.sizing->halvings, 0U);
  // The job is over: what the executor held for it is released.
  EXPECT_THAT(bed.fake.releases(),
              ::testing::ElementsAre(std::pair{job.id, Executor::Release::finished}));
}

TEST_F(Executors, OomRetriesTellTheExecutorHowOftenTheParallelismWasHalved) {
  bed.config.recipes["demo"].recipe.arch_value = "80;90";
  bed.fake.on("fake-build", Outcome::exit(137, "Killed signal terminated program cicc\n"), 2);
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 3U);
  for (unsigned i = 0; i < 3; ++i) {
    ASSERT_TRUE(builds[i].placement.sizing);
    EXPECT_EQ(builds[i].placement.sizing->halvings, i);
    EXPECT_EQ(builds[i].placement.sizing->arch_count, 2U);
  }
}

TEST_F(Executors, ClusterJobsAreAdmittedByCountAndSizedFromTheRecipe) {
  // This host has nothing to give: with a cluster's admission, it does not matter.
  bed.fake.capacity_value = Capacity{0, 1};
  bed.fake.admission_value = Executor::Admission::cluster;
  bed.config.recipes["demo"].recipe.cpus = 3;
  bed.config.recipes["other"] = demo_recipe("other", "other-pkg");
  bed.config.recipes["other"].recipe.cpus = 3;
  bed.fake.on("fake-build", Outcome::hangs());
  script_host(bed.fake);
  bed.start();
  const auto a = bed.submit(bed.runner(), "demo");
  const auto b = bed.submit(bed.runner(), "other");
  // Both build at once, each planned for 3 CPUs and 3 x gb_per_job.
  const auto both = [this] { return bed.fake.commands_matching("fake-build").size() == 2U; };
  for (int i = 0; i < 3000 && !both(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(both()) << bed.log(a.id) << bed.log(b.id);
  for (const auto& build : bed.fake.commands_matching("fake-build")) {
    EXPECT_EQ(build.placement.cpus, 3U);
    EXPECT_EQ(build.placement.memory_bytes, 3ULL << 30U);
    EXPECT_EQ(build.env_value("MAX_JOBS"), "3");
    EXPECT_EQ(build.env_value("NVCC_THREADS"), "1");
  }
  ASSERT_TRUE(bed.runner().cancel(a.id));
  ASSERT_TRUE(bed.runner().cancel(b.id));
  EXPECT_EQ(bed.wait_terminal(a.id).state, core::JobState::cancelled);
  EXPECT_EQ(bed.wait_terminal(b.id).state, core::JobState::cancelled);
}

TEST_F(Executors, ClusterJobsStillCountAgainstMaxConcurrentJobs) {
  bed.fake.admission_value = Executor::Admission::cluster;
  bed.config.host.max_concurrent_jobs = 1;
  bed.config.recipes["other"] = demo_recipe("other", "other-pkg");
  bed.fake.on("fake-build", Outcome::hangs());
  script_host(bed.fake);
  bed.start();
  const auto a = bed.submit(bed.runner(), "demo");
  ASSERT_TRUE(bed.fake.wait_started("fake-build", 30s));
  const auto b = bed.submit(bed.runner(), "other");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(bed.jobs->find_job(b.id)->value().state, core::JobState::queued);
  EXPECT_THAT(bed.log(b.id), HasSubstr("max_concurrent_jobs = 1"));
  ASSERT_TRUE(bed.runner().cancel(a.id));
  ASSERT_TRUE(bed.runner().cancel(b.id));
  bed.wait_terminal(a.id);
}

TEST_F(Executors, AClusterRequestNoNodeHoldsFailsTheJobAtOnce) {
  bed.fake.admission_value = Executor::Admission::cluster;
  bed.config.recipes["demo"].recipe.cpus = 64;
  bed.fake.fit = [](const ResourceRequest&) -> Result<FittedRequest> {
    return make_error(Errc::invalid, "more than any node of partition p holds");
  };
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  EXPECT_EQ(job.state, core::JobState::failed);
  EXPECT_EQ(job.reason, "more than any node of partition p holds");
  EXPECT_TRUE(bed.fake.commands().empty()) << bed.fake.commands().front().line();
  ASSERT_EQ(bed.fake.fit_requests.size(), 1U);
  // What the recipe asked for: its own cpus, gb_per_job (1 GiB) for each.
  EXPECT_EQ(bed.fake.fit_requests[0],
            (ResourceRequest{64, 64ULL << 30U, ResourceRequest::Source::recipe}));
  EXPECT_THAT(bed.log(job.id), HasSubstr("failed: more than any node of partition p holds"));
}

TEST_F(Executors, AClusterJobIsSizedAsTheNodesAllow) {
  bed.fake.admission_value = Executor::Admission::cluster;
  bed.config.recipes["demo"].recipe.arch_value = "80;90";
  bed.fake.fit = [](const ResourceRequest& r) -> Result<FittedRequest> {
    EXPECT_EQ(r.source, ResourceRequest::Source::defaults);  // the recipe names no cpus
    return FittedRequest{ResourceRequest{2, 2ULL << 30U, r.source}, "lowered to fit node vm"};
  };
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto build = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(build.size(), 1U);
  EXPECT_EQ(build[0].placement.cpus, 2U);
  EXPECT_EQ(build[0].placement.memory_bytes, 2ULL << 30U);
  // Planned from what the batch job gets, not from the default it asked for first.
  EXPECT_EQ(build[0].env_value("MAX_JOBS"), "1");
  EXPECT_EQ(build[0].env_value("NVCC_THREADS"), "2");
  EXPECT_THAT(bed.log(job.id), HasSubstr("==> [fake] lowered to fit node vm"));
}

TEST_F(Executors, CompilerProcessesNeverExceedTheFreeCores) {
  bed.fake.capacity_value = Capacity{64ULL << 30U, 2};
  bed.config.recipes["demo"].recipe.arch_value = "80;90;100;120";
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  const auto build = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(build.size(), 1U);
  // Four archs would make four threads per compile job: two cores run two.
  EXPECT_EQ(build[0].env_value("MAX_JOBS"), "1");
  EXPECT_EQ(build[0].env_value("NVCC_THREADS"), "2");
  EXPECT_EQ(build[0].placement.cpus, 2U);
  EXPECT_EQ(job.max_jobs * job.nvcc_threads, 2U);
}

TEST_F(Executors, InstallsShareAPipCacheThatStaysWithinItsBound) {
  const fs::path cache = bed.data_dir / "builds" / "pip-cache";
  // An old, large file already in the cache: the job's end trims it away.
  fs::create_directories(cache / "http-v2");
  {
    std::ofstream old(cache / "http-v2" / "old", std::ios::binary);
    old << std::string(256 * 1024, 'x');
  }
  // Last used (read or written) two days ago.
  const std::time_t two_days_ago = std::time(nullptr) - 48 * 3600;
  const struct timespec used[2] = {{two_days_ago, 0}, {two_days_ago, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (cache / "http-v2" / "old").c_str(), used, 0), 0);
  bed.config.host.pip_cache_bytes = 64 * 1024;
  bed.fake.on("test-env/bin/python -m pip install --index-url",
              Outcome::does([](const ProcessSpec& spec) {
                // What pip would keep: a recent entry, smaller than the bound.
                for (const auto& [k, v] : spec.env) {
                  if (k == "PIP_CACHE_DIR")
                    std::ofstream(fs::path(v) / "fresh") << std::string(32 * 1024, 'y');
                }
              }));
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  // The environment's install and the smoke test's install of torch.
  for (const auto* match : {"torch==2.8.* setuptools wheel", "-m pip install --index-url"}) {
    const auto found = bed.fake.commands_matching(match);
    ASSERT_FALSE(found.empty()) << match;
    for (const auto& c : found) {
      EXPECT_EQ(c.env_value("PIP_CACHE_DIR"), cache.string()) << match;
      EXPECT_FALSE(c.env_value("PIP_NO_CACHE_DIR")) << match;
      EXPECT_EQ(c.placement.pip_cache, cache) << match;
    }
  }
  // Commands that download nothing keep pip's cache off: the build, the wheel's own install.
  for (const auto* match : {"fake-build", "pip install --no-index"}) {
    const auto found = bed.fake.commands_matching(match);
    ASSERT_EQ(found.size(), 1U) << match;
    EXPECT_EQ(found[0].env_value("PIP_NO_CACHE_DIR"), "1") << match;
    EXPECT_FALSE(found[0].env_value("PIP_CACHE_DIR")) << match;
  }
  // The trim follows the job's end (its state is already final): bounded wait for it.
  for (int i = 0; i < 500 && fs::exists(cache / "http-v2" / "old"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(fs::exists(cache / "http-v2" / "old"));
  EXPECT_TRUE(fs::exists(cache / "fresh"));
}

TEST_F(Executors, APipCacheOfZeroIsNone) {
  bed.config.host.pip_cache_bytes = 0;
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  for (const auto& c : bed.fake.commands()) {
    EXPECT_FALSE(c.env_value("PIP_CACHE_DIR")) << c.line();
    EXPECT_TRUE(c.placement.pip_cache.empty()) << c.line();
  }
  EXPECT_FALSE(fs::exists(bed.data_dir / "builds" / "pip-cache"));
}

// A server stops (or dies) while its job builds on an executor whose commands outlive it.
class Resume : public Executors {
 protected:
  void SetUp() override { bed.fake.reattaches_value = true; }

  // Starts a job whose command matching `hang` hangs, and stops the runner under it.
  catalog::JobRecord stop_during(const std::string& hang) {
    bed.fake.on(hang, Outcome::hangs(), 1);
    script_host(bed.fake);
    script_build(bed.fake);
    bed.start();
    const auto job = bed.submit();
    EXPECT_TRUE(bed.fake.wait_started(hang, 30s));
    bed.runner().stop();
    return bed.jobs->find_job(job.id)->value();
  }
};

TEST_F(Resume, AStoppedServerLeavesTheBuildRunning) {
  const auto job = stop_during("fake-build");
  EXPECT_EQ(job.state, core::JobState::building);
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 1U);
  EXPECT_FALSE(builds[0].cancelled) << "the build was cancelled instead of left to run";
  EXPECT_THAT(bed.log(job.id), HasSubstr("its commands go on, and the next start re-attaches"));
  EXPECT_TRUE(bed.fake.releases().empty());
}

TEST_F(Resume, TheNextStartReattachesToTheBuildInsteadOfRunningItAgain) {
  const auto stopped = stop_during("fake-build");
  ASSERT_EQ(stopped.state, core::JobState::building);
  // The build ends while no server watches; the restarted one collects it.
  bed.fake.on_reattach("fake-build", Outcome::does([](const ProcessSpec& spec) {
                         write_wheel(spec.placement.work_dir / "out", "demo-pkg", "1.0.0");
                       }));
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(stopped.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(stopped.id);
  EXPECT_EQ(done.attempts, 1);
  // Nothing before the build ran again, and the build was not started anew.
  EXPECT_EQ(started("fake-build").size(), 1U);
  EXPECT_EQ(started("bin/nvcc --version").size(), 1U);
  EXPECT_EQ(started("-m venv " + (bed.data_dir / "builds" / "envs").string()).size(), 1U);
  EXPECT_EQ(started("/bin/cp -a").size(), 1U);
  const auto asked = bed.fake.reattach_requests();
  ASSERT_EQ(asked.size(), 1U);
  EXPECT_THAT(asked[0], HasSubstr("fake-build"));
  const std::string log = bed.log(stopped.id);
  EXPECT_THAT(log, HasSubstr("resuming at step 'build', attaching to the build that ran"));
  EXPECT_THAT(log, HasSubstr("re-attached to attempt 1"));
  EXPECT_THAT(log, Not(HasSubstr("requeued")));
  // The steps after the build ran, with what the checkpoint kept (the environment, the
  // index of this server).
  const auto smoke = bed.fake.commands_matching("import demo_pkg");
  ASSERT_EQ(smoke.size(), 1U);
  EXPECT_EQ(smoke[0].placement.where, Where::test);
  EXPECT_EQ(bed.ingested.load(), 1);
}

TEST_F(Resume, ABuildThatCannotBeReattachedToRunsAgain) {
  const auto stopped = stop_during("fake-build");
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(stopped.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(stopped.id);
  EXPECT_EQ(started("fake-build").size(), 2U);
  EXPECT_EQ(started("bin/nvcc --version").size(), 1U);
  EXPECT_THAT(bed.log(stopped.id), HasSubstr("cannot be re-attached to (nothing to re-attach to); "
                                             "running it again"));
}

TEST_F(Resume, AJobStoppedAfterItsBuildRunsTheStepsAfterItAgain) {
  const auto stopped = stop_during("import demo_pkg");
  ASSERT_EQ(stopped.state, core::JobState::testing);
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(stopped.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(stopped.id);
  EXPECT_EQ(started("fake-build").size(), 1U);
  EXPECT_EQ(started("import demo_pkg").size(), 2U);
  EXPECT_TRUE(bed.fake.reattach_requests().empty());
  // What the smoke test left running was ended before it ran again.
  const auto released = bed.fake.releases();
  ASSERT_GE(released.size(), 1U);
  EXPECT_EQ(released.front(), (std::pair{stopped.id, Executor::Release::abandoned}));
  const std::string log = bed.log(stopped.id);
  EXPECT_THAT(log, HasSubstr("(testing); resuming at step 'retag'"));
  // They ran again from the wheel the build produced, not from the one they had rewritten.
  const auto count = [&log](std::string_view what) {
    std::size_t n = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("demo_pkg-1.0.0-py3-none-any.whl gets the label +cu130torch2.8"), 2U) << log;
  EXPECT_EQ(count("step: analyze binaries"), 2U) << log;
  EXPECT_EQ(count("step: number the build"), 2U) << log;
  EXPECT_EQ(done.wheel, "demo_pkg-1.0.0+cu130torch2.8-py3-none-any.whl");
  EXPECT_EQ(done.build_number, 0U);
  EXPECT_EQ(bed.ingested.load(), 1);
}

TEST_F(Resume, AJobStoppedBeforeItsBuildIsRequeuedAndItsWorkReleased) {
  const auto stopped = stop_during("-m venv " + (bed.data_dir / "builds" / "envs").string());
  ASSERT_EQ(stopped.state, core::JobState::preparing);
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(stopped.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(stopped.id);
  EXPECT_THAT(bed.log(stopped.id), HasSubstr("the server stopped while this job ran; requeued"));
  const auto released = bed.fake.releases();
  ASSERT_GE(released.size(), 1U);
  EXPECT_EQ(released.front(), (std::pair{stopped.id, Executor::Release::abandoned}));
  EXPECT_EQ(started("bin/nvcc --version").size(), 2U);
}

TEST_F(Resume, OnlyTheBuildIsDetached) {
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  for (const auto& c : bed.fake.commands()) {
    const bool build = c.line().find("fake-build") != std::string::npos;
    EXPECT_EQ(c.placement.lifetime,
              build ? CommandPlacement::Lifetime::detached : CommandPlacement::Lifetime::server)
        << c.line();
  }
}

TEST_F(Resume, ABuildThatCannotBeReattachedToIsReleasedBeforeItRunsAgain) {
  const auto stopped = stop_during("fake-build");
  auto next = bed.make_runner();
  ASSERT_TRUE(next->start());
  const auto done = bed.wait_terminal(stopped.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(stopped.id);
  // What may be left of the old build ends before the new one starts.
  const auto released = bed.fake.releases();
  ASSERT_GE(released.size(), 1U);
  EXPECT_EQ(released.front(), (std::pair{stopped.id, Executor::Release::abandoned}));
}

TEST_F(Resume, AOneOffRunnerCancelsItsBuildWhenItStops) {
  bed.fake.on("fake-build", Outcome::hangs(), 1);
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start(Runner::Recovery::leave);
  const auto job = bed.submit();
  ASSERT_TRUE(bed.fake.wait_started("fake-build", 30s));
  bed.runner().stop();
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 1U);
  EXPECT_TRUE(builds[0].cancelled) << "nothing comes back to a one-off runner's build";
  EXPECT_THAT(bed.log(job.id), HasSubstr("the job will be requeued at the next start"));
}

TEST_F(Resume, ADrainLetsRunningJobsFinishAndStartsNoQueuedOne) {
  bed.config.recipes["other"] = demo_recipe("other", "other-pkg");
  bed.config.host.max_concurrent_jobs = 1;
  bed.fake.on("fake-build", Outcome::hangs(), 1);
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start();
  const auto running = bed.submit();
  ASSERT_TRUE(bed.fake.wait_started("fake-build", 30s));
  const auto queued = bed.submit("other");
  std::atomic<bool> drained{false};
  std::thread drain([&] { drained = bed.runner().drain(); });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(bed.runner().running_jobs(), 1U);
  EXPECT_FALSE(drained.load());
  // The running build ends (as a cancel ends it); the drain is over, the queued job untouched.
  ASSERT_TRUE(bed.runner().cancel(running.id));
  drain.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(bed.runner().running_jobs(), 0U);
  bed.runner().stop();
  EXPECT_EQ(bed.jobs->find_job(queued.id)->value().state, core::JobState::queued);
}

TEST_F(Resume, OnlyJobsThatReachedTheirBuildAreResumable) {
  const fs::path dir = bed.data_dir / "resumable";
  fs::create_directories(dir);
  EXPECT_FALSE(resumable(core::JobState::building, dir)) << "no checkpoint";
  std::ofstream(dir / "checkpoint.txt") << "step=prepare environment\n";
  EXPECT_FALSE(resumable(core::JobState::building, dir));
  std::ofstream(dir / "checkpoint.txt") << "step=fetch source\n";
  EXPECT_TRUE(resumable(core::JobState::building, dir));
  EXPECT_FALSE(resumable(core::JobState::preparing, dir));
  std::ofstream(dir / "checkpoint.txt") << "step=retag\n";
  EXPECT_TRUE(resumable(core::JobState::testing, dir));
  EXPECT_TRUE(resumable(core::JobState::ingesting, dir));
  EXPECT_FALSE(resumable(core::JobState::queued, dir));
}

}  // namespace
}  // namespace wf::build::testing
