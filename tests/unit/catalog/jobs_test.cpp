// The job store: the toolchain, wheel, build number and glibc floor a job recorded, startup
// recovery that leaves jobs of live runners alone, and a database from before those columns.

#include "wheelforge/catalog/jobs.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "backends.hpp"
#include "older_schema.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;

class JobStoreTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-jobs-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto location = backends::fresh_location(backend_);
    ASSERT_TRUE(location) << location.error().message;
    location_ = *location;
    auto cat = open_cat();  // creates and migrates the schema
    ASSERT_TRUE(cat) << cat.error().message;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path db() const { return dir_ / "wheelforge.db"; }

  std::unique_ptr<JobStore> open() {
    auto j = open_job_store(location_, dir_);
    EXPECT_TRUE(j) << j.error().message;
    return std::move(*j);
  }
  static std::vector<core::Cell> cells(int n) {
    std::vector<core::Cell> out;
    for (int i = 0; i < n; ++i) out.push_back(core::Cell{"3.12", {2, 8 + i}, {13, 0}});
    return out;
  }
  static BuildRecord build() {
    BuildRecord b;
    b.recipe = "demo";
    b.version = "1.0.0";
    return b;
  }

  Result<std::unique_ptr<Catalog>> open_cat() { return open_catalog(location_, dir_); }

  backends::Backend backend_ = backends::Backend::sqlite;
  std::string location_;
  fs::path dir_;
};

class JobStoreTest : public JobStoreTestBase,
                     public ::testing::WithParamInterface<backends::Backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    JobStoreTestBase::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreTest,
                         ::testing::Values(backends::Backend::sqlite,
                                           backends::Backend::postgresql),
                         backends::BackendName());

/// Tests of SQLite internals (older schemas).
using SqliteJobStoreTest = JobStoreTestBase;

TEST_P(JobStoreTest, ToolchainIsRecordedAndReadBack) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(created);
  const auto id = created->second.front().id;
  EXPECT_EQ(created->second.front().toolchain, Toolchain{});
  Toolchain t{"/usr/local/cuda-12.8/bin/nvcc", "12.8.93", "2.8.0+cu128", "12.8",
              "/usr/bin/python3.12",           "3.12.1"};
  ASSERT_TRUE(jobs->record_toolchain(id, t));
  auto found = jobs->find_job(id);
  ASSERT_TRUE(found && found->has_value());
  EXPECT_EQ((*found)->toolchain, t);
  // A later attempt's verification replaces it.
  t.torch_version = "2.8.1+cu128";
  ASSERT_TRUE(jobs->record_toolchain(id, t));
  EXPECT_EQ((*jobs->find_job(id))->toolchain.torch_version, "2.8.1+cu128");
  // Transitions keep it.
  ASSERT_TRUE(jobs->transition(id, core::JobState::preparing));
  EXPECT_EQ((*jobs->find_job(id))->toolchain, t);
}

TEST_P(JobStoreTest, RecoveryRequeuesInterruptedJobsButNotThoseStillRunning) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(3));
  ASSERT_TRUE(created);
  const auto& list = created->second;
  for (const auto& j : list) {
    ASSERT_TRUE(jobs->transition(j.id, core::JobState::preparing));
    ASSERT_TRUE(jobs->transition(j.id, core::JobState::building));
  }
  auto requeued = jobs->requeue_interrupted({list[1].id});
  ASSERT_TRUE(requeued);
  ASSERT_EQ(requeued->size(), 2U);
  EXPECT_EQ((*requeued)[0].id, list[0].id);
  EXPECT_EQ((*requeued)[1].id, list[2].id);
  EXPECT_EQ((*jobs->find_job(list[0].id))->state, core::JobState::queued);
  EXPECT_EQ((*jobs->find_job(list[0].id))->reason, "requeued after an interruption");
  EXPECT_EQ((*jobs->find_job(list[1].id))->state, core::JobState::building);
  EXPECT_EQ((*jobs->find_job(list[2].id))->state, core::JobState::queued);
}

