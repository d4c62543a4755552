// Yanks, claims, deletions and their reservations, damage records, and the findings of wheels
// stored before ingest read their binaries.

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/sqlite_catalog_impl.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::catalog::detail {

Result<std::vector<std::string>> SqliteCatalog::set_yanked(
    const std::string_view project, const std::optional<std::string>& version,
    const std::optional<std::string>& filename, const std::optional<std::string>& reason,
    const Actor& by) {
  std::optional<core::Version> wanted;
  if (version) {
    auto v = core::Version::parse(*version);
    if (!v) return v.error();
    wanted = std::move(*v);
  }
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&] { return set_yanked_locked(project, wanted, filename, reason, by); },
      [](const auto&) { return true; });
}

Result<std::vector<std::string>> SqliteCatalog::set_yanked_locked(
    std::string_view project, const std::optional<core::Version>& version,
    const std::optional<std::string>& filename, const std::optional<std::string>& reason,
    const Actor& by) {
  const std::string sql = std::string("SELECT ") + kFileColumns +
                          " FROM files f JOIN projects p ON p.id = f.project_id"
                          " WHERE p.name = ? ORDER BY f.filename";
  Stmt s(db_, sql.c_str());
  if (!s.valid()) return db_.error("prepare yank");
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
  if (rc != SQLITE_DONE) return db_.error("yank lookup");
  if (matched.empty()) {
    return make_error(Errc::not_found,
                      "no matching file in project '" + std::string(project) + "'");
  }
  std::vector<std::string> names;
  for (const auto& [id, name] : matched) {
    Stmt u(db_, "UPDATE files SET yanked = ?, yanked_reason = ? WHERE id = ?");
    u.bind(1, static_cast<std::int64_t>(reason ? 1 : 0)).bind(2, reason).bind(3, id);
    if (u.step() != SQLITE_DONE) return db_.error("yank");
    AuditRecord entry{0, 0, reason ? "yank" : "unyank", by, std::string(project), name, {}};
    if (reason && !reason->empty()) entry.detail = "reason: " + *reason;
    if (auto st = append_audit_locked(entry); !st) return st.error();
    names.push_back(name);
  }
  return names;
}

Result<core::ProjectRecord> SqliteCatalog::set_claim(std::string_view project,
                                                     const core::ProjectClaim& claim,
                                                     const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<core::ProjectRecord> {
        auto updated = set_claim_locked(project, claim);
        if (!updated) return updated;
        const bool release = claim.kind == core::ClaimKind::unclaimed;
        if (auto st = append_audit_locked(AuditRecord{0, 0, release ? "release" : "claim", by,
                                                      std::string(project), std::string(project),
                                                      core::claim_text(claim)});
            !st) {
          return st.error();
        }
        return updated;
      },
      [](const auto&) { return true; });
}

Result<core::ProjectRecord> SqliteCatalog::set_claim_locked(std::string_view project,
                                                            const core::ProjectClaim& claim) {
  auto existing = project_claim_locked(project);
  if (!existing) return existing.error();
  if (!existing->has_value()) {
    return make_error(Errc::not_found, "no such project: " + std::string(project));
  }
  if (claim.kind == core::ClaimKind::token) {
    Stmt t(db_, "SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL");
    if (!t.valid()) return db_.error("prepare token lookup");
    t.bind(1, claim.token_id);
    if (t.step() != SQLITE_ROW) {
      return make_error(Errc::not_found,
                        "no such token (or revoked): " + std::to_string(claim.token_id));
    }
  }
  if (auto st = write_claim_locked(project, claim); !st) return st.error();
  const std::vector<std::string> only{std::string(project)};
  auto updated = projects_locked(&only);
  if (!updated) return updated.error();
  if (updated->empty()) return make_error(Errc::internal, "claimed project vanished");
  return std::move(updated->front());
}

/// A project's claim; nullopt when the project does not exist.
Result<std::optional<core::ProjectClaim>> SqliteCatalog::project_claim_locked(
    std::string_view project) {
  Stmt s(db_, "SELECT claimed_by, owner_token_id FROM projects WHERE name = ?");
  if (!s.valid()) return db_.error("prepare claim lookup");
  s.bind(1, project);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<core::ProjectClaim>();
  if (rc != SQLITE_ROW) return db_.error("claim lookup");
  return std::optional<core::ProjectClaim>(read_claim(s, 0));
}

core::ProjectClaim SqliteCatalog::read_claim(Stmt& s, int col) {
  const auto by = s.opt_text(col);
  if (!by) return {};
  if (*by == "admin") return core::ProjectClaim{core::ClaimKind::admin, 0};
  return core::ProjectClaim{core::ClaimKind::token, s.i64(col + 1)};
}

