// Admission: MAX_JOBS and NVCC_THREADS from memory and cores, several jobs sharing a host,
// and one budget for every runner on a data directory (the admission ledger).

#include "build/admission.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "build/runner_bed.hpp"

namespace wf::build::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr std::uint64_t kGiB = 1ULL << 30U;

std::function<Capacity()> host(std::uint64_t gib, unsigned cores) {
  return [=] { return Capacity{gib * kGiB, cores}; };
}

Demand demand(std::int64_t job, double gb, unsigned archs = 1) {
  Demand d;
  d.job_id = job;
  d.gb_per_job = gb;
  d.arch_count = archs;
  return d;
}

class Ledger : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("wf-ledger-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = dir_ / "admission";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<AdmissionLedger> open() {
    auto l = AdmissionLedger::open(file_);
    EXPECT_TRUE(l) << l.error().message;
    return std::move(*l);
  }
  fs::path dir_;
  fs::path file_;
};

TEST_F(Ledger, GrantsFollowTheParallelismFormula) {
  auto ledger = open();
  // Cores bound: 4 cores, plenty of memory.
  auto a = ledger->admit(demand(1, 1.0), {}, host(64, 4));
  ASSERT_TRUE(a && a->grant);
  EXPECT_EQ(a->grant->max_jobs, 4U);
  EXPECT_EQ(a->grant->nvcc_threads, 1U);
  ASSERT_TRUE(ledger->release(1));
  // Memory bound, after the reserve: (10 - 2) GiB / 4 GiB per job.
  AdmissionLimits limits;
  limits.reserve_bytes = 2 * kGiB;
  auto b = ledger->admit(demand(2, 4.0), limits, host(10, 16));
  ASSERT_TRUE(b && b->grant);
  EXPECT_EQ(b->grant->max_jobs, 2U);
  EXPECT_EQ(b->grant->memory_bytes, 8 * kGiB);
  ASSERT_TRUE(ledger->release(2));
  // Several archs: threads first, then jobs.
  auto c = ledger->admit(demand(3, 1.0, 4), {}, host(8, 16));
  ASSERT_TRUE(c && c->grant);
  EXPECT_EQ(c->grant->nvcc_threads, 4U);
  EXPECT_EQ(c->grant->max_jobs, 2U);
}

TEST_F(Ledger, AJobAlwaysRunsWhenNothingElseDoes) {
  auto ledger = open();
  auto a = ledger->admit(demand(1, 4.0), {}, host(1, 2));
  ASSERT_TRUE(a && a->grant);
  EXPECT_EQ(a->grant->max_jobs, 1U);
  EXPECT_EQ(a->grant->nvcc_threads, 1U);
}

TEST_F(Ledger, TwoLedgersOnOneFileShareTheBudget) {
  auto first = open();
  auto second = open();
  auto a = first->admit(demand(1, 4.0), {}, host(10, 16));
  ASSERT_TRUE(a && a->grant);
  EXPECT_EQ(a->grant->max_jobs, 2U);  // 8 of 10 GiB, 2 cores
  // 2 GiB are left: a 4 GiB job waits, even when the host now looks bigger (the budget is
  // measured only while nothing is granted)...
  auto waits = second->admit(demand(2, 4.0), {}, host(100, 16));
  ASSERT_TRUE(waits);
  EXPECT_FALSE(waits->grant);
  EXPECT_EQ(waits->waiting_for,
            "1 job(s) of this data directory hold 8.0 of 10.0 GiB and 2 of 16 cores; this job "
            "needs 4.0 GiB and a core");
  // ... while a 1 GiB job fits beside it.
  auto fits = second->admit(demand(3, 1.0), {}, host(100, 16));
  ASSERT_TRUE(fits && fits->grant);
  EXPECT_EQ(fits->grant->max_jobs, 2U);
  // Once the first grant is given back, the waiting job gets the rest.
  ASSERT_TRUE(first->release(1));
  auto later = second->admit(demand(2, 4.0), {}, host(100, 16));
  ASSERT_TRUE(later && later->grant);
  EXPECT_EQ(later->grant->max_jobs, 2U);
}

TEST_F(Ledger, ConcurrencyLimitCountsEveryRunner) {
  auto first = open();
  auto second = open();
  AdmissionLimits one;
  one.max_concurrent_jobs = 1;
  ASSERT_TRUE(first->admit(demand(1, 4.0), one, host(10, 16))->grant);
  auto waits = second->admit(demand(2, 1.0), one, host(10, 16));
  ASSERT_TRUE(waits);
  EXPECT_FALSE(waits->grant);
  EXPECT_THAT(waits->waiting_for, HasSubstr("max_concurrent_jobs = 1"));
  EXPECT_TRUE(second->admit(demand(2, 1.0), {}, host(10, 16))->grant);
}

