#include "catalog/sqlite_db.hpp"

#include "wheelforge/util/fs.hpp"

namespace wf::catalog::sqlite {

Errc error_code(int code, int system_errno) {
  switch (code & 0xff) {
    case SQLITE_FULL:
      return Errc::storage_full;
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Errc::unavailable;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return system_errno != 0 ? errno_code(system_errno) : Errc::io;
    default:
      return Errc::io;
  }
}

Error failure(int code, int system_errno, const std::filesystem::path& database,
              std::string message) {
  const Errc kind = error_code(code, system_errno);
  if (kind == Errc::unavailable) {
    return Error{kind, "the catalog " + database.string() + " is not writable (" + message + ")"};
  }
  return Error{kind, std::move(message)};
}

Stmt::Stmt(const Db& db, const char* sql) {
  if (sqlite3_prepare_v2(db.get(), sql, -1, &stmt_, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }
}

Stmt::~Stmt() {
  sqlite3_finalize(stmt_);
}

Stmt& Stmt::bind(int i, std::string_view s) {
  sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind(int i, const std::optional<std::string>& s) {
  if (s) return bind(i, std::string_view(*s));
  return bind_null(i);
}

Stmt& Stmt::bind(int i, std::int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Stmt& Stmt::bind(int i, std::optional<int> v) {
  if (v) return bind(i, static_cast<std::int64_t>(*v));
  return bind_null(i);
}

Stmt& Stmt::bind(int i, std::optional<std::int64_t> v) {
  if (v) return bind(i, *v);
  return bind_null(i);
}

Stmt& Stmt::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

int Stmt::step() {
  return stmt_ != nullptr ? sqlite3_step(stmt_) : SQLITE_MISUSE;
}

std::int64_t Stmt::i64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

std::optional<int> Stmt::opt_int(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return static_cast<int>(sqlite3_column_int64(stmt_, col));
}

std::optional<std::int64_t> Stmt::opt_i64(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(stmt_, col);
}

std::optional<std::string> Stmt::opt_text(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return text(col);
}

Result<Db> Db::open(const std::filesystem::path& path, OpenMode mode) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (mode == OpenMode::create) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw, path);  // closes the handle on every path, also a failed open's
  if (rc != SQLITE_OK) {
    if (raw == nullptr)
      return make_error(Errc::internal, "open " + path.string() + ": out of memory");
    return failure(rc, sqlite3_system_errno(raw), path,
                   "open " + path.string() + ": " + sqlite3_errmsg(raw));
  }
  // Messages name the file as SQLite resolved it (absolute), whatever the caller passed.
  if (const char* file = sqlite3_db_filename(raw, "main"); file != nullptr && *file != '\0') {
    db.path_ = file;
  }
  if (mode != OpenMode::copy_target) {
    for (const char* pragma : {"PRAGMA busy_timeout=10000", "PRAGMA journal_mode=WAL",
                               "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      if (auto st = db.exec(pragma); !st) return st.error();
    }
  }
  return db;
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

Error Db::error(std::string_view what) const {
  std::string message(what);
  message += ": ";
  message += sqlite3_errmsg(db_);
  return failure(sqlite3_extended_errcode(db_), sqlite3_system_errno(db_), path_,
                 std::move(message));
}

Error Db::error(int code, std::string_view what) const {
  std::string message(what);
  message += ": ";
  message += sqlite3_errstr(code);
  return failure(code, sqlite3_system_errno(db_), path_, std::move(message));
}

Status Db::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = std::string("sqlite: ") + (err ? err : "unknown error");
    sqlite3_free(err);
    return failure(sqlite3_extended_errcode(db_), sqlite3_system_errno(db_), path_,
                   std::move(message));
  }
  return ok_status();
}

std::int64_t Db::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

int Db::changes() const {
  return sqlite3_changes(db_);
}

}  // namespace wf::catalog::sqlite