void SqliteCatalog::bind_claim(Stmt& s, int col, const core::ProjectClaim& claim) {
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

Status SqliteCatalog::write_claim_locked(std::string_view project,
                                         const core::ProjectClaim& claim) {
  Stmt s(db_, "UPDATE projects SET claimed_by = ?, owner_token_id = ? WHERE name = ?");
  if (!s.valid()) return db_.error("prepare claim update");
  bind_claim(s, 1, claim);
  s.bind(3, project);
  if (s.step() != SQLITE_DONE) return db_.error("claim update");
  return ok_status();
}

Result<core::FileRecord> SqliteCatalog::delete_file(std::string_view filename, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<core::FileRecord> {
        auto deleted = delete_file_locked(filename);
        if (!deleted) return deleted;
        if (auto st =
                append_audit_locked(AuditRecord{0, 0, "delete", by, deleted->project,
                                                deleted->filename, "sha256=" + deleted->sha256});
            !st) {
          return st.error();
        }
        return deleted;
      },
      [](const auto&) { return true; });
}

Result<core::FileRecord> SqliteCatalog::delete_file_locked(std::string_view filename) {
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
    return db_.error("delete file");
  }
  return f;
}

Result<bool> SqliteCatalog::is_reserved(std::string_view filename) {
  std::lock_guard lock(mu_);
  auto found = find_reservation_locked(filename);
  if (!found) return found.error();
  return found->has_value();
}

Result<std::optional<DeletedFile>> SqliteCatalog::find_reservation(std::string_view filename) {
  std::lock_guard lock(mu_);
  return find_reservation_locked(filename);
}

/// The deleted file whose name is `filename` after normalization, if any.
Result<std::optional<DeletedFile>> SqliteCatalog::find_reservation_locked(
    std::string_view filename) {
  Stmt s(db_,
         "SELECT filename, project, sha256 FROM deleted_files WHERE canonical = ?"
         " ORDER BY filename = ? DESC, deleted_at LIMIT 1");
  if (!s.valid()) return db_.error("prepare reserved-name lookup");
  s.bind(1, core::canonical_file_key(filename)).bind(2, filename);
  const int rc = s.step();
  if (rc == SQLITE_ROW)
    return std::optional<DeletedFile>(DeletedFile{s.text(0), s.text(1), s.text(2)});
  if (rc == SQLITE_DONE) return std::optional<DeletedFile>();
  return db_.error("reserved-name lookup");
}

Result<std::vector<DeletedFile>> SqliteCatalog::deleted_files(std::string_view project) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "SELECT filename, project, sha256 FROM deleted_files WHERE project = ?"
         " ORDER BY filename");
  if (!s.valid()) return db_.error("prepare deleted-file listing");
  s.bind(1, project);
  std::vector<DeletedFile> out;
  int rc = SQLITE_ROW;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(DeletedFile{s.text(0), s.text(1), s.text(2)});
  if (rc != SQLITE_DONE) return db_.error("deleted-file listing");
  return out;
}

Result<core::FileRecord> SqliteCatalog::restore_file(std::string_view filename,
                                                     std::string_view sha256,
                                                     const std::function<Status()>& publish) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
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

Result<bool> SqliteCatalog::mark_damaged(std::string_view sha256, std::string_view detail,
                                         const std::function<Result<bool>()>& quarantine) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<bool> {
        if (quarantine) {
          auto moved = quarantine();
          if (!moved) return moved.error();
          if (!*moved) return false;
        }
        Stmt s(db_,
               "INSERT OR REPLACE INTO damaged_blobs (sha256, detail, found_at) VALUES (?, ?, ?)");
        if (!s.valid()) return db_.error("prepare damage record");
        s.bind(1, sha256).bind(2, detail).bind(3, now_micros());
        if (s.step() != SQLITE_DONE) return db_.error("record damaged blob");
        return true;
      },
      [](bool marked) { return marked; });
}

Status SqliteCatalog::clear_damaged(const std::vector<std::string>& sha256s) {
  std::lock_guard lock(mu_);
  return db_.write_transaction([&] { return forget_damage_locked(sha256s); },
                               [](const auto&) { return true; });
}

Result<std::vector<DamagedBlob>> SqliteCatalog::damaged_blobs() {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT sha256, detail, found_at FROM damaged_blobs ORDER BY sha256");
  if (!s.valid()) return db_.error("prepare damaged blob list");
  std::vector<DamagedBlob> out;
  int rc = 0;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(DamagedBlob{s.text(0), s.text(1), s.i64(2)});
  if (rc != SQLITE_DONE) return db_.error("list damaged blobs");
  return out;
}

