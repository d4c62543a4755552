// The catalog schema: its migrations, and the backfills of columns added after rows existed.

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "catalog/sqlite_catalog_impl.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::catalog::detail {

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
    // 11: token lifecycle (expiry, last use, creator), who uploaded each file, and the audit
    // trail. A token's last use is written at most once a minute and changes no page: the
    // tokens trigger now fires only for the columns that decide what a token may do.
    R"sql(
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
ALTER TABLE tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
DROP TRIGGER tokens_upd;
CREATE TRIGGER tokens_upd AFTER UPDATE OF hash, scope, project, description, created_at,
  revoked_at, expires_at, created_by ON tokens
  BEGIN UPDATE meta SET generation = generation + 1; END;
ALTER TABLE files ADD COLUMN uploaded_by TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN uploaded_by_token INTEGER;
CREATE TABLE audit (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  action TEXT NOT NULL,
  token_id INTEGER,
  token_description TEXT NOT NULL DEFAULT '',
  origin TEXT NOT NULL DEFAULT '',
  address TEXT NOT NULL DEFAULT '',
  project TEXT NOT NULL DEFAULT '',
  target TEXT NOT NULL DEFAULT '',
  detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_at ON audit(at);
CREATE INDEX audit_project ON audit(project, at);
)sql",
    // 12: what a wheel's ELF binaries say (core::WheelFindings in its stored form,
    // core::encode_findings): NEEDED libraries, glibc floors, the CUDA runtime, the torch
    // binding. NULL for sdists and for wheels stored before wheels were inspected.
    R"sql(
ALTER TABLE files ADD COLUMN binaries TEXT;
)sql",
    // 13: a PEP 825 variant wheel's label and what its variant.json says (core::WheelVariant
    // in its stored form, core::encode_variant). NULL for every other file.
    R"sql(
ALTER TABLE files ADD COLUMN variant TEXT;
)sql",
    // 14: blobs fetched from upstream indexes and kept in the store (docs/upstreams.md):
    // gc, fsck and backup count them as referenced. Not files of this index: no page lists
    // them from here, and they move no generation.
    R"sql(
CREATE TABLE upstream_blobs (
  sha256 TEXT PRIMARY KEY,
  upstream TEXT NOT NULL,
  filename TEXT NOT NULL,
  size INTEGER NOT NULL,
  stored_at INTEGER NOT NULL
);
)sql",
    // 15: when each upstream blob was last served (microseconds; 0: never since it was
    // stored), for the least-recently-used eviction of upstream_file_cache. Written at most
    // once a minute per blob.
    R"sql(
ALTER TABLE upstream_blobs ADD COLUMN last_used_at INTEGER NOT NULL DEFAULT 0;
)sql",
    // 16: what ran a job's build command in a container (catalog::Provenance): the image, its
    // digest as the engine reported it, and the engine's command line.
    R"sql(
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN image_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN engine_command TEXT NOT NULL DEFAULT '';
)sql",
    // 17: trusted publishing (docs/publishing.md): the CI identities allowed to mint upload
    // tokens per project, and the ids (`jti`) of the OIDC tokens already exchanged, kept until
    // those tokens expire so that none is exchanged twice. Neither changes a page.
    R"sql(
CREATE TABLE trusted_publishers (
  id INTEGER PRIMARY KEY,
  project TEXT NOT NULL,
  issuer TEXT NOT NULL,
  claims TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX trusted_publishers_project ON trusted_publishers(project);
CREATE TABLE oidc_jtis (
  jti TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);
CREATE INDEX oidc_jtis_expires ON oidc_jtis(expires_at);
)sql",
    // 18: the job queue's leases: which runner claimed each job, and until when its claim
    // holds unless its heartbeat renews it (jobs.hpp, JobStore::claim).
    R"sql(
ALTER TABLE jobs ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN lease_expires_at INTEGER;
)sql",
    // 19: PEP 740 attestations (docs/publishing.md, "Attestations"): a file's provenance object,
    // a blob of its own like its METADATA ('' and 0: none); and the trusted publisher a token
    // was minted for, which the attestations it uploads must match (NULL: none).
    R"sql(
ALTER TABLE files ADD COLUMN provenance_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN provenance_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN publisher_id INTEGER;
)sql",
};

}  // namespace

