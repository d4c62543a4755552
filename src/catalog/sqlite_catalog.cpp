// The SQLite catalog: files, projects, snapshots of the whole catalog and backups (the class is
// in sqlite_catalog_impl.hpp; yanks, claims and tokens in sqlite_edits.cpp; the schema in
// sqlite_schema.cpp).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "catalog/row_mapping.hpp"
#include "catalog/sqlite_catalog_impl.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::catalog::detail {

const char* const kFileColumns =
    "f.id, f.filename, p.name, f.version, f.kind, f.sha256, f.size, f.upload_time, "
    "f.requires_python, f.metadata_sha256, f.metadata_size, f.yanked, f.yanked_reason, "
    "f.build_tag, f.python_tag, f.abi_tag, f.platform_tag, f.backend, f.cuda_major, "
    "f.cuda_minor, f.rocm_major, f.rocm_minor, f.torch_major, f.torch_minor, f.cxx11_abi, "
    "f.label_extra, "
    "EXISTS (SELECT 1 FROM damaged_blobs d WHERE d.sha256 IN (f.sha256, f.metadata_sha256)), "
    "f.uploaded_by, f.uploaded_by_token, f.binaries, f.variant, f.provenance_sha256, "
    "f.provenance_size";

core::FileRecord read_file_row(const Stmt& s) {
  return file_from_row(s);
}

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

Status SqliteCatalog::init() {
  if (auto st = migrate(); !st) return st;
  if (auto st = backfill_canonical(); !st) return st;
  return backfill_hints();
}

Result<std::optional<core::FileRecord>> SqliteCatalog::find_file(std::string_view filename) {
  std::lock_guard lock(mu_);
  return find_file_locked(filename);
}

Result<std::optional<core::FileRecord>> SqliteCatalog::find_same_file(std::string_view filename,
                                                                      std::string_view sha256) {
  std::lock_guard lock(mu_);
  return find_canonical_locked(filename, sha256);
}

Result<SqliteCatalog::Inserted> SqliteCatalog::insert_file(const NewFile& nf,
                                                           const std::function<Status()>& publish) {
  std::lock_guard lock(mu_);
  // Only a new row is committed; identical and conflict answers change nothing.
  return db_.write_transaction([&] { return insert_file_locked(nf, publish); },
                               [](const auto& r) { return r.first == InsertOutcome::inserted; });
}

Result<std::vector<Result<SqliteCatalog::Inserted>>> SqliteCatalog::insert_files(
    const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
    const std::function<Status()>& before_commit) {
  std::lock_guard lock(mu_);
  using Results = std::vector<Result<Inserted>>;
  bool wrote = false;
  return db_.write_transaction(
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

Result<std::uint64_t> SqliteCatalog::generation() {
  std::lock_guard lock(mu_);
  return generation_locked();
}

Result<Contents> SqliteCatalog::load() {
  std::lock_guard lock(mu_);
  return db_.read_transaction([&] { return load_locked(); });
}

Result<Contents> SqliteCatalog::load_projects(std::vector<std::string> projects) {
  // Read in groups of names (for_names): sorted and without repeats, the groups' rows come
  // sorted and once each.
  std::sort(projects.begin(), projects.end());
  projects.erase(std::unique(projects.begin(), projects.end()), projects.end());
  std::lock_guard lock(mu_);
  return db_.read_transaction([&] { return load_locked(&projects); });
}

Result<std::vector<BlobRef>> SqliteCatalog::referenced_blobs() {
  std::lock_guard lock(mu_);
  return db_.read_transaction([&] { return referenced_blobs_locked(); });
}

Status SqliteCatalog::backup_to(const std::filesystem::path& dest) {
  // O_EXCL: a backup never overwrites anything, not even an older backup.
  const int fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) return make_error(Errc::conflict, dest.string() + " exists already");
    return errno_error(err, "create " + dest.string());
  }
  ::close(fd);
  {
    auto out = Db::open(dest, sqlite::OpenMode::copy_target);
    if (!out) return out.error();
    if (auto st = backup_into(*out, dest); !st) return st;
  }  // closed
  // The copy must be on disk before anything (BACKUP-INFO) says the backup is complete.
  return fsync_file(dest);
}

