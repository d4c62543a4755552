// The catalog module's SQLite wrapper, which the catalog and the job store share: one mapping
// of SQLite's failures (a full database or disk, a database that may not be written, a
// failing disk), checked with the codes themselves and with real failures, and transactions
// that keep nothing of a failed body.

#include "catalog/sqlite_db.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "wheelforge/catalog/jobs.hpp"

namespace wf::catalog::sqlite {
namespace {

namespace fs = std::filesystem;

TEST(SqliteErrorCode, OneMappingForEveryConnection) {
  // A full database or disk waits for space (507).
  EXPECT_EQ(error_code(SQLITE_FULL, 0), Errc::storage_full);
  // A database this process may not write waits for an administrator (503).
  EXPECT_EQ(error_code(SQLITE_READONLY, 0), Errc::unavailable);
  EXPECT_EQ(error_code(SQLITE_READONLY_DBMOVED, 0), Errc::unavailable);
  EXPECT_EQ(error_code(SQLITE_PERM, 0), Errc::unavailable);
  // I/O failures are what the system error behind them is.
  EXPECT_EQ(error_code(SQLITE_IOERR_WRITE, ENOSPC), Errc::storage_full);
  EXPECT_EQ(error_code(SQLITE_IOERR_FSYNC, EIO), Errc::io);
  EXPECT_EQ(error_code(SQLITE_IOERR, EROFS), Errc::unavailable);
  EXPECT_EQ(error_code(SQLITE_CANTOPEN, EACCES), Errc::unavailable);
  EXPECT_EQ(error_code(SQLITE_CANTOPEN, ENOENT), Errc::io);
  EXPECT_EQ(error_code(SQLITE_IOERR, 0), Errc::io);
  // Everything else is the server's failure (500), never the client's.
  EXPECT_EQ(error_code(SQLITE_BUSY, 0), Errc::io);
  EXPECT_EQ(error_code(SQLITE_CONSTRAINT_UNIQUE, 0), Errc::io);
  EXPECT_EQ(error_code(SQLITE_ERROR, EIO), Errc::io);  // not an I/O code: errno is stale

  const Error ro = failure(SQLITE_READONLY, 0, "/d/wheelforge.db", "sqlite: readonly");
  EXPECT_EQ(ro.code, Errc::unavailable);
  EXPECT_EQ(ro.message, "the catalog /d/wheelforge.db is not writable (sqlite: readonly)");
  const Error full = failure(SQLITE_FULL, 0, "/d/wheelforge.db", "insert file: full");
  EXPECT_EQ(full.code, Errc::storage_full);
  EXPECT_EQ(full.message, "insert file: full");
}

class SqliteDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-sqlite-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  [[nodiscard]] fs::path db_path() const { return dir_ / "test.db"; }

  Db open() {
    auto db = Db::open(db_path(), OpenMode::create);
    EXPECT_TRUE(db) << db.error().message;
    EXPECT_TRUE(db->exec("CREATE TABLE IF NOT EXISTS t (v TEXT NOT NULL)"));
    return std::move(*db);
  }
  static std::int64_t count(Db& db) {
    Stmt s(db, "SELECT COUNT(*) FROM t");
    EXPECT_EQ(s.step(), SQLITE_ROW);
    return s.i64(0);
  }

  fs::path dir_;
};

TEST_F(SqliteDbTest, ConnectionsGetTheSameSettings) {
  Db db = open();
  EXPECT_EQ(db.path(), db_path());
  Stmt mode(db, "PRAGMA journal_mode");
  ASSERT_EQ(mode.step(), SQLITE_ROW);
  EXPECT_EQ(mode.text(0), "wal");
  auto other = Db::open(db_path(), OpenMode::existing);
  ASSERT_TRUE(other) << other.error().message;
  for (const char* pragma : {"PRAGMA foreign_keys", "PRAGMA synchronous", "PRAGMA busy_timeout"}) {
    Stmt s(*other, pragma);
    ASSERT_EQ(s.step(), SQLITE_ROW) << pragma;
    EXPECT_NE(s.i64(0), 0) << pragma;
  }
  Stmt sync(*other, "PRAGMA synchronous");
  ASSERT_EQ(sync.step(), SQLITE_ROW);
  EXPECT_EQ(sync.i64(0), 2);  // FULL
  Stmt timeout(*other, "PRAGMA busy_timeout");
  ASSERT_EQ(timeout.step(), SQLITE_ROW);
  EXPECT_EQ(timeout.i64(0), 10000);
}

TEST_F(SqliteDbTest, AFullDatabaseIsStorageFull) {
  Db db = open();
  // The page limit stands in for a full disk: SQLite answers both with SQLITE_FULL.
  ASSERT_TRUE(db.exec("PRAGMA max_page_count = 8"));
  const std::string big(64 * 1024, 'x');
  Error failed{Errc::internal, "never failed"};
  for (int i = 0; i < 100; ++i) {
    Stmt s(db, "INSERT INTO t (v) VALUES (?)");
    s.bind(1, big);
    if (s.step() != SQLITE_DONE) {
      failed = db.error("insert");
      break;
    }
  }
  EXPECT_EQ(failed.code, Errc::storage_full) << failed.message;
  EXPECT_EQ(failed.message, "insert: database or disk is full");
  // exec() maps the same way.
  auto st = db.exec(("INSERT INTO t (v) VALUES ('" + big + "')").c_str());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, Errc::storage_full);
  EXPECT_EQ(st.error().message, "sqlite: database or disk is full");
}