TEST_P(JobStoreTest, EachQueuedJobIsClaimedByExactlyOneRunner) {
  auto jobs = open();
  auto other = open();  // a second process on the same catalog
  auto created = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(created);
  const auto id = created->second.front().id;
  const Micros until = now_micros() + 60'000'000;
  auto first = jobs->claim(id, "a:1:/a", until);
  auto second = other->claim(id, "b:2:/b", until);
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(first->has_value());
  EXPECT_FALSE(second->has_value());
  EXPECT_EQ((*first)->state, core::JobState::preparing);
  EXPECT_EQ((*first)->claimed_by, "a:1:/a");
  EXPECT_EQ((*first)->lease_expires_at, until);
  EXPECT_TRUE((*first)->started_at.has_value());
  // Only the holder moves it on; the heartbeat says whose it is.
  EXPECT_EQ(other->transition_as("b:2:/b", id, core::JobState::building).error().code,
            Errc::conflict);
  ASSERT_TRUE(jobs->transition_as("a:1:/a", id, core::JobState::building));
  EXPECT_EQ(*jobs->renew_lease(id, "a:1:/a", until + 1), Lease::held);
  EXPECT_EQ(*other->renew_lease(id, "b:2:/b", until + 1), Lease::lost);
  EXPECT_EQ((*jobs->find_job(id))->lease_expires_at, until + 1);
  // A cancellation through any process reaches the holder at its next heartbeat.
  ASSERT_TRUE(other->transition(id, core::JobState::cancelled, "cancelled while running"));
  EXPECT_EQ(*jobs->renew_lease(id, "a:1:/a", until + 2), Lease::cancelled);
  const auto ended = *jobs->find_job(id);
  EXPECT_EQ(ended->claimed_by, "a:1:/a");  // who ran it stays
  EXPECT_FALSE(ended->lease_expires_at.has_value());
  // Retried: queued and nobody's again.
  ASSERT_TRUE(jobs->transition(id, core::JobState::queued, "retried"));
  EXPECT_EQ((*jobs->find_job(id))->claimed_by, "");
  EXPECT_TRUE(*other->claim(id, "b:2:/b", until));
}

TEST_P(JobStoreTest, AJobWhoseLeasePassedIsQueuedAgainNamingItsRunner) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(2));
  ASSERT_TRUE(created);
  const auto expired = created->second[0].id;
  const auto live = created->second[1].id;
  const Micros now = now_micros();
  ASSERT_TRUE(*jobs->claim(expired, "dead:7:/d", now - 1'000'000));
  ASSERT_TRUE(jobs->transition_as("dead:7:/d", expired, core::JobState::building));
  ASSERT_TRUE(*jobs->claim(live, "alive:8:/l", now + 60'000'000));
  auto taken = jobs->requeue_expired(now);
  ASSERT_TRUE(taken);
  ASSERT_EQ(taken->size(), 1U);
  EXPECT_EQ(taken->front().id, expired);
  EXPECT_EQ(taken->front().claimed_by, "dead:7:/d");
  EXPECT_EQ(taken->front().state, core::JobState::building);
  const auto requeued = *jobs->find_job(expired);
  EXPECT_EQ(requeued->state, core::JobState::queued);
  EXPECT_EQ(requeued->claimed_by, "");
  EXPECT_EQ(requeued->reason,
            "taken over from runner dead:7:/d: its lease expired during building");
  EXPECT_EQ((*jobs->find_job(live))->state, core::JobState::preparing);
  // The dead runner, back, finds it lost and cannot write its state.
  EXPECT_EQ(*jobs->renew_lease(expired, "dead:7:/d", now + 60'000'000), Lease::lost);
  auto claimed = jobs->claim(expired, "alive:8:/l", now + 60'000'000);
  ASSERT_TRUE(claimed && claimed->has_value());
  EXPECT_EQ((*claimed)->reason, requeued->reason);
  EXPECT_EQ(jobs->transition_as("dead:7:/d", expired, core::JobState::failed).error().code,
            Errc::conflict);
  EXPECT_TRUE(jobs->requeue_expired(now)->empty());
}

TEST_F(SqliteJobStoreTest, JobsOfADatabaseWithoutToolchainColumnsSurviveTheMigration) {
  {
    auto jobs = open();
    ASSERT_TRUE(jobs->create_build(build(), cells(1)));
  }
  // Make the database look as if an older wheelforge had written it.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  const std::string older =
      wf::catalog::testing::undo_migrations_after(7) + "PRAGMA user_version = 7;";
  ASSERT_EQ(sqlite3_exec(raw, older.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "");
  sqlite3_close(raw);
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto jobs = open();
  auto all = jobs->jobs_in_state(core::JobState::queued);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1U);
  EXPECT_EQ(all->front().toolchain, Toolchain{});
  EXPECT_EQ(all->front().executor_job, "");
  EXPECT_EQ(all->front().cell.key(), "py3.12-torch2.8-cu130");
  EXPECT_EQ(all->front().build_number, 0U);
  EXPECT_EQ(all->front().glibc_floor, "");
  auto b = jobs->find_build(all->front().build_id);
  ASSERT_TRUE(b && b->has_value());
  EXPECT_FALSE((*b)->yank_superseded);
}

