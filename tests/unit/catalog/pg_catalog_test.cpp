// The PostgreSQL catalog's own promises: racing writers from two connections (two processes)
// have one winner, concurrent openers of a fresh database migrate it once, a lost or refused
// connection is Errc::unavailable naming the database (never its password) and the next call
// connects again, and locations other than "sqlite" or a libpq URI are refused.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends.hpp"
#include "catalog/pg_conn.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/change_feed.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/catalog/shared_pages.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;
using backends::Backend;

NewFile wheel(std::string filename, char sha) {
  NewFile nf;
  nf.file.filename = std::move(filename);
  nf.file.project = "demo-pkg";
  nf.file.version = "1.0";
  nf.file.sha256 = std::string(64, sha);
  nf.file.size = 10;
  nf.file.upload_time = now_micros();
  nf.file.metadata_sha256 = std::string(64, 'm');
  nf.file.metadata_size = 5;
  nf.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  nf.display_name = "demo-pkg";
  return nf;
}

class RaceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-race-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto location = backends::fresh_location(GetParam());
    ASSERT_TRUE(location) << location.error().message;
    location_ = *location;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string location_;
  fs::path dir_;
};

INSTANTIATE_TEST_SUITE_P(Backends, RaceTest,
                         ::testing::Values(Backend::sqlite, Backend::postgresql),
                         backends::BackendName());

// Two connections (as two server processes hold) upload spellings of one name with different
// bytes at once; each one's publish step waits so that both are inside insert_file together.
TEST_P(RaceTest, TwoConnectionsRacingForOneNameHaveOneWinner) {
  for (int round = 0; round < 3; ++round) {
    auto a = open_catalog(location_, dir_);
    auto b = open_catalog(location_, dir_);
    ASSERT_TRUE(a && b);
    const std::string version = "1." + std::to_string(round);
    NewFile first = wheel("demo_pkg-" + version + "-py3-none-any.whl", 'a');
    NewFile second = wheel("Demo.Pkg-" + version + "-py3-none-any.whl", 'b');
    first.file.version = second.file.version = version;
    std::vector<Result<Catalog::Inserted>> results;
    results.reserve(2);
    std::atomic<int> published{0};
    auto slow_publish = [&]() -> Status {
      ++published;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return ok_status();
    };
    std::optional<Result<Catalog::Inserted>> ra;
    std::optional<Result<Catalog::Inserted>> rb;
    std::thread ta([&] { ra = (*a)->insert_file(first, slow_publish); });
    std::thread tb([&] { rb = (*b)->insert_file(second, slow_publish); });
    ta.join();
    tb.join();
    ASSERT_TRUE(*ra) << ra->error().message;
    ASSERT_TRUE(*rb) << rb->error().message;
    const auto oa = (*ra)->first;
    const auto ob = (*rb)->first;
    EXPECT_TRUE((oa == InsertOutcome::inserted && ob == InsertOutcome::conflict) ||
                (oa == InsertOutcome::conflict && ob == InsertOutcome::inserted))
        << "round " << round;
    // Only the winner published: a blob no row references is never published.
    EXPECT_EQ(published.load(), 1);
    auto contents = (*a)->load();
    ASSERT_TRUE(contents);
    EXPECT_EQ(contents->files.size(), static_cast<std::size_t>(round + 1));
  }
}

class PgCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto location = backends::fresh_location(Backend::postgresql);
    ASSERT_TRUE(location) << location.error().message;
    uri_ = *location;
  }
  std::string uri_;
  fs::path dir_ = fs::temp_directory_path();
};