Result<std::optional<core::FileRecord>> SqliteCatalog::find_file_locked(std::string_view filename) {
  const std::string sql = std::string("SELECT ") + kFileColumns +
                          " FROM files f JOIN projects p ON p.id = f.project_id"
                          " WHERE f.filename = ?";
  Stmt s(db_, sql.c_str());
  if (!s.valid()) return db_.error("prepare file lookup");
  s.bind(1, filename);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return std::optional<core::FileRecord>(read_file_row(s));
  if (rc == SQLITE_DONE) return std::optional<core::FileRecord>();
  return db_.error("file lookup");
}

/// The live file whose name is `filename` after normalization (core::canonical_file_key).
/// Databases from before the rule may hold several: the one with these bytes, else the one
/// of this exact name, else the oldest.
Result<std::optional<core::FileRecord>> SqliteCatalog::find_canonical_locked(
    std::string_view filename, std::string_view sha256) {
  const std::string sql = std::string("SELECT ") + kFileColumns +
                          " FROM files f JOIN projects p ON p.id = f.project_id"
                          " WHERE f.canonical = ?"
                          " ORDER BY f.sha256 = ? DESC, f.filename = ? DESC, f.id LIMIT 1";
  Stmt s(db_, sql.c_str());
  if (!s.valid()) return db_.error("prepare file lookup");
  s.bind(1, core::canonical_file_key(filename)).bind(2, sha256).bind(3, filename);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return std::optional<core::FileRecord>(read_file_row(s));
  if (rc == SQLITE_DONE) return std::optional<core::FileRecord>();
  return db_.error("file lookup");
}

// A variant wheel of the release whose variant.json the new one contradicts
// (core::variant_conflict), inside the write transaction so that two contradicting uploads
// racing each other cannot both be stored.
Result<std::optional<core::FileRecord>> SqliteCatalog::variant_clash_locked(
    const core::FileRecord& f) {
  const std::string sql = std::string("SELECT ") + kFileColumns +
                          " FROM files f JOIN projects p ON p.id = f.project_id"
                          " WHERE p.name = ? AND f.version = ? AND f.variant IS NOT NULL"
                          " ORDER BY f.id";
  Stmt s(db_, sql.c_str());
  if (!s.valid()) return db_.error("prepare variant lookup");
  s.bind(1, f.project).bind(2, f.version);
  int rc = SQLITE_OK;
  while ((rc = s.step()) == SQLITE_ROW) {
    core::FileRecord other = read_file_row(s);
    if (other.variant && core::variant_conflict(*f.variant, *other.variant, other.filename)) {
      return std::optional<core::FileRecord>(std::move(other));
    }
  }
  if (rc != SQLITE_DONE) return db_.error("variant lookup");
  return std::optional<core::FileRecord>();
}

Status SqliteCatalog::check_actor_token_locked(const Actor& by) {
  if (by.token_id == 0) return ok_status();
  Stmt s(db_, "SELECT revoked_at, expires_at FROM tokens WHERE id = ?");
  if (!s.valid()) return db_.error("prepare token check");
  s.bind(1, by.token_id);
  const int rc = s.step();
  const std::string token = "token #" + std::to_string(by.token_id);
  if (rc == SQLITE_DONE) return make_error(Errc::unauthorized, token + " no longer exists");
  if (rc != SQLITE_ROW) return db_.error("token check");
  if (s.opt_text(0)) return make_error(Errc::unauthorized, token + " was revoked");
  if (const auto expires = s.opt_i64(1); expires && now_micros() >= *expires) {
    return make_error(Errc::unauthorized, token + " expired at " + iso8601_micros(*expires) +
                                              ": ask an admin for a new one");
  }
  return ok_status();
}

