#include "catalog/pg_conn.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <cstdlib>
#include <optional>
#include <utility>

namespace wf::catalog::pg {

namespace {

std::string trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// SQLSTATEs of a server that is going away or cannot take the connection (class 08: connection
// exceptions; 57P01-57P03: shutting down, crashed, starting; 53300: too many connections).
bool unavailable_state(std::string_view state) {
  return state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03" ||
         state == "53300";
}

void quiet_notices(void* /*arg*/, const char* /*message*/) {}

}  // namespace

bool is_uri(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string describe(std::string_view uri) {
  char* err = nullptr;
  const std::string text(uri);
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return "PostgreSQL at <unparsable URI>";
  }
  std::string host;
  std::string port;
  std::string dbname;
  std::string user;
  for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key = o->keyword;
    if (key == "host") host = o->val;
    if (key == "hostaddr" && host.empty()) host = o->val;
    if (key == "port") port = o->val;
    if (key == "dbname") dbname = o->val;
    if (key == "user") user = o->val;
  }
  PQconninfoFree(opts);
  if (host.empty()) host = "localhost";
  if (port.empty()) port = "5432";
  if (dbname.empty()) dbname = user;
  return "PostgreSQL at " + host + ":" + port + "/" + dbname;
}

std::string password(std::string_view uri) {
  char* err = nullptr;
  const std::string text(uri);
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return {};
  }
  std::string out;
  for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && std::string_view(o->keyword) == "password") out = o->val;
  }
  PQconninfoFree(opts);
  return out;
}

namespace {

/// Where the password of `uri`'s userinfo lies: [colon, at) of "user:password@"; nullopt when
/// the URI has none.
std::optional<std::pair<std::size_t, std::size_t>> userinfo_password(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string::npos) return std::nullopt;
  const auto start = scheme + 3;
  const auto end = uri.find_first_of("/?", start);
  const auto at = uri.rfind('@', end == std::string::npos ? std::string::npos : end);
  if (at == std::string::npos || at < start) return std::nullopt;
  const auto colon = uri.find(':', start);
  if (colon == std::string::npos || colon >= at) return std::nullopt;
  return std::pair{colon, at};
}

}  // namespace

std::string redact_uri(std::string_view uri) {
  std::string out(uri);
  if (const auto pw = userinfo_password(out)) {
    out.replace(pw->first + 1, pw->second - pw->first - 1, "***");
  }
  // A password given as a query parameter.
  for (std::size_t pos = out.find("password=");;) {
    if (pos == std::string::npos) break;
    if (pos > 0 && out[pos - 1] != '?' && out[pos - 1] != '&') {
      pos = out.find("password=", pos + 1);
      continue;
    }
    const auto value = pos + 9;
    const auto stop = out.find('&', value);
    out.replace(value, (stop == std::string::npos ? out.size() : stop) - value, "***");
    pos = out.find("password=", value);
  }
  return out;
}

std::string strip_password(std::string_view uri) {
  std::string out(uri);
  if (const auto pw = userinfo_password(out)) out.erase(pw->first, pw->second - pw->first);
  const auto query = out.find('?');
  if (query == std::string::npos) return out;
  std::string kept;
  for (std::size_t pos = query + 1; pos <= out.size();) {
    const auto stop = std::min(out.find('&', pos), out.size());
    if (stop > pos && !std::string_view(out).substr(pos, stop - pos).starts_with("password=")) {
      kept += kept.empty() ? "?" : "&";
      kept.append(out, pos, stop - pos);
    }
    pos = stop + 1;
  }
  return out.substr(0, query) + kept;
}