/// Drops the damage records of blobs that were just published (or found intact).
Status SqliteCatalog::forget_damage_locked(const std::vector<std::string>& sha256s) {
  for (const auto& sha : sha256s) {
    Stmt s(db_, "DELETE FROM damaged_blobs WHERE sha256 = ?");
    if (!s.valid()) return db_.error("prepare damage removal");
    s.bind(1, sha);
    if (s.step() != SQLITE_DONE) return db_.error("forget damaged blob");
  }
  return ok_status();
}

Result<std::vector<UninspectedWheel>> SqliteCatalog::uninspected_wheels() {
  std::lock_guard lock(mu_);
  const std::string sql = std::string("SELECT ") + kFileColumns +
                          ", f.requires_dist FROM files f JOIN projects p ON p.id = f.project_id"
                          " WHERE f.kind = 'wheel' AND f.binaries IS NULL ORDER BY f.filename";
  Stmt s(db_, sql.c_str());
  if (!s.valid()) return db_.error("prepare uninspected wheel list");
  std::vector<UninspectedWheel> out;
  int rc = 0;
  while ((rc = s.step()) == SQLITE_ROW) {
    UninspectedWheel w{read_file_row(s), {}};
    const std::string requires_dist = s.text(kFileColumnCount);
    for (const auto line : split(requires_dist, '\n')) {
      if (!line.empty()) w.requires_dist.emplace_back(line);
    }
    out.push_back(std::move(w));
  }
  if (rc != SQLITE_DONE) return db_.error("list uninspected wheels");
  return out;
}

Result<bool> SqliteCatalog::set_provenance(std::string_view filename, std::string_view sha256,
                                           std::string_view provenance_sha256,
                                           std::uint64_t provenance_size, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<bool> {
        Stmt s(db_,
               "SELECT f.sha256, f.provenance_sha256, p.name FROM files f"
               " JOIN projects p ON p.id = f.project_id WHERE f.filename = ?");
        if (!s.valid()) return db_.error("prepare provenance lookup");
        s.bind(1, filename);
        const int rc = s.step();
        if (rc == SQLITE_DONE) {
          return make_error(Errc::not_found, "no file named " + std::string(filename));
        }
        if (rc != SQLITE_ROW) return db_.error("provenance lookup");
        if (s.text(0) != sha256) {
          return make_error(Errc::conflict, std::string(filename) + " holds other bytes (sha256 " +
                                                s.text(0) + ")");
        }
        if (s.text(1) == provenance_sha256) return false;
        if (!s.text(1).empty()) {
          return make_error(Errc::conflict, provenance_exists_message(filename));
        }
        const std::string project = s.text(2);
        Stmt u(db_,
               "UPDATE files SET provenance_sha256 = ?, provenance_size = ? WHERE filename = ? "
               "AND provenance_sha256 = ''");
        if (!u.valid()) return db_.error("prepare provenance update");
        u.bind(1, provenance_sha256)
            .bind(2, static_cast<std::int64_t>(provenance_size))
            .bind(3, filename);
        if (u.step() != SQLITE_DONE) return db_.error("record provenance");
        if (auto st = append_audit_locked(
                AuditRecord{0, 0, "attestations", by, project, std::string(filename),
                            "provenance " + std::string(provenance_sha256)});
            !st) {
          return st.error();
        }
        return true;
      },
      [](bool written) { return written; });
}

Result<bool> SqliteCatalog::record_findings(std::string_view filename, std::string_view sha256,
                                            const core::WheelFindings& findings) {
  const std::string encoded = core::encode_findings(findings);
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<bool> {
        Stmt s(db_, "SELECT sha256, kind, binaries IS NOT NULL FROM files WHERE filename = ?");
        if (!s.valid()) return db_.error("prepare findings lookup");
        s.bind(1, filename);
        const int rc = s.step();
        if (rc == SQLITE_DONE) {
          return make_error(Errc::not_found, "no file named " + std::string(filename));
        }
        if (rc != SQLITE_ROW) return db_.error("findings lookup");
        if (s.text(0) != sha256) {
          return make_error(Errc::conflict, std::string(filename) + " holds other bytes (sha256 " +
                                                s.text(0) + ")");
        }
        if (s.text(1) != "wheel") {
          return make_error(Errc::invalid, std::string(filename) + " is not a wheel");
        }
        if (s.i64(2) != 0) return false;
        Stmt u(db_, "UPDATE files SET binaries = ? WHERE filename = ? AND binaries IS NULL");
        if (!u.valid()) return db_.error("prepare findings update");
        u.bind(1, encoded).bind(2, filename);
        if (u.step() != SQLITE_DONE) return db_.error("record findings");
        return db_.changes() == 1;
      },
      [](bool written) { return written; });
}

}  // namespace wf::catalog::detail
