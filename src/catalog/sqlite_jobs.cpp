#include <mutex>

#include "catalog/row_mapping.hpp"
#include "catalog/sqlite_db.hpp"
#include "wheelforge/catalog/jobs.hpp"

namespace wf::catalog {
namespace {

using sqlite::Db;
using sqlite::Stmt;

constexpr const char* kJobColumns =
    "id, build_id, recipe, version, python, torch, cuda, state, reason, attempts, max_jobs,"
    " nvcc_threads, wheel, created_at, started_at, finished_at, nvcc_path, nvcc_version,"
    " torch_version, torch_cuda, python_path, python_version, build_number, glibc_floor,"
    " executor_job, image, image_digest, engine_command, claimed_by, lease_expires_at";

JobRecord read_job(const Stmt& q) {
  return detail::job_from_row(q);
}

BuildRecord read_build(const Stmt& q) {
  return detail::build_from_row(q);
}

/// Reads every row of a statement; an error on any step fails the whole read.
template <class Row>
Result<std::vector<Row>> read_rows(const Db& db, Stmt& q, Row (*read)(const Stmt&),
                                   std::string_view what) {
  if (!q.valid()) return db.error("prepare " + std::string(what));
  std::vector<Row> out;
  int rc = SQLITE_ROW;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(read(q));
  if (rc != SQLITE_DONE) return db.error(what);
  return out;
}

/// At most one row.
template <class Row>
Result<std::optional<Row>> read_row(const Db& db, Stmt& q, Row (*read)(const Stmt&),
                                    std::string_view what) {
  if (!q.valid()) return db.error("prepare " + std::string(what));
  const int rc = q.step();
  if (rc == SQLITE_ROW) return std::optional<Row>(read(q));
  if (rc == SQLITE_DONE) return std::optional<Row>();
  return db.error(what);
}

/// Runs a statement that returns no rows.
Status run(const Db& db, Stmt& q, std::string_view what) {
  if (!q.valid()) return db.error("prepare " + std::string(what));
  if (q.step() != SQLITE_DONE) return db.error(what);
  return ok_status();
}

class SqliteJobStore final : public JobStore {
 public:
  explicit SqliteJobStore(Db db) : db_(std::move(db)) {}

  Result<std::pair<BuildRecord, std::vector<JobRecord>>> create_build(
      const BuildRecord& build, const std::vector<core::Cell>& cells) override {
    std::lock_guard lock(mu_);
    using Created = std::pair<BuildRecord, std::vector<JobRecord>>;
    return db_.write_transaction(
        [&]() -> Result<Created> {
          BuildRecord b = build;
          b.created_at = now_micros();
          Stmt ins(db_,
                   "INSERT INTO builds (recipe, version, force, yank_superseded, created_at)"
                   " VALUES (?, ?, ?, ?, ?)");
          ins.bind(1, b.recipe)
              .bind(2, b.version)
              .bind(3, std::int64_t{b.force ? 1 : 0})
              .bind(4, std::int64_t{b.yank_superseded ? 1 : 0})
              .bind(5, b.created_at);
          if (auto st = run(db_, ins, "insert build"); !st) return st.error();
          b.id = db_.last_insert_rowid();
          std::vector<JobRecord> jobs;
          for (const auto& cell : cells) {
            JobRecord j;
            j.build_id = b.id;
            j.recipe = b.recipe;
            j.version = b.version;
            j.cell = cell;
            j.created_at = b.created_at;
            Stmt q(db_,
                   "INSERT INTO jobs (build_id, recipe, version, python, torch, cuda, state,"
                   " created_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)");
            q.bind(1, b.id)
                .bind(2, b.recipe)
                .bind(3, b.version)
                .bind(4, cell.python)
                .bind(5, cell.torch.str())
                .bind(6, cell.cuda.str())
                .bind(7, j.created_at);
            if (auto st = run(db_, q, "insert job"); !st) return st.error();
            j.id = db_.last_insert_rowid();
            jobs.push_back(std::move(j));
          }
          return Created{std::move(b), std::move(jobs)};
        },
        [](const Created&) { return true; });
  }

  Result<std::vector<BuildRecord>> list_builds(std::size_t limit) override {
    std::lock_guard lock(mu_);
    Stmt q(db_,
           "SELECT id, recipe, version, force, yank_superseded, created_at FROM builds"
           " ORDER BY id DESC LIMIT ?");
    q.bind(1, static_cast<std::int64_t>(limit));
    return read_rows(db_, q, &read_build, "list builds");
  }

  Result<std::optional<BuildRecord>> find_build(std::int64_t id) override {
    std::lock_guard lock(mu_);
    Stmt q(db_,
           "SELECT id, recipe, version, force, yank_superseded, created_at FROM builds"
           " WHERE id = ?");
    q.bind(1, id);
    return read_row(db_, q, &read_build, "build lookup");
  }