Status migrate_to(Db& db, std::size_t target) {
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st;
  Stmt v(db, "PRAGMA user_version");
  if (!v.valid() || v.step() != SQLITE_ROW) {
    (void)db.exec("ROLLBACK");
    return db.error("read schema version");
  }
  const auto current = static_cast<std::size_t>(v.i64(0));
  constexpr std::size_t kLatest = std::size(kMigrations);
  if (current > kLatest) {
    (void)db.exec("ROLLBACK");
    return make_error(Errc::internal, "database schema version " + std::to_string(current) +
                                          " is newer than this wheelforge (" +
                                          std::to_string(kLatest) + ")");
  }
  target = std::min(target, kLatest);
  for (std::size_t i = current; i < target; ++i) {
    if (auto st = db.exec(kMigrations[i]); !st) {
      (void)db.exec("ROLLBACK");
      return make_error(Errc::internal,
                        "migration " + std::to_string(i + 1) + " failed: " + st.error().message);
    }
  }
  const std::string set_version =
      "PRAGMA user_version = " + std::to_string(std::max(current, target));
  if (auto st = db.exec(set_version.c_str()); !st) {
    (void)db.exec("ROLLBACK");
    return st;
  }
  return db.exec("COMMIT");
}

Status SqliteCatalog::migrate() {
  return migrate_to(db_, SIZE_MAX);
}

// Computes the canonical keys of rows stored before keys existed. Rows whose keys collide
// stay as they are (both files remain served); only new files are held to the rule.
Status SqliteCatalog::backfill_canonical() {
  for (const char* table : {"files", "deleted_files"}) {
    // Read first: after the first open there is nothing to do, and no process should wait
    // for the write lock (held by a long ingest batch, say) just to find that out.
    int rc = SQLITE_OK;
    {
      const std::string pending =
          std::string("SELECT 1 FROM ") + table + " WHERE canonical = '' LIMIT 1";
      Stmt check(db_, pending.c_str());
      if (!check.valid()) return db_.error("prepare canonical-name check");
      rc = check.step();
    }  // finalized: its read ends before the write transaction starts
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return db_.error("canonical-name check");
    if (auto st = db_.exec("BEGIN IMMEDIATE"); !st) return st;
    std::vector<std::pair<std::string, std::string>> updates;  // filename, key
    {
      const std::string sql =
          std::string("SELECT filename FROM ") + table + " WHERE canonical = ''";
      Stmt s(db_, sql.c_str());
      if (!s.valid()) {
        (void)db_.exec("ROLLBACK");
        return db_.error("prepare canonical-name backfill");
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
        (void)db_.exec("ROLLBACK");
        return db_.error("backfill canonical names");
      }
    }
    if (auto st = db_.exec("COMMIT"); !st) return st;
  }
  return ok_status();
}

// Computes the variant hints of rows stored before hints existed (or by an older parser).
Status SqliteCatalog::backfill_hints() {
  if (auto st = db_.exec("BEGIN IMMEDIATE"); !st) return st;
  std::vector<std::pair<std::int64_t, core::VariantHints>> updates;
  {
    Stmt s(db_,
           "SELECT f.id, p.name, f.version, f.requires_dist, f.variant FROM files f"
           " JOIN projects p ON p.id = f.project_id WHERE f.hints_version < ?");
    if (!s.valid()) {
      (void)db_.exec("ROLLBACK");
      return db_.error("prepare hint backfill");
    }
    s.bind(1, kHintsVersion);
    while (s.step() == SQLITE_ROW) {
      std::vector<std::string> requires_dist;
      const std::string joined = s.text(3);
      for (const auto line : split(joined, '\n')) {
        if (!line.empty()) requires_dist.emplace_back(line);
      }
      core::VariantHints hints = hints_for_row(s.text(1), s.text(2), requires_dist);
      // A variant wheel's CUDA may come from its properties (core::hints_with_variant).
      if (const auto stored = s.opt_text(4)) {
        const auto variant = core::decode_variant(*stored);
        const auto version = core::Version::parse(s.text(2));
        if (variant && version) {
          if (auto with = core::hints_with_variant(hints, version->local_str(), *variant)) {
            hints = std::move(*with);
          }
        }
      }
      updates.emplace_back(s.i64(0), std::move(hints));
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
      (void)db_.exec("ROLLBACK");
      return db_.error("backfill hints");
    }
  }
  return db_.exec("COMMIT");
}

core::VariantHints SqliteCatalog::hints_for_row(const std::string& project,
                                                const std::string& version,
                                                const std::vector<std::string>& requires_dist) {
  auto parsed = core::Version::parse(version);
  if (!parsed) return {};
  auto hints = core::hints_for_distribution(project, parsed->public_str(), parsed->local_str(),
                                            requires_dist);
  // A stored file was accepted once; if its label and pins disagree the label is kept.
  return hints ? *hints : core::parse_local_label(parsed->local_str());
}

}  // namespace wf::catalog::detail
