#pragma once
// The catalog module's one libpq wrapper, private to it: the PostgreSQL catalog and job store
// open their connection, run parameterized statements (text parameters, text results) and
// transactions, and turn PostgreSQL's failures into Errors through it.
// Every function blocks on the database. A Conn is one connection: not thread-safe, its owner
// serializes calls (the catalog and the job store each hold a mutex). A connection that broke
// (the server restarted, the network dropped) fails its call with Errc::unavailable naming the
// database; the next call connects again.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

struct pg_conn;
struct pg_result;

namespace wf::catalog::pg {

/// True for a libpq connection URI ("postgresql://..." or "postgres://...").
[[nodiscard]] bool is_uri(std::string_view location);

/// "PostgreSQL at HOST:PORT/DBNAME" for a connection URI (libpq's defaults filled in; never
/// the password). A URI libpq cannot parse is named "PostgreSQL at <unparsable URI>".
[[nodiscard]] std::string describe(std::string_view uri);

/// The password `uri` carries (libpq's parse of it), empty when none.
[[nodiscard]] std::string password(std::string_view uri);

/// `uri` with the password (if any) replaced by "***": for logs and `config check`.
[[nodiscard]] std::string redact_uri(std::string_view uri);
/// `uri` without its password (userinfo or ?password=), to put on a command line.
[[nodiscard]] std::string strip_password(std::string_view uri);

/// Statement parameters, all sent as text ($1, $2, ... in order of add()).
class Params {
 public:
  Params& add(std::string_view s);
  Params& add(const char* s) { return add(std::string_view(s)); }
  Params& add(const std::string& s) { return add(std::string_view(s)); }
  Params& add(const std::optional<std::string>& s);
  Params& add(std::int64_t v);
  Params& add(int v) { return add(static_cast<std::int64_t>(v)); }
  Params& add(std::optional<std::int64_t> v);
  Params& add(std::optional<int> v);
  /// A text[] (an array literal, each element quoted): `= ANY($n::text[])`.
  Params& add(const std::vector<std::string>& texts);
  Params& null();

  [[nodiscard]] const std::vector<std::optional<std::string>>& values() const { return values_; }

 private:
  std::vector<std::optional<std::string>> values_;
};

/// The rows a statement returned (owned; freed on destruction).
class Rows {
 public:
  Rows() = default;
  explicit Rows(pg_result* res) : res_(res, &free_result) {}

  [[nodiscard]] int size() const;
  [[nodiscard]] bool empty() const { return size() == 0; }
  /// Rows changed by an INSERT, UPDATE or DELETE.
  [[nodiscard]] std::int64_t affected() const;

  [[nodiscard]] bool null(int row, int col) const;
  [[nodiscard]] std::string text(int row, int col) const;
  [[nodiscard]] std::int64_t i64(int row, int col) const;
  [[nodiscard]] std::optional<std::string> opt_text(int row, int col) const;
  [[nodiscard]] std::optional<std::int64_t> opt_i64(int row, int col) const;
  [[nodiscard]] std::optional<int> opt_int(int row, int col) const;

 private:
  static void free_result(pg_result* res);
  std::shared_ptr<pg_result> res_;
};

/// One row of Rows, read with the accessors of sqlite::Stmt (so that row mappings serve both).
class Row {
 public:
  Row(const Rows& rows, int row) : rows_(&rows), row_(row) {}
  [[nodiscard]] std::int64_t i64(int col) const { return rows_->i64(row_, col); }
  [[nodiscard]] std::string text(int col) const { return rows_->text(row_, col); }
  [[nodiscard]] std::optional<int> opt_int(int col) const { return rows_->opt_int(row_, col); }
  [[nodiscard]] std::optional<std::int64_t> opt_i64(int col) const {
    return rows_->opt_i64(row_, col);
  }
  [[nodiscard]] std::optional<std::string> opt_text(int col) const {
    return rows_->opt_text(row_, col);
  }

 private:
  const Rows* rows_;
  int row_;
};

/// One connection to one database.
class Conn {
 public:
  /// Connects to `uri` (a libpq URI; connect_timeout defaults to 5 s). Errc::unavailable
  /// naming the database when it cannot be reached or refuses the connection.
  [[nodiscard]] static Result<std::unique_ptr<Conn>> open(std::string uri);
  /// A Conn to `uri` that connects at its first call.
  [[nodiscard]] static std::unique_ptr<Conn> lazy(std::string uri);

  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  /// "PostgreSQL at HOST:PORT/DBNAME".
  [[nodiscard]] const std::string& name() const { return name_; }