  Result<std::vector<JobRecord>> jobs_of_build(std::int64_t build_id) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE build_id = ? ORDER BY id");
    q.bind(1, build_id);
    return read_rows(db_, q, &read_job, "list jobs of a build");
  }

  Result<std::optional<JobRecord>> find_job(std::int64_t id) override {
    std::lock_guard lock(mu_);
    return find_job_locked(id);
  }

  Result<std::vector<JobRecord>> jobs_in_state(core::JobState state) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE state = ? ORDER BY id");
    q.bind(1, core::state_name(state));
    return read_rows(db_, q, &read_job, "list jobs in a state");
  }

  Result<JobRecord> transition(std::int64_t id, core::JobState to,
                               const std::string& reason) override {
    std::lock_guard lock(mu_);
    return db_.write_transaction([&] { return transition_locked(id, to, reason); },
                                 [](const JobRecord&) { return true; });
  }

  Result<JobRecord> transition_as(const std::string& runner, std::int64_t id, core::JobState to,
                                  const std::string& reason) override {
    std::lock_guard lock(mu_);
    return db_.write_transaction([&] { return transition_locked(id, to, reason, &runner); },
                                 [](const JobRecord&) { return true; });
  }

  Result<std::optional<JobRecord>> claim(std::int64_t id, const std::string& runner,
                                         Micros lease_until) override {
    std::lock_guard lock(mu_);
    // SQLite has one writer at a time: the state in the WHERE clause is the claim.
    return db_.write_transaction(
        [&]() -> Result<std::optional<JobRecord>> {
          Stmt u(db_,
                 "UPDATE jobs SET state = 'preparing', started_at = ?, finished_at = NULL,"
                 " claimed_by = ?, lease_expires_at = ? WHERE id = ? AND state = 'queued'");
          u.bind(1, now_micros()).bind(2, runner).bind(3, lease_until).bind(4, id);
          if (auto st = run(db_, u, "claim job"); !st) return st.error();
          if (db_.changes() == 0) return std::optional<JobRecord>();
          return find_job_locked(id);
        },
        [](const std::optional<JobRecord>&) { return true; });
  }

  Result<Lease> renew_lease(std::int64_t id, const std::string& runner,
                            Micros lease_until) override {
    std::lock_guard lock(mu_);
    Stmt u(db_,
           "UPDATE jobs SET lease_expires_at = ? WHERE id = ? AND claimed_by = ? AND state IN"
           " ('preparing', 'building', 'retagging', 'testing', 'ingesting')");
    u.bind(1, lease_until).bind(2, id).bind(3, runner);
    if (auto st = run(db_, u, "renew lease"); !st) return st.error();
    if (db_.changes() > 0) return Lease::held;
    auto job = find_job_locked(id);
    if (!job) return job.error();
    if (job->has_value() && (*job)->state == core::JobState::cancelled &&
        (*job)->claimed_by == runner) {
      return Lease::cancelled;
    }
    return Lease::lost;
  }