TEST_F(Ledger, GrantsOfDeadProcessesAreDropped) {
  {
    // A grant of a pid that cannot exist, and one of our own pid with another start time (a
    // reused pid): neither owner is alive.
    std::ofstream out(file_);
    out << "budget 1073741824 1\n"
        << "grant 99999999 12345 1 7 1073741824 1\n"
        << "grant " << ::getpid() << " 1 1 8 1073741824 1\n"
        << "reserve 99999999 12345 1 5\n"
        << "a torn line\n";
  }
  auto ledger = open();
  auto view = ledger->view();
  ASSERT_TRUE(view);
  EXPECT_TRUE(view->jobs_of_others.empty());
  EXPECT_TRUE(view->builds_of_others.empty());
  auto a = ledger->admit(demand(1, 1.0), {}, host(16, 8));
  ASSERT_TRUE(a && a->grant);
  EXPECT_EQ(a->grant->max_jobs, 8U) << "the whole host: the dead grants hold nothing";
}

TEST_F(Ledger, ReservationsAndGrantsAreSeenByOthersUntilReleased) {
  auto mine = open();
  auto other = open();
  ASSERT_TRUE(mine->reserve_build(42));
  ASSERT_TRUE(mine->admit(demand(7, 1.0), {}, host(16, 8))->grant);
  auto seen = other->view();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->builds_of_others, std::set<std::int64_t>{42});
  EXPECT_EQ(seen->jobs_of_others, std::set<std::int64_t>{7});
  auto own = mine->view();
  ASSERT_TRUE(own);
  EXPECT_TRUE(own->builds_of_others.empty() && own->jobs_of_others.empty());
  mine.reset();  // a runner that ends gives everything back
  seen = other->view();
  ASSERT_TRUE(seen);
  EXPECT_TRUE(seen->builds_of_others.empty() && seen->jobs_of_others.empty());
}

TEST_F(Ledger, NewBuildIsReservedInTheSameLockedUpdate) {
  auto mine = open();
  auto other = open();
  // The build `create` returns is reserved; nothing when it returns none.
  ASSERT_TRUE(mine->reserve_new_build([]() -> std::optional<std::int64_t> { return 9; }));
  ASSERT_TRUE(
      mine->reserve_new_build([]() -> std::optional<std::int64_t> { return std::nullopt; }));
  auto seen = other->view();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->builds_of_others, std::set<std::int64_t>{9});
}

TEST_F(Ledger, UnopenableLedgerNamesItsPath) {
  auto l = AdmissionLedger::open(dir_ / "missing" / "admission");
  ASSERT_FALSE(l);
  EXPECT_THAT(l.error().message, HasSubstr((dir_ / "missing" / "admission").string()));
}

// ---- Through runners

