// The PostgreSQL job store (SqliteJobStore's semantics: sqlite_jobs.cpp) on the catalog's
// database. Transitions run in a write transaction under the catalog's write lock, so that
// two processes cannot both move one job.

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/row_mapping.hpp"
#include "wheelforge/catalog/jobs.hpp"

namespace wf::catalog {

namespace {

using pg::Params;
using pg::Row;
using pg::Rows;

constexpr const char* kPgJobColumns =
    "id, build_id, recipe, version, python, torch, cuda, state, reason, attempts, max_jobs,"
    " nvcc_threads, wheel, created_at, started_at, finished_at, nvcc_path, nvcc_version,"
    " torch_version, torch_cuda, python_path, python_version, build_number, glibc_floor,"
    " executor_job, image, image_digest, engine_command, claimed_by, lease_expires_at";
constexpr const char* kBuildColumns = "id, recipe, version, force, yank_superseded, created_at";

std::vector<JobRecord> jobs_of(const Rows& rows) {
  std::vector<JobRecord> out;
  out.reserve(static_cast<std::size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(detail::job_from_row(Row(rows, i)));
  return out;
}

class PgJobStore final : public JobStore {
 public:
  explicit PgJobStore(std::unique_ptr<pg::Conn> conn) : conn_(std::move(conn)) {}

  Result<std::pair<BuildRecord, std::vector<JobRecord>>> create_build(
      const BuildRecord& build, const std::vector<core::Cell>& cells) override {
    std::lock_guard lock(mu_);
    using Created = std::pair<BuildRecord, std::vector<JobRecord>>;
    return conn_->write_transaction(
        [&]() -> Result<Created> {
          BuildRecord b = build;
          b.created_at = now_micros();
          auto ins = conn_->exec("insert build",
                                 "INSERT INTO builds (recipe, version, force, yank_superseded,"
                                 " created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
                                 Params()
                                     .add(b.recipe)
                                     .add(b.version)
                                     .add(std::int64_t{b.force ? 1 : 0})
                                     .add(std::int64_t{b.yank_superseded ? 1 : 0})
                                     .add(b.created_at));
          if (!ins) return ins.error();
          b.id = ins->i64(0, 0);
          std::vector<JobRecord> jobs;
          for (const auto& cell : cells) {
            JobRecord j;
            j.build_id = b.id;
            j.recipe = b.recipe;
            j.version = b.version;
            j.cell = cell;
            j.created_at = b.created_at;
            auto q = conn_->exec("insert job",
                                 "INSERT INTO jobs (build_id, recipe, version, python, torch, cuda,"
                                 " state, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7)"
                                 " RETURNING id",
                                 Params()
                                     .add(b.id)
                                     .add(b.recipe)
                                     .add(b.version)
                                     .add(cell.python)
                                     .add(cell.torch.str())
                                     .add(cell.cuda.str())
                                     .add(j.created_at));
            if (!q) return q.error();
            j.id = q->i64(0, 0);
            jobs.push_back(std::move(j));
          }
          return Created{std::move(b), std::move(jobs)};
        },
        [](const Created&) { return true; }, pg::Conn::WriteLock::shared);
  }

  Result<std::vector<BuildRecord>> list_builds(std::size_t limit) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec(
        "list builds",
        std::string("SELECT ") + kBuildColumns + " FROM builds ORDER BY id DESC LIMIT $1",
        Params().add(static_cast<std::int64_t>(limit)));
    if (!rows) return rows.error();
    std::vector<BuildRecord> out;
    out.reserve(static_cast<std::size_t>(rows->size()));
    for (int i = 0; i < rows->size(); ++i) out.push_back(detail::build_from_row(Row(*rows, i)));
    return out;
  }

  Result<std::optional<BuildRecord>> find_build(std::int64_t id) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("build lookup",
                            std::string("SELECT ") + kBuildColumns + " FROM builds WHERE id = $1",
                            Params().add(id));
    if (!rows) return rows.error();
    if (rows->empty()) return std::optional<BuildRecord>();
    return std::optional<BuildRecord>(detail::build_from_row(Row(*rows, 0)));
  }

  Result<std::vector<JobRecord>> jobs_of_build(std::int64_t build_id) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec(
        "list jobs of a build",
        std::string("SELECT ") + kPgJobColumns + " FROM jobs WHERE build_id = $1 ORDER BY id",
        Params().add(build_id));
    if (!rows) return rows.error();
    return jobs_of(*rows);
  }

  Result<std::optional<JobRecord>> find_job(std::int64_t id) override {
    std::lock_guard lock(mu_);
    return find_job_locked(id);
  }