  Status adopt(std::int64_t id, const std::string& runner, Micros lease_until) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE jobs SET claimed_by = ?, lease_expires_at = ? WHERE id = ?");
    u.bind(1, runner).bind(2, lease_until).bind(3, id);
    return run(db_, u, "adopt job");
  }

  Result<std::vector<JobRecord>> requeue_expired(Micros now) override {
    std::lock_guard lock(mu_);
    return db_.write_transaction(
        [&]() -> Result<std::vector<JobRecord>> {
          Stmt q(db_, std::string("SELECT ") + kJobColumns +
                          " FROM jobs WHERE state IN ('preparing', 'building', 'retagging',"
                          " 'testing', 'ingesting') AND lease_expires_at < ? ORDER BY id");
          q.bind(1, now);
          auto expired = read_rows(db_, q, &read_job, "list jobs whose lease expired");
          if (!expired) return expired.error();
          for (const auto& j : *expired) {
            Stmt u(db_,
                   "UPDATE jobs SET state = 'queued', reason = ?, started_at = NULL,"
                   " finished_at = NULL, claimed_by = '', lease_expires_at = NULL WHERE id = ?");
            u.bind(1, "taken over from runner " + j.claimed_by + ": its lease expired during " +
                          std::string(core::state_name(j.state)))
                .bind(2, j.id);
            if (auto st = run(db_, u, "requeue job"); !st) return st.error();
          }
          return std::move(*expired);
        },
        [](const std::vector<JobRecord>&) { return true; });
  }

  Status record_attempt(std::int64_t id, unsigned max_jobs, unsigned nvcc_threads) override {
    std::lock_guard lock(mu_);
    Stmt u(db_,
           "UPDATE jobs SET attempts = attempts + 1, max_jobs = ?, nvcc_threads = ? WHERE id = ?");
    u.bind(1, std::int64_t{max_jobs}).bind(2, std::int64_t{nvcc_threads}).bind(3, id);
    return run(db_, u, "record attempt");
  }

  Status record_wheel(std::int64_t id, const std::string& wheel,
                      std::uint64_t build_number) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE jobs SET wheel = ?, build_number = ? WHERE id = ?");
    u.bind(1, wheel).bind(2, static_cast<std::int64_t>(build_number)).bind(3, id);
    return run(db_, u, "record wheel");
  }

  Status record_glibc_floor(std::int64_t id, const std::string& glibc_floor) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE jobs SET glibc_floor = ? WHERE id = ?");
    u.bind(1, glibc_floor).bind(2, id);
    return run(db_, u, "record glibc floor");
  }

  Status record_toolchain(std::int64_t id, const Toolchain& t) override {
    std::lock_guard lock(mu_);
    Stmt u(db_,
           "UPDATE jobs SET nvcc_path = ?, nvcc_version = ?, torch_version = ?, torch_cuda = ?,"
           " python_path = ?, python_version = ? WHERE id = ?");
    u.bind(1, t.nvcc)
        .bind(2, t.nvcc_version)
        .bind(3, t.torch_version)
        .bind(4, t.torch_cuda)
        .bind(5, t.python)
        .bind(6, t.python_version)
        .bind(7, id);
    return run(db_, u, "record toolchain");
  }

  Status record_executor_job(std::int64_t id, const std::string& executor_job) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE jobs SET executor_job = ? WHERE id = ?");
    u.bind(1, executor_job).bind(2, id);
    return run(db_, u, "record executor job");
  }

  Status record_provenance(std::int64_t id, const Provenance& p) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE jobs SET image = ?, image_digest = ?, engine_command = ? WHERE id = ?");
    u.bind(1, p.image).bind(2, p.image_digest).bind(3, p.engine_command).bind(4, id);
    return run(db_, u, "record provenance");
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
    Stmt q(db_,
           "SELECT 1 FROM jobs WHERE recipe = ? AND version = ? AND python = ? AND torch = ? AND"
           " cuda = ? AND state = 'succeeded' LIMIT 1");
    if (!q.valid()) return db_.error("prepare built-cell lookup");
    q.bind(1, recipe)
        .bind(2, version)
        .bind(3, cell.python)
        .bind(4, cell.torch.str())
        .bind(5, cell.cuda.str());
    const int rc = q.step();
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return db_.error("built-cell lookup");
  }

 private:
  Result<std::optional<JobRecord>> find_job_locked(std::int64_t id) {
    Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
    q.bind(1, id);
    return read_row(db_, q, &read_job, "job lookup");
  }

  Result<JobRecord> transition_locked(std::int64_t id, core::JobState to, const std::string& reason,
                                      const std::string* runner = nullptr) {
    auto job = find_job_locked(id);
    if (!job) return job.error();
    if (!job->has_value()) return make_error(Errc::not_found, "no such job: " + std::to_string(id));
    JobRecord j = **job;
    if (runner != nullptr && !j.claimed_by.empty() && j.claimed_by != *runner) {
      return make_error(Errc::conflict, "job " + std::to_string(id) + " is held by runner " +
                                            j.claimed_by + ", not " + *runner);
    }
    if (!core::can_transition(j.state, to)) {
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
    // A queued or succeeded job keeps no reason from before ("requeued after an
    // interruption" on a job that then succeeded would say it still is).
    if (!reason.empty() || to == core::JobState::queued || to == core::JobState::succeeded) {
      j.reason = reason;
    }
    // A queued job is nobody's; an ended one keeps who ran it, without a lease.
    if (to == core::JobState::queued) j.claimed_by.clear();
    if (!core::is_running(to)) j.lease_expires_at.reset();
    Stmt u(db_,
           "UPDATE jobs SET state = ?, reason = ?, started_at = ?, finished_at = ?,"
           " claimed_by = ?, lease_expires_at = ? WHERE id = ?");
    u.bind(1, core::state_name(to)).bind(2, j.reason);
    if (j.started_at) u.bind(3, *j.started_at);
    if (j.finished_at) u.bind(4, *j.finished_at);
    u.bind(5, j.claimed_by);
    if (j.lease_expires_at) u.bind(6, *j.lease_expires_at);
    u.bind(7, id);
    if (auto st = run(db_, u, "update job"); !st) return st.error();
    return j;
  }

  std::mutex mu_;
  Db db_;
};

}  // namespace

Result<std::unique_ptr<JobStore>> open_sqlite_job_store(const std::filesystem::path& db_path) {
  auto db = Db::open(db_path, sqlite::OpenMode::existing);
  if (!db) return db.error();
  return std::unique_ptr<JobStore>(std::make_unique<SqliteJobStore>(std::move(*db)));
}

}  // namespace wf::catalog