Params& Params::add(const std::vector<std::string>& texts) {
  std::string literal = "{";
  for (const auto& text : texts) {
    if (literal.size() > 1) literal += ',';
    literal += '"';
    for (const char c : text) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  literal += '}';
  values_.emplace_back(std::move(literal));
  return *this;
}

Params& Params::add(std::string_view s) {
  values_.emplace_back(std::string(s));
  return *this;
}

Params& Params::add(const std::optional<std::string>& s) {
  values_.push_back(s);
  return *this;
}

Params& Params::add(std::int64_t v) {
  values_.emplace_back(std::to_string(v));
  return *this;
}

Params& Params::add(std::optional<std::int64_t> v) {
  if (v) return add(*v);
  return null();
}

Params& Params::add(std::optional<int> v) {
  if (v) return add(static_cast<std::int64_t>(*v));
  return null();
}

Params& Params::null() {
  values_.emplace_back(std::nullopt);
  return *this;
}

void Rows::free_result(pg_result* res) {
  PQclear(res);
}

int Rows::size() const {
  return res_ ? PQntuples(res_.get()) : 0;
}

std::int64_t Rows::affected() const {
  if (!res_) return 0;
  const char* n = PQcmdTuples(res_.get());
  return n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
}

bool Rows::null(int row, int col) const {
  return PQgetisnull(res_.get(), row, col) != 0;
}

std::string Rows::text(int row, int col) const {
  if (null(row, col)) return {};
  return {PQgetvalue(res_.get(), row, col),
          static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
}

std::int64_t Rows::i64(int row, int col) const {
  if (null(row, col)) return 0;
  const char* v = PQgetvalue(res_.get(), row, col);
  if (v[0] == 't') return 1;  // a boolean
  if (v[0] == 'f') return 0;
  return std::strtoll(v, nullptr, 10);
}

std::optional<std::string> Rows::opt_text(int row, int col) const {
  if (null(row, col)) return std::nullopt;
  return text(row, col);
}

std::optional<std::int64_t> Rows::opt_i64(int row, int col) const {
  if (null(row, col)) return std::nullopt;
  return i64(row, col);
}

std::optional<int> Rows::opt_int(int row, int col) const {
  if (null(row, col)) return std::nullopt;
  return static_cast<int>(i64(row, col));
}

Result<std::unique_ptr<Conn>> Conn::open(std::string uri) {
  std::string name = describe(uri);
  std::unique_ptr<Conn> conn(new Conn(std::move(uri), std::move(name)));
  if (auto st = conn->ensure_connected(); !st) return st.error();
  return conn;
}

std::unique_ptr<Conn> Conn::lazy(std::string uri) {
  std::string name = describe(uri);
  return std::unique_ptr<Conn>(new Conn(std::move(uri), std::move(name)));
}

Conn::~Conn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

Status Conn::ensure_connected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return ok_status();
  if (in_tx_) {
    return make_error(Errc::unavailable,
                      name_ + " is unavailable: the connection was lost during a transaction");
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  // Later keywords override earlier ones, and the URI expands where `dbname` stands: what the
  // URI says wins over these defaults.
  const char* keys[] = {"connect_timeout", "application_name", "client_encoding", "dbname",
                        nullptr};
  const char* values[] = {"5", "wheelforge", "UTF8", uri_.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    std::string why = conn_ != nullptr ? trimmed(PQerrorMessage(conn_)) : "out of memory";
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
    return make_error(Errc::unavailable, name_ + " is unavailable: " + why);
  }
  PQsetNoticeProcessor(conn_, &quiet_notices, nullptr);
  ++connects_;
  return ok_status();
}

void Conn::after_commit() {
  if (after_commit_.empty() || conn_ == nullptr) return;
  PQclear(PQexec(conn_, after_commit_.c_str()));
}

Result<bool> Conn::wait_notification(std::chrono::milliseconds timeout) {
  if (auto st = ensure_connected(); !st) return st.error();
  const auto lost = [this](const char* what) -> Error {
    std::string why = trimmed(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    return make_error(Errc::unavailable, name_ + " is unavailable (" + what + "): " + why);
  };
  const auto drain = [this]() {
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      any = true;
      PQfreemem(n);
    }
    return any;
  };
  if (PQconsumeInput(conn_) == 0) return lost("read notifications");
  if (drain()) return true;
  pollfd pfd{PQsocket(conn_), POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready < 0) return false;  // a signal: the caller looks again
  if (ready == 0) return false;
  if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK) {
    return lost("read notifications");
  }
  return drain();
}

Error Conn::failure(std::string_view what, pg_result* res) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  last_sqlstate_ = state != nullptr ? state : "";
  std::string why = trimmed(res != nullptr ? PQresultErrorMessage(res) : nullptr);
  if (why.empty() && conn_ != nullptr) why = trimmed(PQerrorMessage(conn_));
  const bool lost = conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK;
  if (lost || unavailable_state(last_sqlstate_)) {
    if (conn_ != nullptr && lost) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    return make_error(Errc::unavailable,
                      name_ + " is unavailable (" + std::string(what) + "): " + why);
  }
  Errc code = Errc::io;
  if (last_sqlstate_ == "53100") code = Errc::storage_full;
  if (last_sqlstate_ == "23505") code = Errc::conflict;
  return make_error(code, name_ + ": " + std::string(what) + ": " + why);
}

Result<Rows> Conn::exec(std::string_view what, const std::string& sql, const Params& params) {
  if (auto st = ensure_connected(); !st) return st.error();
  std::vector<const char*> values;
  values.reserve(params.values().size());
  for (const auto& v : params.values()) values.push_back(v ? v->c_str() : nullptr);
  pg_result* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                values.data(), nullptr, nullptr, 0);
  const ExecStatusType status = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Rows(res);
  Error e = failure(what, res);
  PQclear(res);
  return e;
}

Status Conn::script(std::string_view what, const std::string& sql) {
  if (auto st = ensure_connected(); !st) return st.error();
  pg_result* res = PQexec(conn_, sql.c_str());
  const ExecStatusType status = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    PQclear(res);
    return ok_status();
  }
  Error e = failure(what, res);
  PQclear(res);
  return e;
}

Status Conn::begin(bool read_only, WriteLock mode) {
  last_sqlstate_.clear();
  if (auto st = script("begin", read_only ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                                          : "BEGIN ISOLATION LEVEL READ COMMITTED");
      !st) {
    return st;
  }
  in_tx_ = true;
  const std::string& lock = mode == WriteLock::exclusive ? exclusive_lock_ : shared_lock_;
  if (!read_only && !lock.empty()) {
    if (auto r = exec("take the write lock", lock); !r) {
      (void)rollback();
      return r.error();
    }
  }
  return ok_status();
}

Status Conn::commit() {
  if (conn_ == nullptr) {
    in_tx_ = false;
    return make_error(Errc::unavailable,
                      name_ + " is unavailable: the connection was lost during a transaction");
  }
  auto st = script("commit", "COMMIT");
  if (st || conn_ == nullptr) in_tx_ = false;
  return st;
}

Status Conn::rollback() {
  if (conn_ == nullptr) {
    in_tx_ = false;
    return ok_status();
  }
  pg_result* res = PQexec(conn_, "ROLLBACK");
  PQclear(res);
  in_tx_ = false;
  return ok_status();
}

bool Conn::retryable() const {
  return last_sqlstate_ == "40001" || last_sqlstate_ == "40P01";
}

}  // namespace wf::catalog::pg
