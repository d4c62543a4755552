// The PostgreSQL catalog: files, projects and snapshots of the whole catalog (the class is in
// pg_catalog_impl.hpp; yanks, claims and damage records in pg_edits.cpp; tokens and the audit
// trail in pg_audit.cpp; the schema in pg_schema.cpp).

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/row_mapping.hpp"
#include "wheelforge/core/filename.hpp"

namespace wf::catalog::detail {

namespace {

using pg::Params;
using pg::Row;
using pg::Rows;

void add_hints(Params& p, const core::VariantHints& h) {
  std::string extra;
  for (const auto& part : h.extra) {
    if (!extra.empty()) extra += '.';
    extra += part;
  }
  p.add(backend_name(h.backend))
      .add(h.cuda_major)
      .add(h.cuda_minor)
      .add(h.rocm_major)
      .add(h.rocm_minor)
      .add(h.torch ? std::optional<int>(h.torch->major) : std::nullopt)
      .add(h.torch ? std::optional<int>(h.torch->minor) : std::nullopt)
      .add(h.cxx11_abi ? std::optional<int>(*h.cxx11_abi ? 1 : 0) : std::nullopt)
      .add(extra);
}

std::optional<core::FileRecord> first_file(const Rows& rows) {
  if (rows.empty()) return std::nullopt;
  return file_from_row(Row(rows, 0));
}

const std::string kFromFiles = " FROM files f JOIN projects p ON p.id = f.project_id";

}  // namespace

Result<std::optional<core::FileRecord>> PgCatalog::find_file(std::string_view filename) {
  std::lock_guard lock(mu_);
  return find_file_locked(filename);
}

Result<std::optional<core::FileRecord>> PgCatalog::find_same_file(std::string_view filename,
                                                                  std::string_view sha256) {
  std::lock_guard lock(mu_);
  return find_canonical_locked(filename, sha256);
}

Result<PgCatalog::Inserted> PgCatalog::insert_file(const NewFile& nf,
                                                   const std::function<Status()>& publish) {
  std::lock_guard lock(mu_);
  // Only a new row is committed; identical and conflict answers change nothing.
  return conn_->write_transaction(
      [&]() -> Result<Inserted> {
        if (auto st = lock_projects_locked({nf.file.project}); !st) return st.error();
        return insert_file_locked(nf, publish);
      },
      [](const auto& r) { return r.first == InsertOutcome::inserted; },
      pg::Conn::WriteLock::shared);
}

Result<std::vector<Result<PgCatalog::Inserted>>> PgCatalog::insert_files(
    const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
    const std::function<Status()>& before_commit) {
  std::lock_guard lock(mu_);
  using Results = std::vector<Result<Inserted>>;
  bool wrote = false;
  return conn_->write_transaction(
      [&]() -> Result<Results> {
        wrote = false;
        std::vector<std::string> projects;
        projects.reserve(files.size());
        for (const auto& nf : files) projects.push_back(nf.file.project);
        if (auto st = lock_projects_locked(std::move(projects)); !st) return st.error();
        Results results;
        results.reserve(files.size());
        for (std::size_t i = 0; i < files.size(); ++i) {
          bool publish_failed = false;
          auto r = insert_file_locked(files[i], [&]() -> Status {
            auto st = publish(i);
            publish_failed = !st;
            return st;
          });
          // A failed publish comes before the file's first write: the transaction holds the
          // other files' rows unchanged, so only this file is rejected.
          if (!r && !publish_failed) return r.error();
          if (r && r->first == InsertOutcome::inserted) wrote = true;
          results.push_back(std::move(r));
        }
        if (wrote && before_commit) {
          if (auto st = before_commit(); !st) return st.error();
        }
        return results;
      },
      [&](const Results&) { return wrote; }, pg::Conn::WriteLock::shared);
}

Status PgCatalog::lock_projects_locked(std::vector<std::string> projects) {
  // One order for every transaction (sorted names): two writers of the same projects never
  // wait for each other in a cycle. A hash collision only makes two projects wait in turn.
  std::sort(projects.begin(), projects.end());
  projects.erase(std::unique(projects.begin(), projects.end()), projects.end());
  for (const auto& name : projects) {
    // The two-key advisory locks ("wfpj", the name's hash) are apart from the one-key write
    // and migration locks.
    auto r =
        conn_->exec("lock project '" + name + "'",
                    "SELECT pg_advisory_xact_lock(2003202154, hashtext($1))", Params().add(name));
    if (!r) return r.error();
  }
  return ok_status();
}

Result<std::uint64_t> PgCatalog::generation() {
  std::lock_guard lock(mu_);
  return generation_locked();
}

Result<std::uint64_t> PgCatalog::position() {
  std::lock_guard lock(mu_);
  // Every transaction that committed before this statement has an id below its snapshot's
  // xmax: a replica whose feed boundary reached xmax has applied them all.
  auto rows = conn_->exec("read the catalog position",
                          "SELECT pg_snapshot_xmax(pg_current_snapshot())::text");
  if (!rows) return rows.error();
  return std::stoull(rows->text(0, 0));
}

Result<Contents> PgCatalog::load() {
  std::lock_guard lock(mu_);
  return conn_->read_transaction([&] { return load_locked(); });
}

Result<Contents> PgCatalog::load_projects(std::vector<std::string> projects) {
  std::lock_guard lock(mu_);
  return conn_->read_transaction([&] { return load_locked(&projects); });
}

Result<std::vector<BlobRef>> PgCatalog::referenced_blobs() {
  std::lock_guard lock(mu_);
  return conn_->read_transaction([&] { return referenced_blobs_locked(); });
}

Status PgCatalog::backup_to(const std::filesystem::path& /*dest*/) {
  return make_error(Errc::invalid,
                    "backup of a PostgreSQL catalog (" + conn_->name() + "): use pg_dump");
}

Result<std::optional<core::FileRecord>> PgCatalog::find_file_locked(std::string_view filename) {
  auto rows = conn_->exec(
      "file lookup", std::string("SELECT ") + kFileColumns + kFromFiles + " WHERE f.filename = $1",
      Params().add(filename));
  if (!rows) return rows.error();
  return first_file(*rows);
}

Result<std::optional<core::FileRecord>> PgCatalog::find_canonical_locked(std::string_view filename,
                                                                         std::string_view sha256) {
  auto rows =
      conn_->exec("file lookup",
                  std::string("SELECT ") + kFileColumns + kFromFiles +
                      " WHERE f.canonical = $1"
                      " ORDER BY f.sha256 = $2 DESC, f.filename = $3 DESC, f.id LIMIT 1",
                  Params().add(core::canonical_file_key(filename)).add(sha256).add(filename));
  if (!rows) return rows.error();
  return first_file(*rows);
}

// A variant wheel of the release whose variant.json the new one contradicts
// (core::variant_conflict), inside the write transaction.
Result<std::optional<core::FileRecord>> PgCatalog::variant_clash_locked(const core::FileRecord& f) {
  auto rows = conn_->exec("variant lookup",
                          std::string("SELECT ") + kFileColumns + kFromFiles +
                              " WHERE p.name = $1 AND f.version = $2 AND f.variant IS NOT NULL"
                              " ORDER BY f.id",
                          Params().add(f.project).add(f.version));
  if (!rows) return rows.error();
  for (int i = 0; i < rows->size(); ++i) {
    core::FileRecord other = file_from_row(Row(*rows, i));
    if (other.variant && core::variant_conflict(*f.variant, *other.variant, other.filename)) {
      return std::optional<core::FileRecord>(std::move(other));
    }
  }
  return std::optional<core::FileRecord>();
}

Status PgCatalog::check_actor_token_locked(const Actor& by) {
  if (by.token_id == 0) return ok_status();
  auto rows = conn_->exec("token check", "SELECT revoked_at, expires_at FROM tokens WHERE id = $1",
                          Params().add(by.token_id));
  if (!rows) return rows.error();
  const std::string token = "token #" + std::to_string(by.token_id);
  if (rows->empty()) return make_error(Errc::unauthorized, token + " no longer exists");
  if (!rows->null(0, 0)) return make_error(Errc::unauthorized, token + " was revoked");
  if (const auto expires = rows->opt_i64(0, 1); expires && now_micros() >= *expires) {
    return make_error(Errc::unauthorized, token + " expired at " + iso8601_micros(*expires) +
                                              ": ask an admin for a new one");
  }
  return ok_status();
}

Result<std::optional<Catalog::Inserted>> PgCatalog::precheck(const NewFile& nf) {
  std::lock_guard lock(mu_);
  if (auto st = check_actor_token_locked(nf.actor); !st) return st.error();
  auto claim = project_claim_locked(nf.file.project);
  if (!claim) return claim.error();
  return refusal_locked(nf, *claim);
}

Result<std::optional<Catalog::Inserted>> PgCatalog::refusal_locked(
    const NewFile& nf, const std::optional<core::ProjectClaim>& claim) {
  using Refusal = std::optional<Inserted>;
  const core::FileRecord& f = nf.file;
  if (core::decide_upload(claim, nf.uploader, f.project) == core::ClaimDecision::forbidden) {
    return Refusal(std::pair{InsertOutcome::forbidden, f});
  }
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

Result<PgCatalog::Inserted> PgCatalog::insert_file_locked(const NewFile& nf,
                                                          const std::function<Status()>& publish) {
  const core::FileRecord& f = nf.file;
  // The token that authorized the upload, again, inside the write transaction (after the
  // write lock: a revocation committed before is seen).
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
    Params p;
    p.add(f.project).add(nf.display_name).add(f.upload_time);
    add_claim(p, core::claim_for(nf.uploader));
    auto ins = conn_->exec("insert project",
                           "INSERT INTO projects (name, display_name, created_at, claimed_by,"
                           " owner_token_id) VALUES ($1, $2, $3, $4, $5)",
                           p);
    if (!ins) return ins.error();
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
  const std::string uploaded_by = nf.actor.label();
  Params p;
  p.add(f.filename)
      .add(f.version)
      .add(f.kind == core::DistKind::sdist ? "sdist" : "wheel")
      .add(f.sha256)
      .add(static_cast<std::int64_t>(f.size))
      .add(f.upload_time)
      .add(f.requires_python)
      .add(f.metadata_sha256)
      .add(static_cast<std::int64_t>(f.metadata_size))
      .add(f.tags.build_tag)
      .add(f.tags.python_tag)
      .add(f.tags.abi_tag)
      .add(f.tags.platform_tag)
      .add(requires_dist);
  add_hints(p, f.hints);
  p.add(kHintsVersion)
      .add(core::canonical_file_key(f.filename))
      .add(uploaded_by)
      .add(nf.actor.token_id != 0 ? std::optional(nf.actor.token_id) : std::nullopt)
      .add(f.binaries ? std::optional<std::string>(core::encode_findings(*f.binaries))
                      : std::nullopt)
      .add(f.variant ? std::optional<std::string>(core::encode_variant(*f.variant)) : std::nullopt)
      .add(f.provenance_sha256)
      .add(static_cast<std::int64_t>(f.provenance_size))
      .add(f.project);
  auto ins = conn_->exec(
      "insert file",
      "INSERT INTO files (project_id, filename, version, kind, sha256, size, upload_time,"
      " requires_python, metadata_sha256, metadata_size, build_tag, python_tag, abi_tag,"
      " platform_tag, requires_dist, backend, cuda_major, cuda_minor, rocm_major,"
      " rocm_minor, torch_major, torch_minor, cxx11_abi, label_extra, hints_version,"
      " canonical, uploaded_by, uploaded_by_token, binaries, variant, provenance_sha256,"
      " provenance_size)"
      " SELECT id, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,"
      " $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31 FROM projects"
      " WHERE name = $32"
      " RETURNING id",
      p);
  if (!ins) return ins.error();
  if (ins->empty()) return make_error(Errc::internal, "the project of " + f.filename + " vanished");
  core::FileRecord stored = f;
  stored.id = ins->i64(0, 0);
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

Result<std::uint64_t> PgCatalog::generation_locked() {
  // Each committed change adds one to one counter (migration 5): the sum moves with every
  // change and never goes back.
  auto rows = conn_->exec("read generation", "SELECT sum(n)::BIGINT FROM generations");
  if (!rows) return rows.error();
  if (rows->empty() || rows->null(0, 0)) {
    return make_error(Errc::internal, conn_->name() + ": no generation counters");
  }
  return static_cast<std::uint64_t>(rows->i64(0, 0));
}

Result<std::vector<core::ProjectRecord>> PgCatalog::projects_locked(
    const std::vector<std::string>* only) {
  Params p;
  if (only) p.add(*only);
  auto rows = conn_->exec(
      "list projects",
      std::string("SELECT p.name, p.display_name, COALESCE(MAX(f.upload_time), p.created_at),"
                  " p.claimed_by, p.owner_token_id"
                  " FROM projects p LEFT JOIN files f ON f.project_id = p.id") +
          (only ? " WHERE p.name = ANY($1::text[])" : "") +
          " GROUP BY p.id ORDER BY p.name COLLATE \"C\"",
      p);
  if (!rows) return rows.error();
  std::vector<core::ProjectRecord> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    out.push_back(core::ProjectRecord{rows->text(i, 0), rows->text(i, 1), rows->i64(i, 2),
                                      read_claim(*rows, i, 3)});
  }
  return out;
}

Result<Contents> PgCatalog::load_locked(const std::vector<std::string>* only) {
  Contents c;
  auto gen = generation_locked();
  if (!gen) return gen.error();
  c.generation = *gen;
  auto projects = projects_locked(only);
  if (!projects) return projects.error();
  c.projects = std::move(*projects);
  Params p;
  if (only) p.add(*only);
  auto files = conn_->exec("list files",
                           std::string("SELECT ") + kFileColumns + kFromFiles +
                               (only ? " WHERE p.name = ANY($1::text[])" : "") +
                               " ORDER BY p.name COLLATE \"C\", f.filename COLLATE \"C\"",
                           p);
  if (!files) return files.error();
  for (int i = 0; i < files->size(); ++i) c.files.push_back(file_from_row(Row(*files, i)));
  auto tokens = tokens_locked();
  if (!tokens) return tokens.error();
  c.tokens = std::move(*tokens);
  return c;
}

Result<std::vector<BlobRef>> PgCatalog::referenced_blobs_locked() {
  return read_referenced_blobs(*conn_);
}

Result<std::vector<BlobRef>> read_referenced_blobs(pg::Conn& conn) {
  auto rows = conn.exec("list blob references",
                        "SELECT filename, sha256, size, metadata_sha256, metadata_size,"
                        " provenance_sha256, provenance_size FROM files"
                        " ORDER BY filename COLLATE \"C\"");
  if (!rows) return rows.error();
  std::vector<BlobRef> refs;
  for (int i = 0; i < rows->size(); ++i) {
    const std::string filename = rows->text(i, 0);
    refs.push_back(BlobRef{rows->text(i, 1), BlobRole::file, filename,
                           static_cast<std::uint64_t>(rows->i64(i, 2))});
    refs.push_back(BlobRef{rows->text(i, 3), BlobRole::metadata, filename,
                           static_cast<std::uint64_t>(rows->i64(i, 4))});
    if (std::string provenance = rows->text(i, 5); !provenance.empty()) {
      refs.push_back(BlobRef{std::move(provenance), BlobRole::provenance, filename,
                             static_cast<std::uint64_t>(rows->i64(i, 6))});
    }
  }
  auto up = conn.exec("list upstream blob references",
                      "SELECT sha256, upstream, filename, size FROM upstream_blobs"
                      " ORDER BY sha256 COLLATE \"C\"");
  if (!up) return up.error();
  for (int i = 0; i < up->size(); ++i) {
    refs.push_back(BlobRef{up->text(i, 0), BlobRole::file,
                           "upstream:" + up->text(i, 1) + "/" + up->text(i, 2),
                           static_cast<std::uint64_t>(up->i64(i, 3))});
  }
  return refs;
}

}  // namespace wf::catalog::detail