Result<std::optional<Catalog::Inserted>> SqliteCatalog::precheck(const NewFile& nf) {
  std::lock_guard lock(mu_);
  if (auto st = check_actor_token_locked(nf.actor); !st) return st.error();
  auto claim = project_claim_locked(nf.file.project);
  if (!claim) return claim.error();
  return refusal_locked(nf, *claim);
}

Result<std::optional<Catalog::Inserted>> SqliteCatalog::refusal_locked(
    const NewFile& nf, const std::optional<core::ProjectClaim>& claim) {
  using Refusal = std::optional<Inserted>;
  const core::FileRecord& f = nf.file;
  // Claims first: an uploader learns nothing about a project it may not upload to.
  if (core::decide_upload(claim, nf.uploader, f.project) == core::ClaimDecision::forbidden) {
    return Refusal(std::pair{InsertOutcome::forbidden, f});
  }
  // Spellings of one name are one file: inside the write transaction, so that two uploads
  // of different spellings (from any process) cannot both win.
  auto existing = find_canonical_locked(f.filename, f.sha256);
  if (!existing) return existing.error();
  if (existing->has_value()) {
    const auto outcome =
        (*existing)->sha256 == f.sha256 ? InsertOutcome::identical : InsertOutcome::conflict;
    return Refusal(std::pair{outcome, **existing});
  }
  auto reserved = find_reservation_locked(f.filename);
  if (!reserved) return reserved.error();
  if (reserved->has_value()) {
    return Refusal(std::pair{InsertOutcome::reserved, reserved_record(**reserved)});
  }
  if (f.variant) {
    auto clash = variant_clash_locked(f);
    if (!clash) return clash.error();
    if (clash->has_value()) {
      return Refusal(std::pair{InsertOutcome::variant_conflict, std::move(**clash)});
    }
  }
  return Refusal();
}

Result<SqliteCatalog::Inserted> SqliteCatalog::insert_file_locked(
    const NewFile& nf, const std::function<Status()>& publish) {
  const core::FileRecord& f = nf.file;
  // The token that authorized the upload, again: one revoked (or expired) while the body was
  // arriving stores nothing. Inside the write transaction, so that a revocation committed
  // before this point is seen, and one after it comes after the file, as the trail records.
  if (auto st = check_actor_token_locked(nf.actor); !st) return st.error();
  auto claim = project_claim_locked(f.project);
  if (!claim) return claim.error();
  auto refusal = refusal_locked(nf, *claim);
  if (!refusal) return refusal.error();
  if (refusal->has_value()) return std::move(**refusal);
  const auto decision = core::decide_upload(*claim, nf.uploader, f.project);
  if (publish) {
    if (auto st = publish(); !st) return st.error();
  }
  if (auto st = forget_damage_locked({f.sha256, f.metadata_sha256}); !st) return st.error();
  if (!claim->has_value()) {
    Stmt up(db_,
            "INSERT INTO projects (name, display_name, created_at, claimed_by, owner_token_id)"
            " VALUES (?, ?, ?, ?, ?)");
    if (!up.valid()) return db_.error("prepare project insert");
    up.bind(1, f.project).bind(2, nf.display_name).bind(3, f.upload_time);
    bind_claim(up, 4, core::claim_for(nf.uploader));
    if (up.step() != SQLITE_DONE) return db_.error("insert project");
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
           " canonical, uploaded_by, uploaded_by_token, binaries, variant, provenance_sha256,"
           " provenance_size)"
           " SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
           " ?, ?, ?, ?, ?, ?, ? FROM projects WHERE name = ?");
  if (!ins.valid()) return db_.error("prepare file insert");
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
  const std::string uploaded_by = nf.actor.label();
  ins.bind(24, kHintsVersion)
      .bind(25, core::canonical_file_key(f.filename))
      .bind(26, uploaded_by)
      .bind(27, nf.actor.token_id != 0 ? std::optional(nf.actor.token_id) : std::nullopt)
      .bind(28, f.binaries ? std::optional<std::string>(core::encode_findings(*f.binaries))
                           : std::nullopt)
      .bind(29,
            f.variant ? std::optional<std::string>(core::encode_variant(*f.variant)) : std::nullopt)
      .bind(30, f.provenance_sha256)
      .bind(31, static_cast<std::int64_t>(f.provenance_size))
      .bind(32, f.project);
  if (ins.step() != SQLITE_DONE) return db_.error("insert file");
  core::FileRecord stored = f;
  stored.id = db_.last_insert_rowid();
  stored.uploaded_by = uploaded_by;
  stored.uploaded_by_token = nf.actor.token_id;
  if (auto st = append_audit_locked(
          AuditRecord{0, stored.upload_time, "upload", nf.actor, stored.project, stored.filename,
                      "sha256=" + stored.sha256 + " size=" + std::to_string(stored.size)});
      !st) {
    return st.error();
  }
  return std::pair{InsertOutcome::inserted, std::move(stored)};
}