TEST_F(PgCatalogTest, ConcurrentOpenersOfAFreshDatabaseMigrateItOnce) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (std::size_t i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      if (i % 2 == 0) {
        auto cat = open_catalog(uri_, dir_);
        if (!cat) errors[i] = cat.error().message;
      } else {
        auto jobs = open_job_store(uri_, dir_);
        if (!jobs) errors[i] = jobs.error().message;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  auto cat = open_catalog(uri_, dir_);
  ASSERT_TRUE(cat);
  auto inserted = (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", 'a'));
  ASSERT_TRUE(inserted) << inserted.error().message;
  EXPECT_EQ(inserted->first, InsertOutcome::inserted);
}

NewFile project_wheel(const std::string& project, const std::string& version, char sha) {
  NewFile nf = wheel(project + "-" + version + "-py3-none-any.whl", sha);
  nf.file.project = nf.display_name = project;
  nf.file.version = version;
  return nf;
}

// No global write lock: while one connection's upload to `alpha` is inside its transaction
// (its publish step waits), another connection's upload to `beta` commits, and an upload to
// `alpha` waits for the first one's commit. Each stored file moves the generation by one.
TEST_F(PgCatalogTest, WritersOfOtherProjectsDoNotWaitForEachOther) {
  auto a = open_catalog(uri_, dir_);
  auto b = open_catalog(uri_, dir_);
  auto c = open_catalog(uri_, dir_);
  ASSERT_TRUE(a && b && c);
  auto before = (*a)->generation();
  ASSERT_TRUE(before) << before.error().message;

  std::promise<void> inside;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto held = std::async(std::launch::async, [&] {
    return (*a)->insert_file(project_wheel("alpha", "1.0", 'a'), [&]() -> Status {
      inside.set_value();
      released.wait();
      return ok_status();
    });
  });
  ASSERT_EQ(inside.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the upload to alpha never reached its publish step";
  auto other = std::async(std::launch::async,
                          [&] { return (*b)->insert_file(project_wheel("beta", "1.0", 'b')); });
  auto same = std::async(std::launch::async,
                         [&] { return (*c)->insert_file(project_wheel("alpha", "2.0", 'c')); });
  const bool other_done = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  const bool same_waited =
      same.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
  release.set_value();  // whatever happened, let every writer finish
  EXPECT_TRUE(other_done) << "an upload to another project waited for alpha's transaction";
  EXPECT_TRUE(same_waited) << "an upload to alpha did not wait for alpha's transaction";
  for (auto* f : {&held, &other, &same}) {
    auto r = f->get();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->first, InsertOutcome::inserted);
  }
  auto after = (*a)->generation();
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(*after, *before + 3);
  // An answer that stores nothing moves nothing.
  auto again = (*b)->insert_file(project_wheel("beta", "1.0", 'b'));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->first, InsertOutcome::identical);
  auto still = (*c)->generation();
  ASSERT_TRUE(still);
  EXPECT_EQ(*still, *after);
  auto contents = (*c)->load();
  ASSERT_TRUE(contents);
  EXPECT_EQ(contents->generation, *after);
  EXPECT_EQ(contents->files.size(), 3U);
}

// Upstream pages shared by servers: of two servers that miss a page, one claims it; the
// other finds the claim and no copy, then the copy the first one stored; an old copy is
// claimed again (with that copy, for a conditional fetch), a released or expired claim too.
TEST_F(PgCatalogTest, SharedUpstreamPagesAreFetchedByOneServerAtATime) {
  ASSERT_TRUE(open_catalog(uri_, dir_));  // migrates
  EXPECT_EQ(open_shared_pages("sqlite"), nullptr);
  auto one = open_shared_pages(uri_);
  auto two = open_shared_pages(uri_);
  ASSERT_TRUE(one && two);
  const std::string key = "pypi\ndemo";
  constexpr Micros kMinute = 60'000'000;
  const Micros t = 1'000 * kMinute;

  auto first = one->look(key, t - 10 * kMinute, t + kMinute, t);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->fetch);
  EXPECT_FALSE(first->copy);
  auto second = two->look(key, t - 10 * kMinute, t + kMinute, t);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(second->fetch);
  EXPECT_FALSE(second->copy);

  ASSERT_TRUE(one->put(key, SharedPages::Copy{"page text", t}));
  auto fresh = two->look(key, t - 10 * kMinute, t + kMinute, t + 1);
  ASSERT_TRUE(fresh);
  EXPECT_FALSE(fresh->fetch);
  ASSERT_TRUE(fresh->copy);
  EXPECT_EQ(fresh->copy->text, "page text");
  EXPECT_EQ(fresh->copy->validated, t);

  // Ten minutes on, the copy is old: one server claims it and gets it for revalidation.
  const Micros later = t + 11 * kMinute;
  auto old = two->look(key, later - 10 * kMinute, later + kMinute, later);
  ASSERT_TRUE(old);
  EXPECT_TRUE(old->fetch);
  ASSERT_TRUE(old->copy);
  EXPECT_EQ(old->copy->text, "page text");
  auto meanwhile = one->look(key, later - 10 * kMinute, later + kMinute, later);
  ASSERT_TRUE(meanwhile);
  EXPECT_FALSE(meanwhile->fetch);
  ASSERT_TRUE(two->renew(key, later));  // a 304
  auto renewed = one->look(key, later - 10 * kMinute, later + kMinute, later + 1);
  ASSERT_TRUE(renewed);
  EXPECT_FALSE(renewed->fetch);
  ASSERT_TRUE(renewed->copy);
  EXPECT_EQ(renewed->copy->validated, later);

  // A released claim, and a claim whose server died (past its deadline), are claimed again.
  const Micros much_later = later + 20 * kMinute;
  auto claimed = one->look(key, much_later - 10 * kMinute, much_later + kMinute, much_later);
  ASSERT_TRUE(claimed && claimed->fetch);
  ASSERT_TRUE(one->release(key));
  auto again = two->look(key, much_later - 10 * kMinute, much_later + kMinute, much_later);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->fetch);
  auto before_deadline =
      one->look(key, much_later - 10 * kMinute, much_later + 2 * kMinute, much_later + 1);
  ASSERT_TRUE(before_deadline);
  EXPECT_FALSE(before_deadline->fetch);
  auto past_deadline =
      one->look(key, much_later - 10 * kMinute, much_later + 3 * kMinute, much_later + kMinute);
  ASSERT_TRUE(past_deadline);
  EXPECT_TRUE(past_deadline->fetch);
}

