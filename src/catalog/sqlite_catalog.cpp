#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::catalog {
namespace {

// Schema migrations, applied in order; user_version records how many have run.
// Never edit a published migration: append a new one.
constexpr const char* kMigrations[] = {
    // 1: projects, files, tokens, and a generation counter bumped by triggers so that any
    // process can notice any other process's commits with one cheap query.
    R"sql(
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
INSERT INTO meta (id, generation) VALUES (1, 0);
CREATE TABLE projects (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  display_name TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE files (
  id INTEGER PRIMARY KEY,
  project_id INTEGER NOT NULL REFERENCES projects(id),
  filename TEXT NOT NULL UNIQUE,
  version TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('wheel', 'sdist')),
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  upload_time INTEGER NOT NULL,
  requires_python TEXT,
  metadata_sha256 TEXT NOT NULL,
  metadata_size INTEGER NOT NULL,
  yanked INTEGER NOT NULL DEFAULT 0,
  yanked_reason TEXT,
  build_tag TEXT,
  python_tag TEXT NOT NULL DEFAULT '',
  abi_tag TEXT NOT NULL DEFAULT '',
  platform_tag TEXT NOT NULL DEFAULT '',
  requires_dist TEXT NOT NULL DEFAULT ''
);
CREATE INDEX files_project ON files(project_id);
CREATE TABLE tokens (
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  scope TEXT NOT NULL CHECK (scope IN ('read', 'upload', 'admin')),
  project TEXT,
  description TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE TRIGGER files_ins AFTER INSERT ON files BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER files_upd AFTER UPDATE ON files BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER files_del AFTER DELETE ON files BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER tokens_ins AFTER INSERT ON tokens BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER tokens_upd AFTER UPDATE ON tokens BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER tokens_del AFTER DELETE ON tokens BEGIN UPDATE meta SET generation = generation + 1; END;
)sql",
    // 2: variant hints (torch series, CUDA/ROCm/CPU backend, C++ ABI) parsed at ingest, so that
    // views are computed from the catalog. Rows that predate this are filled in by
    // backfill_hints() right after the migration.
    R"sql(
ALTER TABLE files ADD COLUMN backend TEXT NOT NULL DEFAULT 'none';
ALTER TABLE files ADD COLUMN cuda_major INTEGER;
ALTER TABLE files ADD COLUMN cuda_minor INTEGER;
ALTER TABLE files ADD COLUMN rocm_major INTEGER;
ALTER TABLE files ADD COLUMN rocm_minor INTEGER;
ALTER TABLE files ADD COLUMN torch_major INTEGER;
ALTER TABLE files ADD COLUMN torch_minor INTEGER;
ALTER TABLE files ADD COLUMN cxx11_abi INTEGER;
ALTER TABLE files ADD COLUMN label_extra TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN hints_version INTEGER NOT NULL DEFAULT 0;
)sql",
    // 3: names of deleted files stay reserved forever: a URL once published never serves
    // other bytes.
    R"sql(
CREATE TABLE deleted_files (
  filename TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  deleted_at INTEGER NOT NULL
);
)sql",
    // 4: build runner: one build per request, one job per matrix cell; every state change is
    // recorded before the step it names runs (see jobs.hpp).
    R"sql(
CREATE TABLE builds (
  id INTEGER PRIMARY KEY,
  recipe TEXT NOT NULL,
  version TEXT NOT NULL,
  force INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  build_id INTEGER NOT NULL REFERENCES builds(id),
  recipe TEXT NOT NULL,
  version TEXT NOT NULL,
  python TEXT NOT NULL,
  torch TEXT NOT NULL,
  cuda TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  max_jobs INTEGER NOT NULL DEFAULT 0,
  nvcc_threads INTEGER NOT NULL DEFAULT 0,
  wheel TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER
);
CREATE INDEX jobs_build ON jobs(build_id);
CREATE INDEX jobs_state ON jobs(state);
)sql",
    // 5: project claims: who may upload to a project besides admins. Projects that exist
    // already stay unclaimed (NULL) until the next token uploads to them. New project rows
    // come with their first file (whose trigger bumps the generation); claim changes bump it
    // here.
    R"sql(
ALTER TABLE projects ADD COLUMN claimed_by TEXT CHECK (claimed_by IN ('admin', 'token'));
ALTER TABLE projects ADD COLUMN owner_token_id INTEGER REFERENCES tokens(id);
CREATE TRIGGER projects_upd AFTER UPDATE ON projects BEGIN UPDATE meta SET generation = generation + 1; END;
)sql",
    // 6: blobs that `fsck --repair` found damaged. Files referencing one are withdrawn (not
    // listed, their URLs answer 503) until their bytes are published again; the triggers let
    // a running server notice at its next poll.
    R"sql(
CREATE TABLE IF NOT EXISTS damaged_blobs (
  sha256 TEXT PRIMARY KEY,
  detail TEXT NOT NULL,
  found_at INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS damaged_ins AFTER INSERT ON damaged_blobs BEGIN UPDATE meta SET generation = generation + 1; END;
CREATE TRIGGER IF NOT EXISTS damaged_del AFTER DELETE ON damaged_blobs BEGIN UPDATE meta SET generation = generation + 1; END;
)sql",
    // 7: one file per canonical name (core::canonical_file_key): spellings of one file name,
    // and the sdists of one release, share a key, live or deleted. The key is not UNIQUE:
    // databases written before it may hold two rows with one key, which are kept; the check
    // runs inside insert_file's write transaction. Rows that predate this are filled in by
    // backfill_canonical() right after the migration.
    R"sql(
ALTER TABLE files ADD COLUMN canonical TEXT NOT NULL DEFAULT '';
ALTER TABLE deleted_files ADD COLUMN canonical TEXT NOT NULL DEFAULT '';
CREATE INDEX files_canonical ON files(canonical);
CREATE INDEX deleted_files_canonical ON deleted_files(canonical);
)sql",
    // 8: the toolchain a job's build verified and used (nvcc, torch and Python, each with the
    // version it reported), so that a wheel's label can be traced to what built it.
    R"sql(