  Result<std::vector<JobRecord>> jobs_in_state(core::JobState state) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec(
        "list jobs in a state",
        std::string("SELECT ") + kPgJobColumns + " FROM jobs WHERE state = $1 ORDER BY id",
        Params().add(core::state_name(state)));
    if (!rows) return rows.error();
    return jobs_of(*rows);
  }

  Result<JobRecord> transition(std::int64_t id, core::JobState to,
                               const std::string& reason) override {
    std::lock_guard lock(mu_);
    return conn_->write_transaction([&] { return transition_locked(id, to, reason); },
                                    [](const JobRecord&) { return true; },
                                    pg::Conn::WriteLock::shared);
  }

  Result<JobRecord> transition_as(const std::string& runner, std::int64_t id, core::JobState to,
                                  const std::string& reason) override {
    std::lock_guard lock(mu_);
    return conn_->write_transaction([&] { return transition_locked(id, to, reason, &runner); },
                                    [](const JobRecord&) { return true; },
                                    pg::Conn::WriteLock::shared);
  }

  Result<std::optional<JobRecord>> claim(std::int64_t id, const std::string& runner,
                                         Micros lease_until) override {
    std::lock_guard lock(mu_);
    // One statement: the row is locked and moved in one go, and a row another runner is
    // claiming right now is skipped rather than waited for.
    auto rows = conn_->exec(
        "claim job",
        std::string("UPDATE jobs SET state = 'preparing', started_at = $1,"
                    " finished_at = NULL, claimed_by = $2, lease_expires_at = $3"
                    " WHERE id = (SELECT id FROM jobs WHERE id = $4 AND state = 'queued'"
                    " FOR UPDATE SKIP LOCKED) RETURNING ") +
            kPgJobColumns,
        Params().add(now_micros()).add(runner).add(lease_until).add(id));
    if (!rows) return rows.error();
    if (rows->empty()) return std::optional<JobRecord>();
    return std::optional<JobRecord>(detail::job_from_row(Row(*rows, 0)));
  }

  Result<Lease> renew_lease(std::int64_t id, const std::string& runner,
                            Micros lease_until) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("renew lease",
                            "UPDATE jobs SET lease_expires_at = $1 WHERE id = $2 AND"
                            " claimed_by = $3 AND state IN ('preparing', 'building', 'retagging',"
                            " 'testing', 'ingesting') RETURNING id",
                            Params().add(lease_until).add(id).add(runner));
    if (!rows) return rows.error();
    if (!rows->empty()) return Lease::held;
    auto job = find_job_locked(id);
    if (!job) return job.error();
    if (job->has_value() && (*job)->state == core::JobState::cancelled &&
        (*job)->claimed_by == runner) {
      return Lease::cancelled;
    }
    return Lease::lost;
  }

  Status adopt(std::int64_t id, const std::string& runner, Micros lease_until) override {
    return update("adopt job",
                  "UPDATE jobs SET claimed_by = $1, lease_expires_at = $2 WHERE id = $3",
                  Params().add(runner).add(lease_until).add(id));
  }

  Result<std::vector<JobRecord>> requeue_expired(Micros now) override {
    std::lock_guard lock(mu_);
    // One statement; rows another runner is taking over right now are skipped.
    auto rows = conn_->exec(
        "requeue jobs whose lease expired",
        std::string("WITH expired AS (SELECT id AS expired_id, claimed_by AS old_runner,"
                    " state AS old_state FROM jobs WHERE state IN ('preparing', 'building',"
                    " 'retagging', 'testing', 'ingesting') AND lease_expires_at < $1"
                    " FOR UPDATE SKIP LOCKED)"
                    " UPDATE jobs SET state = 'queued', reason = 'taken over from runner ' ||"
                    " old_runner || ': its lease expired during ' || old_state,"
                    " started_at = NULL, finished_at = NULL, claimed_by = '',"
                    " lease_expires_at = NULL FROM expired WHERE id = expired_id RETURNING ") +
            kPgJobColumns + ", old_runner, old_state",
        Params().add(now));
    if (!rows) return rows.error();
    std::vector<JobRecord> out;
    for (int i = 0; i < rows->size(); ++i) {
      const Row row(*rows, i);
      JobRecord j = detail::job_from_row(row);
      j.claimed_by = row.text(30);
      j.state = core::parse_job_state(row.text(31)).value_or(core::JobState::preparing);
      out.push_back(std::move(j));
    }
    return out;
  }

  Status record_attempt(std::int64_t id, unsigned max_jobs, unsigned nvcc_threads) override {
    return update("record attempt",
                  "UPDATE jobs SET attempts = attempts + 1, max_jobs = $1, nvcc_threads = $2"
                  " WHERE id = $3",
                  Params().add(std::int64_t{max_jobs}).add(std::int64_t{nvcc_threads}).add(id));
  }

  Status record_wheel(std::int64_t id, const std::string& wheel,
                      std::uint64_t build_number) override {
    return update("record wheel", "UPDATE jobs SET wheel = $1, build_number = $2 WHERE id = $3",
                  Params().add(wheel).add(static_cast<std::int64_t>(build_number)).add(id));
  }

  Status record_glibc_floor(std::int64_t id, const std::string& glibc_floor) override {
    return update("record glibc floor", "UPDATE jobs SET glibc_floor = $1 WHERE id = $2",
                  Params().add(glibc_floor).add(id));
  }

  Status record_toolchain(std::int64_t id, const Toolchain& t) override {
    return update("record toolchain",
                  "UPDATE jobs SET nvcc_path = $1, nvcc_version = $2, torch_version = $3,"
                  " torch_cuda = $4, python_path = $5, python_version = $6 WHERE id = $7",
                  Params()
                      .add(t.nvcc)
                      .add(t.nvcc_version)
                      .add(t.torch_version)
                      .add(t.torch_cuda)
                      .add(t.python)
                      .add(t.python_version)
                      .add(id));
  }

  Status record_executor_job(std::int64_t id, const std::string& executor_job) override {
    return update("record executor job", "UPDATE jobs SET executor_job = $1 WHERE id = $2",
                  Params().add(executor_job).add(id));
  }

  Status record_provenance(std::int64_t id, const Provenance& p) override {
    return update(
        "record provenance",
        "UPDATE jobs SET image = $1, image_digest = $2, engine_command = $3 WHERE id = $4",
        Params().add(p.image).add(p.image_digest).add(p.engine_command).add(id));
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
    auto rows = conn_->exec("built-cell lookup",
                            "SELECT 1 FROM jobs WHERE recipe = $1 AND version = $2 AND python = $3"
                            " AND torch = $4 AND cuda = $5 AND state = 'succeeded' LIMIT 1",
                            Params()
                                .add(recipe)
                                .add(version)
                                .add(cell.python)
                                .add(cell.torch.str())
                                .add(cell.cuda.str()));
    if (!rows) return rows.error();
    return !rows->empty();
  }

 private:
  Status update(std::string_view what, const std::string& sql, const Params& params) {
    std::lock_guard lock(mu_);
    auto r = conn_->exec(what, sql, params);
    if (!r) return r.error();
    return ok_status();
  }

  Result<std::optional<JobRecord>> find_job_locked(std::int64_t id) {
    auto rows = conn_->exec("job lookup",
                            std::string("SELECT ") + kPgJobColumns + " FROM jobs WHERE id = $1",
                            Params().add(id));
    if (!rows) return rows.error();
    if (rows->empty()) return std::optional<JobRecord>();
    return std::optional<JobRecord>(detail::job_from_row(Row(*rows, 0)));
  }

  Result<JobRecord> transition_locked(std::int64_t id, core::JobState to, const std::string& reason,
                                      const std::string* runner = nullptr) {
    // The row is locked: a claim (which takes no write lock) cannot move it meanwhile.
    auto rows =
        conn_->exec("job lookup",
                    std::string("SELECT ") + kPgJobColumns + " FROM jobs WHERE id = $1 FOR UPDATE",
                    Params().add(id));
    if (!rows) return rows.error();
    if (rows->empty()) return make_error(Errc::not_found, "no such job: " + std::to_string(id));
    JobRecord j = detail::job_from_row(Row(*rows, 0));
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
    if (!reason.empty() || to == core::JobState::queued || to == core::JobState::succeeded) {
      j.reason = reason;
    }
    // A queued job is nobody's; an ended one keeps who ran it, without a lease.
    if (to == core::JobState::queued) j.claimed_by.clear();
    if (!core::is_running(to)) j.lease_expires_at.reset();
    auto u = conn_->exec("update job",
                         "UPDATE jobs SET state = $1, reason = $2, started_at = $3,"
                         " finished_at = $4, claimed_by = $5, lease_expires_at = $6 WHERE id = $7",
                         Params()
                             .add(core::state_name(to))
                             .add(j.reason)
                             .add(j.started_at)
                             .add(j.finished_at)
                             .add(j.claimed_by)
                             .add(j.lease_expires_at)
                             .add(id));
    if (!u) return u.error();
    return j;
  }

  std::mutex mu_;
  std::unique_ptr<pg::Conn> conn_;
};

}  // namespace

Result<std::unique_ptr<JobStore>> open_postgres_job_store(std::string_view uri) {
  auto conn = detail::open_pg(uri);
  if (!conn) return conn.error();
  return std::unique_ptr<JobStore>(std::make_unique<PgJobStore>(std::move(*conn)));
}

Result<std::unique_ptr<JobStore>> open_job_store(std::string_view location,
                                                 const std::filesystem::path& data_dir) {
  if (auto st = validate_catalog_location(location); !st) return st.error();
  if (pg::is_uri(location)) return open_postgres_job_store(location);
  return open_sqlite_job_store(data_dir / "wheelforge.db");
}

}  // namespace wf::catalog