Result<std::uint64_t> SqliteCatalog::generation_locked() {
  Stmt s(db_, "SELECT generation FROM meta WHERE id = 1");
  if (!s.valid() || s.step() != SQLITE_ROW) return db_.error("read generation");
  return static_cast<std::uint64_t>(s.i64(0));
}

namespace {

// Names bound per statement when only some projects are read (SQLite allows 32,766 variables).
constexpr std::size_t kNamesPerQuery = 500;

// " WHERE p.name IN (?, ...)" for `n` names.
std::string names_clause(std::size_t n) {
  std::string sql = " WHERE p.name IN (";
  for (std::size_t i = 0; i < n; ++i) sql += i == 0 ? "?" : ", ?";
  return sql + ")";
}

// Runs `read` for every project (only == nullptr: one statement, no clause) or for the names
// of `only` in groups of kNamesPerQuery, each with its WHERE clause and the names to bind.
Status for_names(const std::vector<std::string>* only,
                 const std::function<Status(const std::string& where,
                                            std::span<const std::string> names)>& read) {
  if (only == nullptr) return read("", {});
  for (std::size_t at = 0; at < only->size(); at += kNamesPerQuery) {
    const std::size_t n = std::min(kNamesPerQuery, only->size() - at);
    if (auto st = read(names_clause(n), std::span(*only).subspan(at, n)); !st) return st;
  }
  return ok_status();
}

}  // namespace

/// Every project (sorted by name), or only those of `only` (sorted, without repeats).
Result<std::vector<core::ProjectRecord>> SqliteCatalog::projects_locked(
    const std::vector<std::string>* only) {
  std::vector<core::ProjectRecord> out;
  auto st = for_names(only, [&](const std::string& where, std::span<const std::string> names) {
    const std::string sql =
        "SELECT p.name, p.display_name, COALESCE(MAX(f.upload_time), p.created_at),"
        " p.claimed_by, p.owner_token_id"
        " FROM projects p LEFT JOIN files f ON f.project_id = p.id" +
        where + " GROUP BY p.id ORDER BY p.name";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return Status(db_.error("prepare project list"));
    for (std::size_t i = 0; i < names.size(); ++i) s.bind(static_cast<int>(i) + 1, names[i]);
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) {
      out.push_back(core::ProjectRecord{s.text(0), s.text(1), s.i64(2), read_claim(s, 3)});
    }
    if (rc != SQLITE_DONE) return Status(db_.error("list projects"));
    return ok_status();
  });
  if (!st) return st.error();
  return out;
}