TEST_F(PgCatalogTest, ALostConnectionIsUnavailableNamingTheDatabaseAndReconnects) {
  auto cat = open_catalog(uri_, dir_);
  ASSERT_TRUE(cat) << cat.error().message;
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", 'a')));
  const std::string db = uri_.substr(uri_.find('@') + 1);  // 127.0.0.1:PORT/wf_test_N
  ASSERT_TRUE(backends::set_server_stopped(true));
  auto lost = (*cat)->insert_file(wheel("demo_pkg-1.1-py3-none-any.whl", 'b'));
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, Errc::unavailable);
  EXPECT_NE(lost.error().message.find("PostgreSQL at " + db), std::string::npos)
      << lost.error().message;
  auto still = (*cat)->generation();  // refused now: the server is down
  ASSERT_FALSE(still);
  EXPECT_EQ(still.error().code, Errc::unavailable);
  ASSERT_TRUE(backends::set_server_stopped(false));
  // The next call connects again; nothing acknowledged was lost, nothing refused was kept.
  auto again = (*cat)->insert_file(wheel("demo_pkg-1.1-py3-none-any.whl", 'b'));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->first, InsertOutcome::inserted);
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents) << contents.error().message;
  EXPECT_EQ(contents->files.size(), 2U);
}

TEST_F(PgCatalogTest, ARefusedConnectionNamesTheDatabaseButNotThePassword) {
  // Port 1 on loopback: nothing listens there.
  auto cat = open_catalog("postgresql://wf:s3cr3t-pw@127.0.0.1:1/index", dir_);
  ASSERT_FALSE(cat);
  EXPECT_EQ(cat.error().code, Errc::unavailable);
  EXPECT_NE(cat.error().message.find("PostgreSQL at 127.0.0.1:1/index"), std::string::npos)
      << cat.error().message;
  EXPECT_EQ(cat.error().message.find("s3cr3t-pw"), std::string::npos) << cat.error().message;
  auto jobs = open_job_store("postgres://wf:s3cr3t-pw@127.0.0.1:1/index", dir_);
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().code, Errc::unavailable);
}

