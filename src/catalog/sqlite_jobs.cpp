#include <sqlite3.h>

#include <mutex>

#include "wheelforge/catalog/jobs.hpp"

namespace wf::catalog {
namespace {

Error db_error(sqlite3* db, std::string_view what) {
  return make_error(Errc::io, std::string(what) + ": " + sqlite3_errmsg(db));
}

class Query {
 public:
  Query(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  ~Query() { sqlite3_finalize(stmt_); }
  [[nodiscard]] bool valid() const { return stmt_ != nullptr; }
  Query& text(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& integer(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(stmt_); }
  [[nodiscard]] std::int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  [[nodiscard]] std::string str(int c) const {
    const auto* p = sqlite3_column_text(stmt_, c);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  [[nodiscard]] std::optional<std::int64_t> opt_i64(int c) const {
    if (sqlite3_column_type(stmt_, c) == SQLITE_NULL) return std::nullopt;
    return i64(c);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kJobColumns =
    "id, build_id, recipe, version, python, torch, cuda, state, reason, attempts, max_jobs,"
    " nvcc_threads, wheel, created_at, started_at, finished_at, nvcc_path, nvcc_version,"
    " torch_version, torch_cuda, python_path, python_version, build_number, glibc_floor,"
    " executor_job";

JobRecord read_job(const Query& q) {
  JobRecord j;
  j.id = q.i64(0);
  j.build_id = q.i64(1);
  j.recipe = q.str(2);
  j.version = q.str(3);
  j.cell.python = q.str(4);
  j.cell.torch = core::parse_torch_series(q.str(5)).value_or(core::TorchSeries{});
  j.cell.cuda = core::parse_cuda_version(q.str(6)).value_or(core::CudaVersion{});
  j.state = core::parse_job_state(q.str(7)).value_or(core::JobState::failed);
  j.reason = q.str(8);
  j.attempts = static_cast<int>(q.i64(9));
  j.max_jobs = static_cast<unsigned>(q.i64(10));
  j.nvcc_threads = static_cast<unsigned>(q.i64(11));
  j.wheel = q.str(12);
  j.created_at = q.i64(13);
  j.started_at = q.opt_i64(14);
  j.finished_at = q.opt_i64(15);
  j.toolchain.nvcc = q.str(16);
  j.toolchain.nvcc_version = q.str(17);
  j.toolchain.torch_version = q.str(18);
  j.toolchain.torch_cuda = q.str(19);
  j.toolchain.python = q.str(20);
  j.toolchain.python_version = q.str(21);
  j.build_number = static_cast<std::uint64_t>(q.i64(22));
  j.glibc_floor = q.str(23);
  j.executor_job = q.str(24);
  return j;
}

BuildRecord read_build(const Query& q) {
  return BuildRecord{q.i64(0), q.str(1), q.str(2), q.i64(3) != 0, q.i64(4) != 0, q.i64(5)};
}

class SqliteJobStore final : public JobStore {
 public:
  explicit SqliteJobStore(sqlite3* db) : db_(db) {}
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;
  ~SqliteJobStore() override { sqlite3_close_v2(db_); }

  Result<std::pair<BuildRecord, std::vector<JobRecord>>> create_build(
      const BuildRecord& build, const std::vector<core::Cell>& cells) override {
    std::lock_guard lock(mu_);
    if (!exec("BEGIN IMMEDIATE")) return db_error(db_, "begin");
    BuildRecord b = build;
    b.created_at = now_micros();
    Query ins(db_,
              "INSERT INTO builds (recipe, version, force, yank_superseded, created_at)"
              " VALUES (?, ?, ?, ?, ?)");
    ins.text(1, b.recipe)
        .text(2, b.version)
        .integer(3, b.force ? 1 : 0)
        .integer(4, b.yank_superseded ? 1 : 0)
        .integer(5, b.created_at);
    if (ins.step() != SQLITE_DONE) return rollback("insert build");
    b.id = sqlite3_last_insert_rowid(db_);
    std::vector<JobRecord> jobs;
    for (const auto& cell : cells) {
      JobRecord j;
      j.build_id = b.id;
      j.recipe = b.recipe;
      j.version = b.version;
      j.cell = cell;
      j.created_at = b.created_at;
      Query q(db_,
              "INSERT INTO jobs (build_id, recipe, version, python, torch, cuda, state, created_at)"
              " VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)");
      q.integer(1, b.id)
          .text(2, b.recipe)
          .text(3, b.version)
          .text(4, cell.python)
          .text(5, cell.torch.str())
          .text(6, cell.cuda.str())
          .integer(7, j.created_at);
      if (q.step() != SQLITE_DONE) return rollback("insert job");
      j.id = sqlite3_last_insert_rowid(db_);
      jobs.push_back(std::move(j));
    }
    if (!exec("COMMIT")) return rollback("commit build");
    return std::pair{std::move(b), std::move(jobs)};
  }

  Result<std::vector<BuildRecord>> list_builds(std::size_t limit) override {
    std::lock_guard lock(mu_);
    Query q(db_,
            "SELECT id, recipe, version, force, yank_superseded, created_at FROM builds"
            " ORDER BY id DESC LIMIT ?");
    q.integer(1, static_cast<std::int64_t>(limit));
    std::vector<BuildRecord> out;
    while (q.step() == SQLITE_ROW) out.push_back(read_build(q));
    return out;
  }

  Result<std::optional<BuildRecord>> find_build(std::int64_t id) override {
    std::lock_guard lock(mu_);
    Query q(db_,
            "SELECT id, recipe, version, force, yank_superseded, created_at FROM builds"
            " WHERE id = ?");
    q.integer(1, id);
    if (q.step() == SQLITE_ROW) return std::optional<BuildRecord>(read_build(q));
    return std::optional<BuildRecord>();
  }

  Result<std::vector<JobRecord>> jobs_of_build(std::int64_t build_id) override {
    std::lock_guard lock(mu_);
    const std::string sql =
        std::string("SELECT ") + kJobColumns + " FROM jobs WHERE build_id = ? ORDER BY id";
    Query q(db_, sql.c_str());
    q.integer(1, build_id);
    std::vector<JobRecord> out;
    while (q.step() == SQLITE_ROW) out.push_back(read_job(q));
    return out;
  }

  Result<std::optional<JobRecord>> find_job(std::int64_t id) override {
    std::lock_guard lock(mu_);
    return find_job_locked(id);
  }

  Result<std::vector<JobRecord>> jobs_in_state(core::JobState state) override {
    std::lock_guard lock(mu_);
    const std::string sql =
        std::string("SELECT ") + kJobColumns + " FROM jobs WHERE state = ? ORDER BY id";
    Query q(db_, sql.c_str());
    q.text(1, core::state_name(state));
    std::vector<JobRecord> out;
    while (q.step() == SQLITE_ROW) out.push_back(read_job(q));
    return out;
  }

  Result<JobRecord> transition(std::int64_t id, core::JobState to,
                               const std::string& reason) override {
    std::lock_guard lock(mu_);
    if (!exec("BEGIN IMMEDIATE")) return db_error(db_, "begin");
    auto job = find_job_locked(id);
    if (!job || !job->has_value()) {
      (void)exec("ROLLBACK");
      if (!job) return job.error();
      return make_error(Errc::not_found, "no such job: " + std::to_string(id));
    }
    JobRecord j = **job;
    if (!core::can_transition(j.state, to)) {
      (void)exec("ROLLBACK");
      return make_error(Errc::conflict, "job " + std::to_string(id) + " is " +
                                            std::string(core::state_name(j.state)) +
                                            ", cannot become " + std::string(core::state_name(to)));
    }
    const Micros now = now_micros();
    if (j.state == core::JobState::queued && to != core::JobState::cancelled) j.started_at = now;
    if (core::is_terminal(to)) j.finished_at = now;
    if (to == core::JobState::queued) {
      j.started_at.reset();
      j.finished_at.reset();
    }
    j.state = to;
    if (!reason.empty() || to == core::JobState::queued) j.reason = reason;
    Query u(db_,
            "UPDATE jobs SET state = ?, reason = ?, started_at = ?, finished_at = ? WHERE id = ?");
    u.text(1, core::state_name(to)).text(2, j.reason);
    if (j.started_at) {
      u.integer(3, *j.started_at);
    }
    if (j.finished_at) {
      u.integer(4, *j.finished_at);
    }
    u.integer(5, id);
    if (u.step() != SQLITE_DONE) return rollback("update job");
    if (!exec("COMMIT")) return rollback("commit job");
    return j;
  }

  Status record_attempt(std::int64_t id, unsigned max_jobs, unsigned nvcc_threads) override {
    std::lock_guard lock(mu_);
    Query u(db_,
            "UPDATE jobs SET attempts = attempts + 1, max_jobs = ?, nvcc_threads = ? WHERE id = ?");
    u.integer(1, max_jobs).integer(2, nvcc_threads).integer(3, id);
    if (u.step() != SQLITE_DONE) return db_error(db_, "record attempt");
    return ok_status();
  }

  Status record_wheel(std::int64_t id, const std::string& wheel,
                      std::uint64_t build_number) override {
    std::lock_guard lock(mu_);
    Query u(db_, "UPDATE jobs SET wheel = ?, build_number = ? WHERE id = ?");
    u.text(1, wheel).integer(2, static_cast<std::int64_t>(build_number)).integer(3, id);
    if (u.step() != SQLITE_DONE) return db_error(db_, "record wheel");
    return ok_status();
  }

  Status record_glibc_floor(std::int64_t id, const std::string& glibc_floor) override {
    std::lock_guard lock(mu_);
    Query u(db_, "UPDATE jobs SET glibc_floor = ? WHERE id = ?");
    u.text(1, glibc_floor).integer(2, id);
    if (u.step() != SQLITE_DONE) return db_error(db_, "record glibc floor");
    return ok_status();
  }

  Status record_toolchain(std::int64_t id, const Toolchain& t) override {
    std::lock_guard lock(mu_);
    Query u(db_,
            "UPDATE jobs SET nvcc_path = ?, nvcc_version = ?, torch_version = ?, torch_cuda = ?,"
            " python_path = ?, python_version = ? WHERE id = ?");
    u.text(1, t.nvcc)
        .text(2, t.nvcc_version)
        .text(3, t.torch_version)
        .text(4, t.torch_cuda)
        .text(5, t.python)
        .text(6, t.python_version)
        .integer(7, id);
    if (u.step() != SQLITE_DONE) return db_error(db_, "record toolchain");
    return ok_status();
  }

  Status record_executor_job(std::int64_t id, const std::string& executor_job) override {
    std::lock_guard lock(mu_);
    Query u(db_, "UPDATE jobs SET executor_job = ? WHERE id = ?");
    u.text(1, executor_job).integer(2, id);
    if (u.step() != SQLITE_DONE) return db_error(db_, "record executor job");
    return ok_status();
  }

  Result<std::vector<JobRecord>> requeue_interrupted(
      const std::set<std::int64_t>& still_running) override {
    std::vector<JobRecord> running;
    for (const auto state :
         {core::JobState::preparing, core::JobState::building, core::JobState::retagging,
          core::JobState::testing, core::JobState::ingesting}) {
      auto jobs = jobs_in_state(state);
      if (!jobs) return jobs.error();
      running.insert(running.end(), jobs->begin(), jobs->end());
    }
    std::vector<JobRecord> requeued;
    for (const auto& j : running) {
      if (still_running.contains(j.id)) continue;
      if (auto r =
              transition(j.id, core::JobState::interrupted,
                         "the server stopped during " + std::string(core::state_name(j.state)));
          !r) {
        return r.error();
      }
      auto q = transition(j.id, core::JobState::queued, "requeued after an interruption");
      if (!q) return q.error();
      requeued.push_back(*q);
    }
    return requeued;
  }

  Result<bool> cell_built(const std::string& recipe, const std::string& version,
                          const core::Cell& cell) override {
    std::lock_guard lock(mu_);
    Query q(db_,
            "SELECT 1 FROM jobs WHERE recipe = ? AND version = ? AND python = ? AND torch = ? AND"
            " cuda = ? AND state = 'succeeded' LIMIT 1");
    q.text(1, recipe)
        .text(2, version)
        .text(3, cell.python)
        .text(4, cell.torch.str())
        .text(5, cell.cuda.str());
    return q.step() == SQLITE_ROW;
  }

 private:
  bool exec(const char* sql) {
    return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
  }

  Error rollback(std::string_view what) {
    Error e = db_error(db_, what);
    (void)exec("ROLLBACK");
    return e;
  }

  Result<std::optional<JobRecord>> find_job_locked(std::int64_t id) {
    const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?";
    Query q(db_, sql.c_str());
    q.integer(1, id);
    if (q.step() == SQLITE_ROW) return std::optional<JobRecord>(read_job(q));
    return std::optional<JobRecord>();
  }

  std::mutex mu_;
  sqlite3* db_;
};

}  // namespace

Result<std::unique_ptr<JobStore>> open_sqlite_job_store(const std::filesystem::path& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    Error e = make_error(
        Errc::io, "open " + db_path.string() + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close_v2(db);
    return e;
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_exec(db, "PRAGMA foreign_keys=ON", nullptr, nullptr, nullptr);
  return std::unique_ptr<JobStore>(std::make_unique<SqliteJobStore>(db));
}

}  // namespace wf::catalog