TEST_P(JobStoreTest, WheelBuildNumberAndGlibcFloorAreRecorded) {
  auto jobs = open();
  BuildRecord b = build();
  b.force = true;
  b.yank_superseded = true;
  auto created = jobs->create_build(b, cells(1));
  ASSERT_TRUE(created);
  EXPECT_TRUE(created->first.yank_superseded);
  const auto id = created->second.front().id;
  ASSERT_TRUE(jobs->record_glibc_floor(id, "2.34"));
  ASSERT_TRUE(jobs->record_wheel(id, "demo-1.0.0+cu130torch2.8-2-cp312-cp312-x.whl", 2));
  auto found = jobs->find_job(id);
  ASSERT_TRUE(found && found->has_value());
  EXPECT_EQ((*found)->glibc_floor, "2.34");
  EXPECT_EQ((*found)->build_number, 2U);
  EXPECT_EQ((*found)->wheel, "demo-1.0.0+cu130torch2.8-2-cp312-cp312-x.whl");
  auto again = jobs->find_build(created->first.id);
  ASSERT_TRUE(again && again->has_value());
  EXPECT_TRUE((*again)->yank_superseded);
  EXPECT_TRUE((*again)->force);
  auto listed = jobs->list_builds(10);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_TRUE(listed->front().yank_superseded);
}

TEST_P(JobStoreTest, ExecutorJobIsRecordedKeptAndReplaced) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(created);
  const auto id = created->second.front().id;
  EXPECT_EQ(created->second.front().executor_job, "");
  ASSERT_TRUE(jobs->record_executor_job(id, "1234"));
  EXPECT_EQ((*jobs->find_job(id))->executor_job, "1234");
  ASSERT_TRUE(jobs->transition(id, core::JobState::preparing));
  ASSERT_TRUE(jobs->transition(id, core::JobState::building));
  EXPECT_EQ((*jobs->find_job(id))->executor_job, "1234");
  ASSERT_TRUE(jobs->record_executor_job(id, "1240"));
  auto running = jobs->jobs_in_state(core::JobState::building);
  ASSERT_TRUE(running);
  ASSERT_EQ(running->size(), 1U);
  EXPECT_EQ(running->front().executor_job, "1240");
}

TEST_P(JobStoreTest, ProvenanceIsRecordedAndReplaced) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(created);
  const auto id = created->second.front().id;
  EXPECT_EQ(created->second.front().provenance, Provenance{});
  Provenance p{"builder:cuda13.0", "sha256:" + std::string(64, 'a'), "podman run --rm builder"};
  ASSERT_TRUE(jobs->record_provenance(id, p));
  EXPECT_EQ((*jobs->find_job(id))->provenance, p);
  p.image_digest = "sha256:" + std::string(64, 'b');
  ASSERT_TRUE(jobs->record_provenance(id, p));
  EXPECT_EQ((*jobs->find_job(id))->provenance, p);
}

TEST_P(JobStoreTest, ASucceededJobKeepsNoReasonFromBefore) {
  auto jobs = open();
  auto created = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(created);
  const auto id = created->second.front().id;
  ASSERT_TRUE(jobs->transition(id, core::JobState::preparing));
  auto requeued = jobs->requeue_interrupted({});
  ASSERT_TRUE(requeued);
  ASSERT_EQ(requeued->size(), 1U);
  EXPECT_EQ(requeued->front().reason, "requeued after an interruption");
  for (const auto to :
       {core::JobState::preparing, core::JobState::building, core::JobState::retagging,
        core::JobState::testing, core::JobState::ingesting}) {
    ASSERT_TRUE(jobs->transition(id, to));
  }
  // The reason stays while the job runs again ...
  EXPECT_EQ((*jobs->find_job(id))->reason, "requeued after an interruption");
  // ... and goes once it succeeded.
  auto done = jobs->transition(id, core::JobState::succeeded);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->reason, "");
  EXPECT_EQ((*jobs->find_job(id))->reason, "");
  // A success with a reason of its own keeps that one.
  auto other = jobs->create_build(build(), cells(1));
  ASSERT_TRUE(other);
  const auto id2 = other->second.front().id;
  for (const auto to :
       {core::JobState::preparing, core::JobState::building, core::JobState::retagging}) {
    ASSERT_TRUE(jobs->transition(id2, to));
  }
  ASSERT_TRUE(jobs->transition(id2, core::JobState::succeeded, "nothing new to publish"));
  EXPECT_EQ((*jobs->find_job(id2))->reason, "nothing new to publish");
}

}  // namespace
}  // namespace wf::catalog