TEST(CatalogLocation, OnlySqliteOrALibpqUriIsAccepted) {
  EXPECT_TRUE(validate_catalog_location("sqlite"));
  EXPECT_TRUE(validate_catalog_location("postgresql://u@h/db"));
  EXPECT_TRUE(validate_catalog_location("postgres://u@h/db"));
  auto bad = validate_catalog_location("mysql://u:hunter22@h/db");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::invalid);
  EXPECT_NE(bad.error().message.find("postgresql://"), std::string::npos);
  EXPECT_EQ(bad.error().message.find("hunter22"), std::string::npos) << bad.error().message;
  auto cat = open_catalog("sqlite3", fs::temp_directory_path());
  ASSERT_FALSE(cat);
  EXPECT_EQ(cat.error().code, Errc::invalid);
  EXPECT_EQ(describe_catalog_location("postgresql://wf:pw@db.example:5433/index?sslmode=require"),
            "postgresql://wf:***@db.example:5433/index?sslmode=require");
  EXPECT_EQ(describe_catalog_location("postgresql://db.example/index?password=pw&user=wf"),
            "postgresql://db.example/index?password=***&user=wf");
  EXPECT_EQ(describe_catalog_location("sqlite"), "sqlite");
  // For pg_dump's command line (the password goes in PGPASSWORD).
  EXPECT_EQ(uri_without_password("postgresql://wf:pw@db.example:5433/index?sslmode=require"),
            "postgresql://wf@db.example:5433/index?sslmode=require");
  EXPECT_EQ(uri_without_password("postgresql://db.example/index?password=pw&user=wf"),
            "postgresql://db.example/index?user=wf");
}

// The change feed (change_feed.hpp): what a batch reloads, and the commit-safe order of reads.

TEST(ChangePlan, ProjectsTokensOrEverything) {
  using catalog::Change;
  using catalog::ChangeKind;
  using catalog::ChangePlan;
  EXPECT_EQ(catalog::plan_changes({}, 4).load, ChangePlan::Load::nothing);
  auto plan = catalog::plan_changes(
      {Change{ChangeKind::project, "a", 0}, Change{ChangeKind::project, "b", 0},
       Change{ChangeKind::project, "a", 0}},
      4);
  EXPECT_EQ(plan.load, ChangePlan::Load::projects);
  EXPECT_EQ(plan.projects, (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(plan.tokens);
  plan = catalog::plan_changes({Change{ChangeKind::tokens, "", 0}}, 4);
  EXPECT_EQ(plan.load, ChangePlan::Load::projects);
  EXPECT_TRUE(plan.tokens);
  EXPECT_TRUE(plan.projects.empty());
  plan = catalog::plan_changes(
      {Change{ChangeKind::project, "a", 0}, Change{ChangeKind::all, "", 0}}, 4);
  EXPECT_EQ(plan.load, ChangePlan::Load::everything);
  plan = catalog::plan_changes(
      {Change{ChangeKind::project, "a", 0}, Change{ChangeKind::project, "b", 0},
       Change{ChangeKind::project, "c", 0}},
      2);
  EXPECT_EQ(plan.load, ChangePlan::Load::everything);
  EXPECT_TRUE(plan.projects.empty());
}

TEST_F(PgCatalogTest, TheFeedNeverSkipsAnEntryThatCommitsLate) {
  auto cat = open_catalog(uri_, dir_);
  ASSERT_TRUE(cat) << cat.error().message;
  auto feed = open_change_feed(uri_);
  ASSERT_NE(feed, nullptr);
  EXPECT_EQ(open_change_feed("sqlite"), nullptr);
  auto from = feed->start();
  ASSERT_TRUE(from) << from.error().message;

  // A writer that began first (its transaction id is lower) and commits last.
  auto late = pg::Conn::open(uri_);
  ASSERT_TRUE(late) << late.error().message;
  ASSERT_TRUE((*late)->script("begin", "BEGIN"));
  ASSERT_TRUE(
      (*late)->script("write", "INSERT INTO changes (kind, project) VALUES ('project', 'late')"));
  // A later writer commits first: its upload is in the feed, with a higher id.
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", 'a')));
  auto first = feed->read(*from);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->changes.empty());  // behind the running transaction: not yet
  auto position = (*cat)->position();
  ASSERT_TRUE(position);
  EXPECT_LT(first->position, *position);

  ASSERT_TRUE((*late)->script("commit", "COMMIT"));
  auto second = feed->read(first->position);
  ASSERT_TRUE(second) << second.error().message;
  std::set<std::string> seen;
  for (const auto& c : second->changes) {
    EXPECT_EQ(c.kind, catalog::ChangeKind::project);
    seen.insert(c.project);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"late", "demo-pkg"}));
  EXPECT_GE(second->position, *position);
  // Read on from there: nothing twice.
  auto third = feed->read(second->position);
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->changes.empty());

  // A token's change is one entry; a NOTIFY after the commit wakes a listener.
  auto armed = feed->wait(std::chrono::milliseconds(0));  // the first wait LISTENs
  ASSERT_TRUE(armed) << armed.error().message;
  TokenRecord t;
  t.hash = "feed-token-hash";
  t.scope = Scope::upload;
  t.created_at = 1;
  ASSERT_TRUE((*cat)->insert_token(t, Actor{}));
  auto woken = feed->wait(std::chrono::milliseconds(5000));
  ASSERT_TRUE(woken) << woken.error().message;
  EXPECT_TRUE(*woken);
  auto tokens = feed->read(third->position);
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->changes.size(), 1U);
  EXPECT_EQ(tokens->changes[0].kind, catalog::ChangeKind::tokens);
}