class Admission : public ::testing::Test {
 protected:
  Admission() : bed(::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  RunnerBed bed;
};

TEST_F(Admission, MaxJobsAndNvccThreadsComeFromMemoryAndCores) {
  bed.fake.capacity_value = Capacity{6 * kGiB, 16};
  bed.config.host.memory_reserve_bytes = 1 * kGiB;
  bed.config.recipes["demo"].recipe.arch_value = "80;90";
  script_host(bed.fake);
  script_build(bed.fake);
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  // (6 - 1) GiB at 1 GiB per thread, two archs: 2 threads, 2 jobs.
  const auto build = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(build.size(), 1U);
  EXPECT_EQ(build[0].env_value("NVCC_THREADS"), "2");
  EXPECT_EQ(build[0].env_value("MAX_JOBS"), "2");
  EXPECT_EQ(job.max_jobs, 2U);
  EXPECT_EQ(job.nvcc_threads, 2U);
}

TEST_F(Admission, SeveralJobsShareTheHost) {
  bed.fake.capacity_value = Capacity{10 * kGiB, 16};
  auto big = demo_recipe("big", "big-pkg");
  big.recipe.gb_per_job = 4.0;
  big.recipe.build_command = "hang-build-big {out}";
  auto small = demo_recipe("small", "small-pkg");
  small.recipe.build_command = "hang-build-small {out}";
  auto last = demo_recipe("last", "demo-pkg");
  bed.config.recipes = {{"big", big}, {"small", small}, {"last", last}};
  bed.fake.on("hang-build", Outcome::hangs());
  script_host(bed.fake);
  script_build(bed.fake);
  bed.start();
  const auto big_job = bed.submit(bed.runner(), "big");
  ASSERT_TRUE(bed.fake.wait_started("hang-build-big", 30s));
  const auto small_job = bed.submit(bed.runner(), "small");
  ASSERT_TRUE(bed.fake.wait_started("hang-build-small", 30s));
  // Both run at once: 2 x 4 GiB, then 2 x 1 GiB of the 2 GiB left.
  EXPECT_EQ(bed.fake.commands_matching("hang-build-big")[0].env_value("MAX_JOBS"), "2");
  EXPECT_EQ(bed.fake.commands_matching("hang-build-small")[0].env_value("MAX_JOBS"), "2");
  // Nothing is left: the third waits, and says so in its log.
  const auto last_job = bed.submit(bed.runner(), "last");
  bed.wait_until(last_job.id, [&](const catalog::JobRecord&) {
    return bed.log(last_job.id).find("waiting for the build budget") != std::string::npos;
  });
  EXPECT_THAT(bed.log(last_job.id),
              HasSubstr("2 job(s) of this data directory hold 10.0 of 10.0 GiB"));
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
  ASSERT_TRUE(bed.runner().cancel(big_job.id));
  const auto done = bed.wait_terminal(last_job.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(last_job.id);
  // 8 GiB were given back; 2 GiB and 2 cores are still held by the small job.
  EXPECT_EQ(bed.fake.commands_matching("fake-build")[0].env_value("MAX_JOBS"), "8");
  ASSERT_TRUE(bed.runner().cancel(small_job.id));
  EXPECT_EQ(bed.wait_terminal(small_job.id).state, core::JobState::cancelled);
}

TEST_F(Admission, OneOffRunnerAndServingRunnerShareOneBudget) {
  // Two runners on one data directory, as `wheelforge serve` and `wheelforge build` are: each
  // with its own executor, so that the commands show which runner ran a job.
  bed.fake.capacity_value = Capacity{4 * kGiB, 4};
  auto long_recipe = demo_recipe("long", "long-pkg");
  long_recipe.recipe.build_command = "hang-build {out}";
  bed.config.recipes["long"] = long_recipe;
  bed.fake.on("hang-build", Outcome::hangs());
  script_host(bed.fake);
  Runner& serving = bed.start();
  const auto server_job = bed.submit(serving, "long");
  ASSERT_TRUE(bed.fake.wait_started("hang-build", 30s));

  FakeExecutor cli_fake;
  cli_fake.capacity_value = bed.fake.capacity_value;
  script_host(cli_fake);
  script_build(cli_fake);
  auto cli = bed.make_runner(&cli_fake);
  core::BuildRequest request;
  request.recipe = "demo";
  request.version = "1.0.0";
  auto created = cli->submit_own(request);
  ASSERT_TRUE(created) << created.error().message;
  ASSERT_EQ(created->second.size(), 1U);
  const auto cli_job = created->second.front();
  // Reserved as it was recorded: the serving runner sees it before the command even starts.
  auto reserved = AdmissionLedger::open(bed.data_dir / "builds" / "admission");
  ASSERT_TRUE(reserved);
  auto seen = (*reserved)->view();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->builds_of_others, std::set<std::int64_t>{cli_job.build_id});
  ASSERT_TRUE(cli->start(Runner::Recovery::leave));
  // The server's job holds every core: the command's job waits for the budget.
  bed.wait_until(cli_job.id, [&](const catalog::JobRecord&) {
    return bed.log(cli_job.id).find("waiting for the build budget") != std::string::npos;
  });
  auto queued = bed.jobs->find_job(cli_job.id);
  ASSERT_TRUE(queued && queued->has_value());
  EXPECT_EQ((*queued)->state, core::JobState::queued);
  EXPECT_TRUE(cli_fake.commands().empty());

  // A restarted server does not requeue a job that a live runner runs: here the server's own
  // hanging job, held by the first runner.
  auto restarted = bed.make_runner();
  ASSERT_TRUE(restarted->start());
  auto still = bed.jobs->find_job(server_job.id);
  ASSERT_TRUE(still && still->has_value());
  EXPECT_EQ((*still)->state, core::JobState::building);
  EXPECT_THAT(bed.log(server_job.id), ::testing::Not(HasSubstr("requeued")));
  restarted->stop();

  ASSERT_TRUE(serving.cancel(server_job.id));
  const auto ended = bed.wait_terminal(server_job.id);
  EXPECT_EQ(ended.state, core::JobState::cancelled);
  const auto done = bed.wait_terminal(cli_job.id);
  ASSERT_EQ(done.state, core::JobState::succeeded) << bed.log(cli_job.id);
  // The command's runner built it (the serving runner leaves reserved builds alone), after
  // the server's job had ended.
  EXPECT_EQ(cli_fake.commands_matching("fake-build").size(), 1U);
  EXPECT_TRUE(bed.fake.commands_matching("fake-build").empty());
  ASSERT_TRUE(done.started_at && ended.finished_at);
  EXPECT_GE(*done.started_at, *ended.finished_at);
  cli->stop();
}

}  // namespace
}  // namespace wf::build::testing