  /// Runs one statement with parameters. Failures: unavailable (connection lost or refused,
  /// the server shutting down), storage_full (disk full), conflict (a unique constraint),
  /// io otherwise; every message starts with name() and says `what`.
  [[nodiscard]] Result<Rows> exec(std::string_view what, const std::string& sql,
                                  const Params& params = {});
  /// Runs SQL without parameters (may hold several statements).
  [[nodiscard]] Status script(std::string_view what, const std::string& sql);

  /// How a write transaction keeps out the others. `exclusive`: it waits for every other
  /// writer and runs alone. `shared`: it runs beside other shared writers (each locks what its
  /// checks depend on itself) and only an exclusive one keeps it waiting.
  enum class WriteLock { exclusive, shared };

  /// SQL run right after BEGIN in every write transaction, per WriteLock (e.g. an advisory
  /// lock taken exclusively or shared); empty: none.
  void set_write_locks(std::string exclusive, std::string shared) {
    exclusive_lock_ = std::move(exclusive);
    shared_lock_ = std::move(shared);
  }

  /// SQL run after each committed write transaction, outside it (the change feed's NOTIFY);
  /// its failure is ignored (readers also poll). Empty: none.
  void set_after_commit(std::string sql) { after_commit_ = std::move(sql); }

  /// How many times this Conn has connected: a LISTEN is lost with the connection, so a
  /// listener compares this number to the one it listened on.
  [[nodiscard]] std::uint64_t connects() const { return connects_; }

  /// Waits up to `timeout` for a notification on a channel this connection LISTENs on, and
  /// consumes every one that arrived (many become one wake-up). True when at least one came,
  /// false on timeout; Errc::unavailable when the connection is lost (the next exec() connects
  /// again).
  [[nodiscard]] Result<bool> wait_notification(std::chrono::milliseconds timeout);

  /// Runs `body` (which returns a Result or Status) inside a READ COMMITTED transaction that
  /// first takes the write lock in `mode`; commits when it succeeded and `keep(value)` says
  /// so, rolls back otherwise. A serialization failure or deadlock runs the body again (at
  /// most 5 times). Returns the body's result, or the BEGIN or COMMIT error.
  template <class Body, class Keep>
  auto write_transaction(Body&& body, Keep&& keep, WriteLock mode = WriteLock::exclusive)
      -> decltype(body()) {
    for (int attempt = 1;; ++attempt) {
      if (auto st = begin(false, mode); !st) return st.error();
      auto result = body();
      if (!result || !keep(*result)) {
        (void)rollback();
        if (!result && retryable() && attempt < kAttempts) continue;
        return result;
      }
      if (auto st = commit(); !st) {
        (void)rollback();
        if (retryable() && attempt < kAttempts) continue;
        return st.error();
      }
      after_commit();
      return result;
    }
  }

  /// Runs `body` inside one REPEATABLE READ, READ ONLY transaction: its reads see one
  /// snapshot.
  template <class Body>
  auto read_transaction(Body&& body) -> decltype(body()) {
    if (auto st = begin(true, WriteLock::shared); !st) return st.error();
    auto result = body();
    (void)commit();
    return result;
  }

 private:
  static constexpr int kAttempts = 5;
  Conn(std::string uri, std::string name) : uri_(std::move(uri)), name_(std::move(name)) {}
  /// Connects when there is no usable connection.
  Status ensure_connected();
  /// The Error of the failed call, classified; drops a broken connection.
  Error failure(std::string_view what, pg_result* res);
  Status begin(bool read_only, WriteLock mode);
  Status commit();
  Status rollback();
  /// Runs after_commit_ (if any), ignoring its failure.
  void after_commit();
  /// True when the last failure was a serialization failure or a deadlock.
  [[nodiscard]] bool retryable() const;

  std::string uri_;
  std::string name_;
  std::string exclusive_lock_;
  std::string shared_lock_;
  std::string after_commit_;
  std::uint64_t connects_ = 0;
  std::string last_sqlstate_;
  bool in_tx_ = false;  ///< between BEGIN and COMMIT/ROLLBACK: no silent reconnect
  pg_conn* conn_ = nullptr;
};

}  // namespace wf::catalog::pg