ALTER TABLE jobs ADD COLUMN nvcc_path TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN nvcc_version TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN torch_version TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN torch_cuda TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN python_path TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN python_version TEXT NOT NULL DEFAULT '';
)sql",
    // 9: what the runner found in a job's wheel and how it published it: the glibc floor of
    // its binaries, its build number (the build tag a rebuild gets; 0: none), and
    // whether a build yanks the builds its rebuilds supersede.
    R"sql(
ALTER TABLE jobs ADD COLUMN glibc_floor TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN build_number INTEGER NOT NULL DEFAULT 0;
ALTER TABLE builds ADD COLUMN yank_superseded INTEGER NOT NULL DEFAULT 0;
)sql",
    // 10: the batch job a job's commands run in on a cluster (a Slurm job id), through which a
    // restarted server re-attaches to it.
    R"sql(
ALTER TABLE jobs ADD COLUMN executor_job TEXT NOT NULL DEFAULT '';
)sql",
};

// Bumped when the label parser learns something new, so that stored hints are recomputed.
constexpr std::int64_t kHintsVersion = 1;

/// SQLite's failures are the server's: a full disk (507), a database this process may not
/// write (unavailable, naming the file), anything else io.
Error sqlite_failure(sqlite3* db, std::string message) {
  const int code = sqlite3_errcode(db);
  if (code == SQLITE_FULL) return Error{Errc::storage_full, std::move(message)};
  if (code == SQLITE_READONLY || code == SQLITE_PERM) {
    const char* file = sqlite3_db_filename(db, "main");
    return Error{Errc::unavailable, "the catalog " + std::string(file ? file : "") +
                                        " is not writable (" + message + ")"};
  }
  return Error{Errc::io, std::move(message)};
}

Error sqlite_error(sqlite3* db, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += sqlite3_errmsg(db);
  return sqlite_failure(db, std::move(message));
}

/// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  [[nodiscard]] bool valid() const { return stmt_ != nullptr; }
  Stmt& bind(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, const std::string& s) { return bind(i, std::string_view(s)); }
  Stmt& bind(int i, const char* s) { return bind(i, std::string_view(s)); }
  Stmt& bind(int i, const std::optional<std::string>& s) {
    if (s) return bind(i, std::string_view(*s));
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, std::optional<int> v) {
    if (v) return bind(i, static_cast<std::int64_t>(*v));
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(stmt_); }

  [[nodiscard]] std::int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  [[nodiscard]] std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  [[nodiscard]] std::optional<int> opt_int(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return static_cast<int>(sqlite3_column_int64(stmt_, col));
  }
  [[nodiscard]] std::optional<std::string> opt_text(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return text(col);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kFileColumns =
    "f.id, f.filename, p.name, f.version, f.kind, f.sha256, f.size, f.upload_time, "
    "f.requires_python, f.metadata_sha256, f.metadata_size, f.yanked, f.yanked_reason, "
    "f.build_tag, f.python_tag, f.abi_tag, f.platform_tag, f.backend, f.cuda_major, "
    "f.cuda_minor, f.rocm_major, f.rocm_minor, f.torch_major, f.torch_minor, f.cxx11_abi, "
    "f.label_extra, "
    "EXISTS (SELECT 1 FROM damaged_blobs d WHERE d.sha256 IN (f.sha256, f.metadata_sha256))";

std::string_view backend_name(core::Backend b) {
  switch (b) {
    case core::Backend::none:
      return "none";
    case core::Backend::cuda:
      return "cuda";
    case core::Backend::cpu:
      return "cpu";
    case core::Backend::rocm:
      return "rocm";
  }
  return "none";
}

core::Backend parse_backend(std::string_view s) {
  if (s == "cuda") return core::Backend::cuda;
  if (s == "cpu") return core::Backend::cpu;
  if (s == "rocm") return core::Backend::rocm;
  return core::Backend::none;
}

core::FileRecord read_file_row(const Stmt& s) {
  core::FileRecord f;
  f.id = s.i64(0);
  f.filename = s.text(1);
  f.project = s.text(2);
  f.version = s.text(3);
  f.kind = s.text(4) == "sdist" ? core::DistKind::sdist : core::DistKind::wheel;
  f.sha256 = s.text(5);
  f.size = static_cast<std::uint64_t>(s.i64(6));
  f.upload_time = s.i64(7);
  f.requires_python = s.opt_text(8);
  f.metadata_sha256 = s.text(9);
  f.metadata_size = static_cast<std::uint64_t>(s.i64(10));
  if (s.i64(11) != 0) f.yanked = s.opt_text(12).value_or("");
  f.tags.build_tag = s.opt_text(13);
  f.tags.python_tag = s.text(14);
  f.tags.abi_tag = s.text(15);
  f.tags.platform_tag = s.text(16);
  core::VariantHints& h = f.hints;
  h.backend = parse_backend(s.text(17));
  h.cuda_major = s.opt_int(18);
  h.cuda_minor = s.opt_int(19);
  h.rocm_major = s.opt_int(20);
  h.rocm_minor = s.opt_int(21);
  if (const auto major = s.opt_int(22), minor = s.opt_int(23); major && minor) {
    h.torch = core::TorchSeries{*major, *minor};
  }
  if (const auto abi = s.opt_int(24)) h.cxx11_abi = *abi != 0;
  const std::string extra = s.text(25);
  for (const auto part : split(extra, '.')) {
    if (!part.empty()) h.extra.emplace_back(part);
  }
  f.damaged = s.i64(26) != 0;
  return f;
}

/// Binds the nine hint columns (backend .. label_extra) starting at parameter `first`.
void bind_hints(Stmt& s, int first, const core::VariantHints& h) {
  std::string extra;
  for (const auto& part : h.extra) {
    if (!extra.empty()) extra += '.';
    extra += part;
  }
  s.bind(first, backend_name(h.backend))
      .bind(first + 1, h.cuda_major)
      .bind(first + 2, h.cuda_minor)
      .bind(first + 3, h.rocm_major)
      .bind(first + 4, h.rocm_minor)
      .bind(first + 5, h.torch ? std::optional<int>(h.torch->major) : std::nullopt)
      .bind(first + 6, h.torch ? std::optional<int>(h.torch->minor) : std::nullopt)
      .bind(first + 7, h.cxx11_abi ? std::optional<int>(*h.cxx11_abi ? 1 : 0) : std::nullopt)
      .bind(first + 8, extra);
}

class SqliteCatalog final : public Catalog {
 public:
  explicit SqliteCatalog(sqlite3* db) : db_(db) {}
  SqliteCatalog(const SqliteCatalog&) = delete;
  SqliteCatalog& operator=(const SqliteCatalog&) = delete;
  ~SqliteCatalog() override { sqlite3_close_v2(db_); }

  Status init() {
    // The busy timeout first: switching to WAL waits for locks too, e.g. while another
    // process recovers the WAL of a writer that was killed.
    for (const char* pragma : {"PRAGMA busy_timeout=10000", "PRAGMA journal_mode=WAL",
                               "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      if (auto st = exec(pragma); !st) return st;
    }
    if (auto st = migrate(); !st) return st;
    if (auto st = backfill_canonical(); !st) return st;
    return backfill_hints();
  }

  Result<std::optional<core::FileRecord>> find_file(std::string_view filename) override {
    std::lock_guard lock(mu_);
    return find_file_locked(filename);
  }

  Result<std::optional<core::FileRecord>> find_same_file(std::string_view filename,
                                                         std::string_view sha256) override {
    std::lock_guard lock(mu_);
    return find_canonical_locked(filename, sha256);
  }

  Result<Inserted> insert_file(const NewFile& nf, const std::function<Status()>& publish) override {
    std::lock_guard lock(mu_);
    // Only a new row is committed; identical and conflict answers change nothing.
    return write_transaction([&] { return insert_file_locked(nf, publish); },
                             [](const auto& r) { return r.first == InsertOutcome::inserted; });
  }

  Result<std::vector<Result<Inserted>>> insert_files(
      const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
      const std::function<Status()>& before_commit) override {
    std::lock_guard lock(mu_);
    using Results = std::vector<Result<Inserted>>;
    bool wrote = false;
    return write_transaction(
        [&]() -> Result<Results> {
          Results results;
          results.reserve(files.size());
          for (std::size_t i = 0; i < files.size(); ++i) {
            bool publish_failed = false;
            auto r = insert_file_locked(files[i], [&]() -> Status {
              auto st = publish(i);
              publish_failed = !st;
              return st;
            });
            // A failed publish comes before the file's first write: the transaction holds
            // the other files' rows unchanged, so only this file is rejected.
            if (!r && !publish_failed) return r.error();
            if (r && r->first == InsertOutcome::inserted) wrote = true;
            results.push_back(std::move(r));
          }
          if (wrote && before_commit) {
            if (auto st = before_commit(); !st) return st.error();
          }
          return results;
        },
        [&](const Results&) { return wrote; });
  }

  Result<std::uint64_t> generation() override {
    std::lock_guard lock(mu_);
    return generation_locked();
  }

  Result<Contents> load() override {
    std::lock_guard lock(mu_);
    if (auto st = exec("BEGIN"); !st) return st.error();
    auto contents = load_locked();
    (void)exec("COMMIT");
    return contents;
  }

  Result<Contents> load_project(std::string_view project) override {
    std::lock_guard lock(mu_);
    if (auto st = exec("BEGIN"); !st) return st.error();
    auto contents = load_locked(project);
    (void)exec("COMMIT");
    return contents;
  }

  Result<std::vector<std::string>> set_yanked(const std::string_view project,
                                              const std::optional<std::string>& version,
                                              const std::optional<std::string>& filename,
                                              const std::optional<std::string>& reason) override {
    std::optional<core::Version> wanted;
    if (version) {
      auto v = core::Version::parse(*version);
      if (!v) return v.error();
      wanted = std::move(*v);
    }
    std::lock_guard lock(mu_);
    return write_transaction([&] { return set_yanked_locked(project, wanted, filename, reason); },
                             [](const auto&) { return true; });
  }

  Result<core::ProjectRecord> set_claim(std::string_view project,
                                        const core::ProjectClaim& claim) override {
    std::lock_guard lock(mu_);
    return write_transaction([&] { return set_claim_locked(project, claim); },
                             [](const auto&) { return true; });
  }

  Result<core::FileRecord> delete_file(std::string_view filename) override {
    std::lock_guard lock(mu_);
    return write_transaction([&] { return delete_file_locked(filename); },
                             [](const auto&) { return true; });
  }

  Result<core::FileRecord> delete_file_locked(std::string_view filename) {
    auto found = find_file_locked(filename);
    if (!found) return found.error();
    if (!found->has_value()) {
      return make_error(Errc::not_found, "no such file: " + std::string(filename));
    }
    const core::FileRecord f = **found;
    Stmt reserve(db_,
                 "INSERT OR REPLACE INTO deleted_files (filename, project, sha256, deleted_at,"
                 " canonical) VALUES (?, ?, ?, ?, ?)");
    reserve.bind(1, f.filename)
        .bind(2, f.project)
        .bind(3, f.sha256)
        .bind(4, now_micros())
        .bind(5, core::canonical_file_key(f.filename));
    Stmt del(db_, "DELETE FROM files WHERE id = ?");
    del.bind(1, f.id);
    if (reserve.step() != SQLITE_DONE || del.step() != SQLITE_DONE) {
      return sqlite_error(db_, "delete file");
    }
    return f;
  }

  Result<bool> is_reserved(std::string_view filename) override {
    std::lock_guard lock(mu_);
    auto found = find_reservation_locked(filename);
    if (!found) return found.error();
    return found->has_value();
  }

  Result<std::optional<DeletedFile>> find_reservation(std::string_view filename) override {
    std::lock_guard lock(mu_);
    return find_reservation_locked(filename);
  }

  Result<std::vector<DeletedFile>> deleted_files(std::string_view project) override {
    std::lock_guard lock(mu_);
    Stmt s(db_,
           "SELECT filename, project, sha256 FROM deleted_files WHERE project = ?"
           " ORDER BY filename");
    if (!s.valid()) return sqlite_error(db_, "prepare deleted-file listing");
    s.bind(1, project);
    std::vector<DeletedFile> out;
    int rc = SQLITE_ROW;
    while ((rc = s.step()) == SQLITE_ROW)
      out.push_back(DeletedFile{s.text(0), s.text(1), s.text(2)});
    if (rc != SQLITE_DONE) return sqlite_error(db_, "deleted-file listing");
    return out;
  }

  Result<TokenRecord> revoke_token(std::int64_t id) override {
    std::lock_guard lock(mu_);
    Stmt u(db_, "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?");
    u.bind(1, now_micros()).bind(2, id);
    if (u.step() != SQLITE_DONE) return sqlite_error(db_, "revoke token");
    if (sqlite3_changes(db_) == 0)
      return make_error(Errc::not_found, "no token #" + std::to_string(id));
    Stmt s(db_, (std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE id = ?").c_str());
    s.bind(1, id);
    if (s.step() != SQLITE_ROW) return sqlite_error(db_, "read token");
    return read_token_row(s);
  }

  static constexpr const char* kTokenColumns =
      "id, hash, scope, project, description, created_at, revoked_at";

  static TokenRecord read_token_row(const Stmt& s) {
    TokenRecord t;
    t.id = s.i64(0);
    t.hash = s.text(1);
    t.scope = parse_scope(s.text(2)).value_or(Scope::read);
    t.project = s.opt_text(3);
    t.description = s.text(4);
    t.created_at = s.i64(5);
    t.revoked = s.opt_text(6).has_value();
    return t;
  }

  Result<TokenRecord> insert_token(const TokenRecord& token) override {
    std::lock_guard lock(mu_);
    Stmt s(db_,
           "INSERT INTO tokens (hash, scope, project, description, created_at) "
           "VALUES (?, ?, ?, ?, ?)");
    if (!s.valid()) return sqlite_error(db_, "prepare token insert");
    s.bind(1, token.hash)
        .bind(2, scope_name(token.scope))
        .bind(3, token.project)
        .bind(4, token.description)
        .bind(5, token.created_at);
    if (s.step() != SQLITE_DONE) return sqlite_error(db_, "insert token");
    TokenRecord stored = token;
    stored.id = sqlite3_last_insert_rowid(db_);
    return stored;
  }

  Result<core::FileRecord> restore_file(std::string_view filename, std::string_view sha256,
                                        const std::function<Status()>& publish) override {
    std::lock_guard lock(mu_);
    return write_transaction(
        [&]() -> Result<core::FileRecord> {
          auto found = find_file_locked(filename);
          if (!found) return found.error();
          if (!found->has_value()) {
            return make_error(Errc::not_found, "no such file: " + std::string(filename));
          }
          core::FileRecord f = std::move(**found);
          if (f.sha256 != sha256) {
            return make_error(Errc::conflict, std::string(filename) + " holds other bytes");
          }
          if (publish) {
            if (auto st = publish(); !st) return st.error();
          }
          if (auto st = forget_damage_locked({f.sha256, f.metadata_sha256}); !st) {
            return st.error();
          }
          f.damaged = false;
          return f;
        },
        [](const auto&) { return true; });
  }

  Result<bool> mark_damaged(std::string_view sha256, std::string_view detail,
                            const std::function<Result<bool>()>& quarantine) override {
    std::lock_guard lock(mu_);
    return write_transaction(
        [&]() -> Result<bool> {
          if (quarantine) {
            auto moved = quarantine();
            if (!moved) return moved.error();
            if (!*moved) return false;
          }
          Stmt s(
              db_,
              "INSERT OR REPLACE INTO damaged_blobs (sha256, detail, found_at) VALUES (?, ?, ?)");
          if (!s.valid()) return sqlite_error(db_, "prepare damage record");
          s.bind(1, sha256).bind(2, detail).bind(3, now_micros());
          if (s.step() != SQLITE_DONE) return sqlite_error(db_, "record damaged blob");
          return true;
        },
        [](bool marked) { return marked; });
  }

  Status clear_damaged(const std::vector<std::string>& sha256s) override {
    std::lock_guard lock(mu_);
    return write_transaction([&] { return forget_damage_locked(sha256s); },
                             [](const auto&) { return true; });
  }

  Result<std::vector<DamagedBlob>> damaged_blobs() override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT sha256, detail, found_at FROM damaged_blobs ORDER BY sha256");
    if (!s.valid()) return sqlite_error(db_, "prepare damaged blob list");
    std::vector<DamagedBlob> out;
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW)
      out.push_back(DamagedBlob{s.text(0), s.text(1), s.i64(2)});
    if (rc != SQLITE_DONE) return sqlite_error(db_, "list damaged blobs");
    return out;
  }

  Result<std::vector<BlobRef>> referenced_blobs() override {
    std::lock_guard lock(mu_);
    if (auto st = exec("BEGIN"); !st) return st.error();
    auto refs = referenced_blobs_locked();
    (void)exec("COMMIT");
    return refs;
  }

  Status backup_to(const std::filesystem::path& dest) override {
    // O_EXCL: a backup never overwrites anything, not even an older backup.
    const int fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
      const int err = errno;
      if (err == EEXIST) return make_error(Errc::conflict, dest.string() + " exists already");
      return errno_error(err, "create " + dest.string());
    }
    ::close(fd);
    sqlite3* out = nullptr;
    if (sqlite3_open_v2(dest.c_str(), &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      Error e = make_error(
          Errc::io, "open " + dest.string() + ": " + (out ? sqlite3_errmsg(out) : "out of memory"));
      sqlite3_close_v2(out);
      return e;
    }
    Status result = backup_into(out, dest);
    if (sqlite3_close_v2(out) != SQLITE_OK && result) {
      result = make_error(Errc::io, "close " + dest.string());
    }
    if (!result) return result;
    // The copy must be on disk before anything (BACKUP-INFO) says the backup is complete.
    const int sync_fd = ::open(dest.c_str(), O_RDONLY | O_CLOEXEC);
    if (sync_fd < 0 || ::fsync(sync_fd) != 0) {
      const int err = errno;
      if (sync_fd >= 0) ::close(sync_fd);
      return errno_error(err, "fsync " + dest.string());
    }
    ::close(sync_fd);
    return ok_status();
  }

 private:
  /// Runs `body` (which returns a Result) inside BEGIN IMMEDIATE; commits when it succeeded and
  /// `keep(value)` says so, rolls back otherwise. Returns the body's result or the COMMIT error.
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

  Status exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = std::string("sqlite: ") + (err ? err : "unknown error");
      sqlite3_free(err);
      return sqlite_failure(db_, std::move(message));
    }
    return ok_status();
  }

  Status migrate() {
    if (auto st = exec("BEGIN IMMEDIATE"); !st) return st;
    Stmt v(db_, "PRAGMA user_version");
    if (!v.valid() || v.step() != SQLITE_ROW) {
      (void)exec("ROLLBACK");
      return sqlite_error(db_, "read schema version");
    }
    const auto current = static_cast<std::size_t>(v.i64(0));
    constexpr std::size_t kLatest = std::size(kMigrations);
    if (current > kLatest) {
      (void)exec("ROLLBACK");
      return make_error(Errc::internal, "database schema version " + std::to_string(current) +
                                            " is newer than this wheelforge (" +
                                            std::to_string(kLatest) + ")");
    }
    for (std::size_t i = current; i < kLatest; ++i) {
      if (auto st = exec(kMigrations[i]); !st) {
        (void)exec("ROLLBACK");
        return make_error(Errc::internal,
                          "migration " + std::to_string(i + 1) + " failed: " + st.error().message);
      }
    }
    const std::string set_version = "PRAGMA user_version = " + std::to_string(kLatest);
    if (auto st = exec(set_version.c_str()); !st) {
      (void)exec("ROLLBACK");
      return st;
    }
    return exec("COMMIT");
  }

  // Computes the canonical keys of rows stored before keys existed. Rows whose keys collide
  // stay as they are (both files remain served); only new files are held to the rule.
  Status backfill_canonical() {
    for (const char* table : {"files", "deleted_files"}) {
      // Read first: after the first open there is nothing to do, and no process should wait
      // for the write lock (held by a long ingest batch, say) just to find that out.
      int rc = SQLITE_OK;
      {
        const std::string pending =
            std::string("SELECT 1 FROM ") + table + " WHERE canonical = '' LIMIT 1";
        Stmt check(db_, pending.c_str());
        if (!check.valid()) return sqlite_error(db_, "prepare canonical-name check");
        rc = check.step();
      }  // finalized: its read ends before the write transaction starts
      if (rc == SQLITE_DONE) continue;
      if (rc != SQLITE_ROW) return sqlite_error(db_, "canonical-name check");
      if (auto st = exec("BEGIN IMMEDIATE"); !st) return st;
      std::vector<std::pair<std::string, std::string>> updates;  // filename, key
      {
        const std::string sql =
            std::string("SELECT filename FROM ") + table + " WHERE canonical = ''";
        Stmt s(db_, sql.c_str());
        if (!s.valid()) {
          (void)exec("ROLLBACK");
          return sqlite_error(db_, "prepare canonical-name backfill");
        }
        while (s.step() == SQLITE_ROW) {
          std::string filename = s.text(0);
          std::string key = core::canonical_file_key(filename);
          updates.emplace_back(std::move(filename), std::move(key));
        }
      }
      const std::string sql =
          std::string("UPDATE ") + table + " SET canonical = ? WHERE filename = ?";
      for (const auto& [filename, key] : updates) {
        Stmt u(db_, sql.c_str());
        u.bind(1, key).bind(2, filename);
        if (u.step() != SQLITE_DONE) {
          (void)exec("ROLLBACK");
          return sqlite_error(db_, "backfill canonical names");
        }
      }
      if (auto st = exec("COMMIT"); !st) return st;
    }
    return ok_status();
  }

  // Computes the variant hints of rows stored before hints existed (or by an older parser).
  Status backfill_hints() {
    if (auto st = exec("BEGIN IMMEDIATE"); !st) return st;
    std::vector<std::pair<std::int64_t, core::VariantHints>> updates;
    {
      Stmt s(db_,
             "SELECT f.id, p.name, f.version, f.requires_dist FROM files f"
             " JOIN projects p ON p.id = f.project_id WHERE f.hints_version < ?");
      if (!s.valid()) {
        (void)exec("ROLLBACK");
        return sqlite_error(db_, "prepare hint backfill");
      }
      s.bind(1, kHintsVersion);
      while (s.step() == SQLITE_ROW) {
        std::vector<std::string> requires_dist;
        const std::string joined = s.text(3);
        for (const auto line : split(joined, '\n')) {
          if (!line.empty()) requires_dist.emplace_back(line);
        }
        updates.emplace_back(s.i64(0), hints_for_row(s.text(1), s.text(2), requires_dist));
      }
    }
    for (const auto& [id, hints] : updates) {
      Stmt u(db_,
             "UPDATE files SET backend = ?, cuda_major = ?, cuda_minor = ?, rocm_major = ?,"
             " rocm_minor = ?, torch_major = ?, torch_minor = ?, cxx11_abi = ?, label_extra = ?,"
             " hints_version = ? WHERE id = ?");
      bind_hints(u, 1, hints);
      u.bind(10, kHintsVersion).bind(11, id);
      if (u.step() != SQLITE_DONE) {
        (void)exec("ROLLBACK");
        return sqlite_error(db_, "backfill hints");
      }
    }
    return exec("COMMIT");
  }

  static core::VariantHints hints_for_row(const std::string& project, const std::string& version,
                                          const std::vector<std::string>& requires_dist) {
    auto parsed = core::Version::parse(version);
    if (!parsed) return {};
    auto hints = core::hints_for_distribution(project, parsed->public_str(), parsed->local_str(),
                                              requires_dist);
    // A stored file was accepted once; if its label and pins disagree the label is kept.
    return hints ? *hints : core::parse_local_label(parsed->local_str());
  }

  /// Drops the damage records of blobs that were just published (or found intact).
  Status forget_damage_locked(const std::vector<std::string>& sha256s) {
    for (const auto& sha : sha256s) {
      Stmt s(db_, "DELETE FROM damaged_blobs WHERE sha256 = ?");
      if (!s.valid()) return sqlite_error(db_, "prepare damage removal");
      s.bind(1, sha);
      if (s.step() != SQLITE_DONE) return sqlite_error(db_, "forget damaged blob");
    }
    return ok_status();
  }

  Result<std::optional<core::FileRecord>> find_file_locked(std::string_view filename) {
    const std::string sql = std::string("SELECT ") + kFileColumns +
                            " FROM files f JOIN projects p ON p.id = f.project_id"
                            " WHERE f.filename = ?";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return sqlite_error(db_, "prepare file lookup");
    s.bind(1, filename);
    const int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<core::FileRecord>(read_file_row(s));
    if (rc == SQLITE_DONE) return std::optional<core::FileRecord>();
    return sqlite_error(db_, "file lookup");
  }

  /// The live file whose name is `filename` after normalization (core::canonical_file_key).
  /// Databases from before the rule may hold several: the one with these bytes, else the one
  /// of this exact name, else the oldest.
  Result<std::optional<core::FileRecord>> find_canonical_locked(std::string_view filename,
                                                                std::string_view sha256) {
    const std::string sql = std::string("SELECT ") + kFileColumns +
                            " FROM files f JOIN projects p ON p.id = f.project_id"
                            " WHERE f.canonical = ?"
                            " ORDER BY f.sha256 = ? DESC, f.filename = ? DESC, f.id LIMIT 1";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return sqlite_error(db_, "prepare file lookup");
    s.bind(1, core::canonical_file_key(filename)).bind(2, sha256).bind(3, filename);
    const int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<core::FileRecord>(read_file_row(s));
    if (rc == SQLITE_DONE) return std::optional<core::FileRecord>();
    return sqlite_error(db_, "file lookup");
  }

  /// The deleted file whose name is `filename` after normalization, if any.
  Result<std::optional<DeletedFile>> find_reservation_locked(std::string_view filename) {
    Stmt s(db_,
           "SELECT filename, project, sha256 FROM deleted_files WHERE canonical = ?"
           " ORDER BY filename = ? DESC, deleted_at LIMIT 1");
    if (!s.valid()) return sqlite_error(db_, "prepare reserved-name lookup");
    s.bind(1, core::canonical_file_key(filename)).bind(2, filename);
    const int rc = s.step();
    if (rc == SQLITE_ROW)
      return std::optional<DeletedFile>(DeletedFile{s.text(0), s.text(1), s.text(2)});
    if (rc == SQLITE_DONE) return std::optional<DeletedFile>();
    return sqlite_error(db_, "reserved-name lookup");
  }

  Result<Inserted> insert_file_locked(const NewFile& nf, const std::function<Status()>& publish) {
    const core::FileRecord& f = nf.file;
    // Claims first: an uploader learns nothing about a project it may not upload to.
    auto claim = project_claim_locked(f.project);
    if (!claim) return claim.error();
    const auto decision = core::decide_upload(*claim, nf.uploader, f.project);
    if (decision == core::ClaimDecision::forbidden) return std::pair{InsertOutcome::forbidden, f};
    // Spellings of one name are one file: inside this write transaction, so that two uploads
    // of different spellings (from any process) cannot both win.
    auto existing = find_canonical_locked(f.filename, f.sha256);
    if (!existing) return existing.error();
    if (existing->has_value()) {
      const auto outcome =
          (*existing)->sha256 == f.sha256 ? InsertOutcome::identical : InsertOutcome::conflict;
      return std::pair{outcome, **existing};
    }
    auto reserved = find_reservation_locked(f.filename);
    if (!reserved) return reserved.error();
    if (reserved->has_value()) {
      core::FileRecord deleted;
      deleted.filename = (*reserved)->filename;
      deleted.project = (*reserved)->project;
      deleted.sha256 = (*reserved)->sha256;
      return std::pair{InsertOutcome::reserved, std::move(deleted)};
    }
    if (publish) {
      if (auto st = publish(); !st) return st.error();
    }
    if (auto st = forget_damage_locked({f.sha256, f.metadata_sha256}); !st) return st.error();
    if (!claim->has_value()) {
      Stmt up(db_,
              "INSERT INTO projects (name, display_name, created_at, claimed_by, owner_token_id)"
              " VALUES (?, ?, ?, ?, ?)");
      if (!up.valid()) return sqlite_error(db_, "prepare project insert");
      up.bind(1, f.project).bind(2, nf.display_name).bind(3, f.upload_time);
      bind_claim(up, 4, core::claim_for(nf.uploader));
      if (up.step() != SQLITE_DONE) return sqlite_error(db_, "insert project");
    } else if (decision == core::ClaimDecision::claim) {
      if (auto st = write_claim_locked(f.project, core::claim_for(nf.uploader)); !st) {
        return st.error();
      }
    }

    std::string requires_dist;
    for (const auto& r : nf.requires_dist) {
      requires_dist += r;
      requires_dist += '\n';
    }
    Stmt ins(db_,
             "INSERT INTO files (project_id, filename, version, kind, sha256, size, upload_time,"
             " requires_python, metadata_sha256, metadata_size, build_tag, python_tag, abi_tag,"
             " platform_tag, requires_dist, backend, cuda_major, cuda_minor, rocm_major,"
             " rocm_minor, torch_major, torch_minor, cxx11_abi, label_extra, hints_version,"
             " canonical)"
             " SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
             " ? FROM projects WHERE name = ?");
    if (!ins.valid()) return sqlite_error(db_, "prepare file insert");
    ins.bind(1, f.filename)
        .bind(2, f.version)
        .bind(3, f.kind == core::DistKind::sdist ? "sdist" : "wheel")
        .bind(4, f.sha256)
        .bind(5, static_cast<std::int64_t>(f.size))
        .bind(6, f.upload_time)
        .bind(7, f.requires_python)
        .bind(8, f.metadata_sha256)
        .bind(9, static_cast<std::int64_t>(f.metadata_size))
        .bind(10, f.tags.build_tag)
        .bind(11, f.tags.python_tag)
        .bind(12, f.tags.abi_tag)
        .bind(13, f.tags.platform_tag)
        .bind(14, requires_dist);
    bind_hints(ins, 15, f.hints);
    ins.bind(24, kHintsVersion).bind(25, core::canonical_file_key(f.filename)).bind(26, f.project);
    if (ins.step() != SQLITE_DONE) return sqlite_error(db_, "insert file");
    core::FileRecord stored = f;
    stored.id = sqlite3_last_insert_rowid(db_);
    return std::pair{InsertOutcome::inserted, std::move(stored)};
  }

  /// A project's claim; nullopt when the project does not exist.
  Result<std::optional<core::ProjectClaim>> project_claim_locked(std::string_view project) {
    Stmt s(db_, "SELECT claimed_by, owner_token_id FROM projects WHERE name = ?");
    if (!s.valid()) return sqlite_error(db_, "prepare claim lookup");
    s.bind(1, project);
    const int rc = s.step();
    if (rc == SQLITE_DONE) return std::optional<core::ProjectClaim>();
    if (rc != SQLITE_ROW) return sqlite_error(db_, "claim lookup");
    return std::optional<core::ProjectClaim>(read_claim(s, 0));
  }

  static core::ProjectClaim read_claim(Stmt& s, int col) {
    const auto by = s.opt_text(col);
    if (!by) return {};
    if (*by == "admin") return core::ProjectClaim{core::ClaimKind::admin, 0};
    return core::ProjectClaim{core::ClaimKind::token, s.i64(col + 1)};
  }

  static void bind_claim(Stmt& s, int col, const core::ProjectClaim& claim) {
    switch (claim.kind) {
      case core::ClaimKind::unclaimed:
        s.bind(col, std::optional<std::string>()).bind(col + 1, std::optional<int>());
        break;
      case core::ClaimKind::admin:
        s.bind(col, "admin").bind(col + 1, std::optional<int>());
        break;
      case core::ClaimKind::token:
        s.bind(col, "token").bind(col + 1, claim.token_id);
        break;
    }
  }

  Status write_claim_locked(std::string_view project, const core::ProjectClaim& claim) {
    Stmt s(db_, "UPDATE projects SET claimed_by = ?, owner_token_id = ? WHERE name = ?");
    if (!s.valid()) return sqlite_error(db_, "prepare claim update");
    bind_claim(s, 1, claim);
    s.bind(3, project);
    if (s.step() != SQLITE_DONE) return sqlite_error(db_, "claim update");
    return ok_status();
  }

  Result<core::ProjectRecord> set_claim_locked(std::string_view project,
                                               const core::ProjectClaim& claim) {
    auto existing = project_claim_locked(project);
    if (!existing) return existing.error();
    if (!existing->has_value()) {
      return make_error(Errc::not_found, "no such project: " + std::string(project));
    }
    if (claim.kind == core::ClaimKind::token) {
      Stmt t(db_, "SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL");
      if (!t.valid()) return sqlite_error(db_, "prepare token lookup");
      t.bind(1, claim.token_id);
      if (t.step() != SQLITE_ROW) {
        return make_error(Errc::not_found,
                          "no such token (or revoked): " + std::to_string(claim.token_id));
      }
    }
    if (auto st = write_claim_locked(project, claim); !st) return st.error();
    auto updated = projects_locked(project);
    if (!updated) return updated.error();
    if (updated->empty()) return make_error(Errc::internal, "claimed project vanished");
    return std::move(updated->front());
  }

  Result<std::vector<std::string>> set_yanked_locked(std::string_view project,
                                                     const std::optional<core::Version>& version,
                                                     const std::optional<std::string>& filename,
                                                     const std::optional<std::string>& reason) {
    const std::string sql = std::string("SELECT ") + kFileColumns +
                            " FROM files f JOIN projects p ON p.id = f.project_id"
                            " WHERE p.name = ? ORDER BY f.filename";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return sqlite_error(db_, "prepare yank");
    s.bind(1, project);
    std::vector<std::pair<std::int64_t, std::string>> matched;
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) {
      const core::FileRecord f = read_file_row(s);
      if (filename && f.filename != *filename) continue;
      if (version) {
        auto v = core::Version::parse(f.version);
        if (!v || v->public_str() != version->public_str() ||
            (version->has_local() && v->local_str() != version->local_str())) {
          continue;
        }
      }
      matched.emplace_back(f.id, f.filename);
    }
    if (rc != SQLITE_DONE) return sqlite_error(db_, "yank lookup");
    if (matched.empty()) {
      return make_error(Errc::not_found,
                        "no matching file in project '" + std::string(project) + "'");
    }
    std::vector<std::string> names;
    for (const auto& [id, name] : matched) {
      Stmt u(db_, "UPDATE files SET yanked = ?, yanked_reason = ? WHERE id = ?");
      u.bind(1, static_cast<std::int64_t>(reason ? 1 : 0)).bind(2, reason).bind(3, id);
      if (u.step() != SQLITE_DONE) return sqlite_error(db_, "yank");
      names.push_back(name);
    }
    return names;
  }

  Result<std::uint64_t> generation_locked() {
    Stmt s(db_, "SELECT generation FROM meta WHERE id = 1");
    if (!s.valid() || s.step() != SQLITE_ROW) return sqlite_error(db_, "read generation");
    return static_cast<std::uint64_t>(s.i64(0));
  }

  /// Everything, or with `only` one project and its files.
  /// Every project (sorted by name), or only the one named `only` (none when absent).
  Result<std::vector<core::ProjectRecord>> projects_locked(std::optional<std::string_view> only) {
    const std::string sql =
        std::string(
            "SELECT p.name, p.display_name, COALESCE(MAX(f.upload_time), p.created_at),"
            " p.claimed_by, p.owner_token_id"
            " FROM projects p LEFT JOIN files f ON f.project_id = p.id") +
        (only ? " WHERE p.name = ?" : "") + " GROUP BY p.id ORDER BY p.name";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return sqlite_error(db_, "prepare project list");
    if (only) s.bind(1, *only);
    std::vector<core::ProjectRecord> out;
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) {
      out.push_back(core::ProjectRecord{s.text(0), s.text(1), s.i64(2), read_claim(s, 3)});
    }
    if (rc != SQLITE_DONE) return sqlite_error(db_, "list projects");
    return out;
  }

  Result<Contents> load_locked(std::optional<std::string_view> only = std::nullopt) {
    Contents c;
    auto gen = generation_locked();
    if (!gen) return gen.error();
    c.generation = *gen;
    auto projects = projects_locked(only);
    if (!projects) return projects.error();
    c.projects = std::move(*projects);
    {
      const std::string sql = std::string("SELECT ") + kFileColumns +
                              " FROM files f JOIN projects p ON p.id = f.project_id" +
                              (only ? " WHERE p.name = ?" : "") + " ORDER BY p.name, f.filename";
      Stmt s(db_, sql.c_str());
      if (!s.valid()) return sqlite_error(db_, "prepare file list");
      if (only) s.bind(1, *only);
      int rc = 0;
      while ((rc = s.step()) == SQLITE_ROW) c.files.push_back(read_file_row(s));
      if (rc != SQLITE_DONE) return sqlite_error(db_, "list files");
    }
    {
      Stmt s(db_, (std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY id").c_str());
      if (!s.valid()) return sqlite_error(db_, "prepare token list");
      int rc = 0;
      while ((rc = s.step()) == SQLITE_ROW) c.tokens.push_back(read_token_row(s));
      if (rc != SQLITE_DONE) return sqlite_error(db_, "list tokens");
    }
    return c;
  }

  Result<std::vector<BlobRef>> referenced_blobs_locked() {
    Stmt s(db_,
           "SELECT filename, sha256, size, metadata_sha256, metadata_size FROM files"
           " ORDER BY filename");
    if (!s.valid()) return sqlite_error(db_, "prepare blob references");
    std::vector<BlobRef> refs;
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) {
      const std::string filename = s.text(0);
      refs.push_back(
          BlobRef{s.text(1), BlobRole::file, filename, static_cast<std::uint64_t>(s.i64(2))});
      refs.push_back(
          BlobRef{s.text(3), BlobRole::metadata, filename, static_cast<std::uint64_t>(s.i64(4))});
    }
    if (rc != SQLITE_DONE) return sqlite_error(db_, "list blob references");
    return refs;
  }

  // Copies every page in one step inside one read transaction: in WAL mode writers in other
  // processes go on, and the copy is the database as of the transaction's first read.
  Status backup_into(sqlite3* out, const std::filesystem::path& dest) {
    std::lock_guard lock(mu_);
    if (auto st = exec("BEGIN"); !st) return st;
    if (auto gen = generation_locked(); !gen) {
      (void)exec("ROLLBACK");
      return gen.error();
    }
    sqlite3_backup* backup = sqlite3_backup_init(out, "main", db_, "main");
    if (backup == nullptr) {
      (void)exec("ROLLBACK");
      return sqlite_error(out, "back up into " + dest.string());
    }
    const int rc = sqlite3_backup_step(backup, -1);
    sqlite3_backup_finish(backup);
    (void)exec("COMMIT");
    if (rc != SQLITE_DONE) {
      const Errc code = (rc == SQLITE_FULL) ? Errc::storage_full : Errc::io;
      return make_error(code, "back up into " + dest.string() + ": " + sqlite3_errstr(rc));
    }
    return ok_status();
  }

  std::mutex mu_;
  sqlite3* db_;
};

}  // namespace

std::string_view scope_name(Scope scope) {
  switch (scope) {
    case Scope::read:
      return "read";
    case Scope::upload:
      return "upload";
    case Scope::admin:
      return "admin";
  }
  return "read";
}

std::optional<Scope> parse_scope(std::string_view name) {
  if (name == "read") return Scope::read;
  if (name == "upload") return Scope::upload;
  if (name == "admin") return Scope::admin;
  return std::nullopt;
}

Result<std::unique_ptr<Catalog>> open_sqlite_catalog(const std::filesystem::path& db_path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(db_path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error e = make_error(
        Errc::io, "open " + db_path.string() + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close_v2(db);
    return e;
  }
  auto catalog = std::make_unique<SqliteCatalog>(db);
  if (auto st = catalog->init(); !st) return st.error();
  return std::unique_ptr<Catalog>(std::move(catalog));
}

}  // namespace wf::catalog