/// Everything, or with `only` those projects and their files.
Result<Contents> SqliteCatalog::load_locked(const std::vector<std::string>* only) {
  Contents c;
  auto gen = generation_locked();
  if (!gen) return gen.error();
  c.generation = *gen;
  auto projects = projects_locked(only);
  if (!projects) return projects.error();
  c.projects = std::move(*projects);
  auto st = for_names(only, [&](const std::string& where, std::span<const std::string> names) {
    const std::string sql = std::string("SELECT ") + kFileColumns +
                            " FROM files f JOIN projects p ON p.id = f.project_id" + where +
                            " ORDER BY p.name, f.filename";
    Stmt s(db_, sql.c_str());
    if (!s.valid()) return Status(db_.error("prepare file list"));
    for (std::size_t i = 0; i < names.size(); ++i) s.bind(static_cast<int>(i) + 1, names[i]);
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) c.files.push_back(read_file_row(s));
    if (rc != SQLITE_DONE) return Status(db_.error("list files"));
    return ok_status();
  });
  if (!st) return st.error();
  {
    Stmt s(db_, (std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY id").c_str());
    if (!s.valid()) return db_.error("prepare token list");
    int rc = 0;
    while ((rc = s.step()) == SQLITE_ROW) c.tokens.push_back(read_token_row(s));
    if (rc != SQLITE_DONE) return db_.error("list tokens");
  }
  return c;
}

Result<std::vector<BlobRef>> SqliteCatalog::referenced_blobs_locked() {
  Stmt s(db_,
         "SELECT filename, sha256, size, metadata_sha256, metadata_size, provenance_sha256,"
         " provenance_size FROM files ORDER BY filename");
  if (!s.valid()) return db_.error("prepare blob references");
  std::vector<BlobRef> refs;
  int rc = 0;
  while ((rc = s.step()) == SQLITE_ROW) {
    const std::string filename = s.text(0);
    refs.push_back(
        BlobRef{s.text(1), BlobRole::file, filename, static_cast<std::uint64_t>(s.i64(2))});
    refs.push_back(
        BlobRef{s.text(3), BlobRole::metadata, filename, static_cast<std::uint64_t>(s.i64(4))});
    if (std::string provenance = s.text(5); !provenance.empty()) {
      refs.push_back(BlobRef{std::move(provenance), BlobRole::provenance, filename,
                             static_cast<std::uint64_t>(s.i64(6))});
    }
  }
  if (rc != SQLITE_DONE) return db_.error("list blob references");
  // Blobs kept from upstream indexes are referenced too (gc keeps them, backup copies them,
  // fsck checks them), named "upstream:<upstream>/<filename>".
  Stmt u(db_, "SELECT sha256, upstream, filename, size FROM upstream_blobs ORDER BY sha256");
  if (!u.valid()) return db_.error("prepare upstream blob references");
  while ((rc = u.step()) == SQLITE_ROW) {
    refs.push_back(BlobRef{u.text(0), BlobRole::file, "upstream:" + u.text(1) + "/" + u.text(2),
                           static_cast<std::uint64_t>(u.i64(3))});
  }
  if (rc != SQLITE_DONE) return db_.error("list upstream blob references");
  return refs;
}

// Copies every page in one step inside one read transaction: in WAL mode writers in other
// processes go on, and the copy is the database as of the transaction's first read.
Status SqliteCatalog::backup_into(const Db& out, const std::filesystem::path& dest) {
  std::lock_guard lock(mu_);
  if (auto st = db_.exec("BEGIN"); !st) return st;
  if (auto gen = generation_locked(); !gen) {
    (void)db_.exec("ROLLBACK");
    return gen.error();
  }
  sqlite3_backup* backup = sqlite3_backup_init(out.get(), "main", db_.get(), "main");
  if (backup == nullptr) {
    (void)db_.exec("ROLLBACK");
    return out.error("back up into " + dest.string());
  }
  const int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  (void)db_.exec("COMMIT");
  if (rc != SQLITE_DONE) return out.error(rc, "back up into " + dest.string());
  return ok_status();
}

}  // namespace wf::catalog::detail

namespace wf::catalog {

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
  auto db = sqlite::Db::open(db_path, sqlite::OpenMode::create);
  if (!db) return db.error();
  auto catalog = std::make_unique<detail::SqliteCatalog>(std::move(*db));
  if (auto st = catalog->init(); !st) return st.error();
  return std::unique_ptr<Catalog>(std::move(catalog));
}

}  // namespace wf::catalog