TEST_F(PgCatalogTest, PrunedEntriesMakeAReaderBehindThemReloadEverything) {
  auto cat = open_catalog(uri_, dir_);
  ASSERT_TRUE(cat) << cat.error().message;
  auto feed = open_change_feed(uri_);
  ASSERT_NE(feed, nullptr);
  auto behind = feed->start();
  ASSERT_TRUE(behind) << behind.error().message;
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", 'a')));
  auto current = feed->read(*behind);
  ASSERT_TRUE(current) << current.error().message;
  ASSERT_FALSE(current->changes.empty());

  // Nothing is old enough yet: nothing pruned, nothing changes for either reader.
  auto none = feed->prune(std::chrono::hours(1));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(*none, 0U);
  auto again = feed->read(*behind);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->changes.size(), current->changes.size());

  // The entries written two hours ago: pruned; a reader behind them reloads everything, a
  // reader past them reads on as before.
  auto aged = pg::Conn::open(uri_);
  ASSERT_TRUE(aged) << aged.error().message;
  ASSERT_TRUE((*aged)->script("age", "UPDATE changes SET at = at - 7200000000"));
  auto pruned = feed->prune(std::chrono::hours(1));
  ASSERT_TRUE(pruned) << pruned.error().message;
  EXPECT_EQ(*pruned, current->changes.size());
  auto gap = feed->read(*behind);
  ASSERT_TRUE(gap) << gap.error().message;
  ASSERT_EQ(gap->changes.size(), 1U);
  EXPECT_EQ(gap->changes[0].kind, catalog::ChangeKind::all);
  EXPECT_GE(gap->position, current->position);
  EXPECT_EQ(plan_changes(gap->changes, 16).load, ChangePlan::Load::everything);
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.1-py3-none-any.whl", 'b')));
  auto on = feed->read(current->position);
  ASSERT_TRUE(on) << on.error().message;
  ASSERT_FALSE(on->changes.empty());
  for (const auto& c : on->changes) {
    EXPECT_EQ(c.kind, catalog::ChangeKind::project);
    EXPECT_EQ(c.project, "demo-pkg");
  }
}
}  // namespace
}  // namespace wf::catalog
