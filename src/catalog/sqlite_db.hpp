#pragma once
// The catalog module's one SQLite wrapper, private to it: the catalog and the job store open
// their connections, run statements and transactions, and turn SQLite's failures into Errors
// through it, so that both answer a full disk or a read-only database the same way.
// Every function blocks on SQLite. A Db is one connection: not thread-safe, its owner
// serializes calls (the catalog and the job store each hold a mutex).

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::catalog::sqlite {

/// What a failed SQLite call means for the server: SQLITE_FULL -> storage_full (507);
/// SQLITE_READONLY, SQLITE_PERM -> unavailable (503: only an administrator can make the
/// database writable); SQLITE_IOERR and SQLITE_CANTOPEN -> what the system error behind
/// them is (errno_code(): ENOSPC storage_full, EROFS/EACCES/EPERM unavailable, else io);
/// everything else io (500). `code` may be an extended result code; `system_errno` is
/// sqlite3_system_errno() of the connection (0: none).
[[nodiscard]] Errc error_code(int code, int system_errno);

/// The Error for a failure with that code: error_code()'s kind, and `message`; an unavailable
/// one names the database: "the catalog <path> is not writable (<message>)".
[[nodiscard]] Error failure(int code, int system_errno, const std::filesystem::path& database,
                            std::string message);

class Db;

/// A prepared statement, finalized on destruction. A statement that did not prepare is
/// invalid: step() returns SQLITE_MISUSE and Db::error() names SQLite's reason.
class Stmt {
 public:
  Stmt(const Db& db, const char* sql);
  Stmt(const Db& db, const std::string& sql) : Stmt(db, sql.c_str()) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  [[nodiscard]] bool valid() const { return stmt_ != nullptr; }
  Stmt& bind(int i, std::string_view s);
  Stmt& bind(int i, const std::string& s) { return bind(i, std::string_view(s)); }
  Stmt& bind(int i, const char* s) { return bind(i, std::string_view(s)); }
  Stmt& bind(int i, const std::optional<std::string>& s);
  Stmt& bind(int i, std::int64_t v);
  Stmt& bind(int i, std::optional<int> v);
  Stmt& bind(int i, std::optional<std::int64_t> v);
  Stmt& bind_null(int i);
  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step();

  [[nodiscard]] std::int64_t i64(int col) const;
  [[nodiscard]] std::string text(int col) const;
  [[nodiscard]] std::optional<int> opt_int(int col) const;
  [[nodiscard]] std::optional<std::int64_t> opt_i64(int col) const;
  [[nodiscard]] std::optional<std::string> opt_text(int col) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

/// How Db::open opens a database.
enum class OpenMode {
  create,       ///< the catalog: created when missing, with the connection settings
  existing,     ///< must exist (the job store on the migrated catalog), same settings
  copy_target,  ///< an existing empty file a backup copies pages into: no settings
};

/// One connection, closed on destruction.
class Db {
 public:
  /// Opens `path`. Every connection but a copy target gets the same settings: a busy timeout
  /// of 10 s (set first: switching to WAL waits for locks too, e.g. while another process
  /// recovers the WAL of a writer that was killed), WAL, synchronous=FULL, foreign keys.
  /// Failures as failure() maps them, with the message "open <path>: <SQLite's reason>".
  [[nodiscard]] static Result<Db> open(const std::filesystem::path& path, OpenMode mode);

  Db(Db&& other) noexcept : db_(other.db_), path_(std::move(other.path_)) { other.db_ = nullptr; }
  Db& operator=(Db&&) = delete;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  [[nodiscard]] sqlite3* get() const { return db_; }
  /// The database file, absolute (as SQLite resolved it).
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  /// The connection's last failure: "<what>: <SQLite's message>", mapped by failure().
  [[nodiscard]] Error error(std::string_view what) const;
  /// A failure whose code a call returned without recording it on this connection (the
  /// backup API): "<what>: <sqlite3_errstr(code)>".
  [[nodiscard]] Error error(int code, std::string_view what) const;

  /// Runs SQL without results; fails with "sqlite: <SQLite's message>".
  [[nodiscard]] Status exec(const char* sql);
  [[nodiscard]] Status exec(const std::string& sql) { return exec(sql.c_str()); }

  [[nodiscard]] std::int64_t last_insert_rowid() const;
  /// Rows changed by the last statement.
  [[nodiscard]] int changes() const;

  /// Runs `body` (which returns a Result or Status) inside BEGIN IMMEDIATE; commits when it
  /// succeeded and `keep(value)` says so, rolls back otherwise. Returns the body's result, or
  /// the BEGIN or COMMIT error.
  template <class Body, class Keep>
  auto write_transaction(Body&& body, Keep&& keep) -> decltype(body()) {
    if (auto st = exec("BEGIN IMMEDIATE"); !st) return st.error();
    auto result = body();
    if (!result || !keep(*result)) {
      (void)exec("ROLLBACK");
      return result;
    }
    if (auto st = exec("COMMIT"); !st) {
      (void)exec("ROLLBACK");
      return st.error();
    }
    return result;
  }

  /// Runs `body` inside one read transaction (BEGIN ... COMMIT): its reads see one snapshot.
  template <class Body>
  auto read_transaction(Body&& body) -> decltype(body()) {
    if (auto st = exec("BEGIN"); !st) return st.error();
    auto result = body();
    (void)exec("COMMIT");
    return result;
  }

 private:
  Db(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

}  // namespace wf::catalog::sqlite