TEST_F(SqliteDbTest, ADatabaseThatMayNotBeWrittenIsUnavailableAndNamed) {
  Db db = open();
  ASSERT_TRUE(db.exec("PRAGMA query_only = 1"));
  auto st = db.exec("INSERT INTO t (v) VALUES ('x')");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, Errc::unavailable);
  EXPECT_EQ(st.error().message, "the catalog " + db_path().string() +
                                    " is not writable (sqlite: attempt to write a readonly "
                                    "database)");
  Stmt s(db, "INSERT INTO t (v) VALUES ('y')");
  ASSERT_NE(s.step(), SQLITE_DONE);
  const Error e = db.error("insert");
  EXPECT_EQ(e.code, Errc::unavailable);
  EXPECT_EQ(e.message, "the catalog " + db_path().string() +
                           " is not writable (insert: attempt to write a readonly database)");
}

TEST_F(SqliteDbTest, OtherFailuresAreIoWithSqlitesReason) {
  Db db = open();
  Stmt bad(db, "SELECT v FROM nowhere");
  EXPECT_FALSE(bad.valid());
  EXPECT_EQ(bad.step(), SQLITE_MISUSE);
  const Error e = db.error("prepare lookup");
  EXPECT_EQ(e.code, Errc::io);
  EXPECT_EQ(e.message, "prepare lookup: no such table: nowhere");
  const Error errstr = db.error(SQLITE_CORRUPT, "back up into /x");
  EXPECT_EQ(errstr.code, Errc::io);
  EXPECT_EQ(errstr.message, "back up into /x: database disk image is malformed");
}

TEST_F(SqliteDbTest, OpeningAMissingDatabaseFailsWithItsPath) {
  auto db = Db::open(dir_ / "missing" / "test.db", OpenMode::existing);
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().code, Errc::io);
  EXPECT_EQ(db.error().message,
            "open " + (dir_ / "missing" / "test.db").string() + ": unable to open database file");
  // The job store opens the catalog's database, which must exist.
  auto jobs = open_sqlite_job_store(dir_ / "absent.db");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().code, Errc::io);
  EXPECT_EQ(jobs.error().message,
            "open " + (dir_ / "absent.db").string() + ": unable to open database file");
  EXPECT_FALSE(fs::exists(dir_ / "absent.db"));
}

TEST_F(SqliteDbTest, AWriteTransactionKeepsNothingOfAFailedOrUnwantedBody) {
  Db db = open();
  auto failed = db.write_transaction(
      [&]() -> Status {
        EXPECT_TRUE(db.exec("INSERT INTO t (v) VALUES ('a')"));
        return make_error(Errc::conflict, "changed my mind");
      },
      [](const auto&) { return true; });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, Errc::conflict);
  EXPECT_EQ(count(db), 0);

  auto unwanted = db.write_transaction(
      [&]() -> Result<int> {
        EXPECT_TRUE(db.exec("INSERT INTO t (v) VALUES ('b')"));
        return 7;
      },
      [](int) { return false; });
  ASSERT_TRUE(unwanted);
  EXPECT_EQ(*unwanted, 7);
  EXPECT_EQ(count(db), 0);

  auto kept = db.write_transaction(
      [&]() -> Result<std::int64_t> {
        EXPECT_TRUE(db.exec("INSERT INTO t (v) VALUES ('c')"));
        return db.last_insert_rowid();
      },
      [](std::int64_t) { return true; });
  ASSERT_TRUE(kept);
  EXPECT_EQ(count(db), 1);
  EXPECT_EQ(db.changes(), 1);
}

TEST_F(SqliteDbTest, AWriteTransactionThatCannotBeginSaysWhy) {
  Db db = open();
  ASSERT_TRUE(db.exec("PRAGMA busy_timeout = 0"));
  auto other = Db::open(db_path(), OpenMode::existing);
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->exec("BEGIN IMMEDIATE"));  // holds the write lock
  bool ran = false;
  auto st = db.write_transaction(
      [&]() -> Status {
        ran = true;
        return ok_status();
      },
      [](const auto&) { return true; });
  ASSERT_FALSE(st);
  EXPECT_FALSE(ran);
  EXPECT_EQ(st.error().code, Errc::io);
  EXPECT_EQ(st.error().message, "sqlite: database is locked");
  ASSERT_TRUE(other->exec("ROLLBACK"));
}

}  // namespace
}  // namespace wf::catalog::sqlite
