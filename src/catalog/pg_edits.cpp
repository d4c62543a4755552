// The PostgreSQL catalog's yanks, claims, deletions and their reservations, damage records, and
// the findings of wheels stored before ingest read their binaries (SqliteCatalog's semantics:
// sqlite_edits.cpp).

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/row_mapping.hpp"
#include "wheelforge/core/filename.hpp"

namespace wf::catalog::detail {

using pg::Params;
using pg::Row;

namespace {

constexpr auto kKeepEvery = [](const auto&) { return true; };

}  // namespace

Result<std::vector<std::string>> PgCatalog::set_yanked(std::string_view project,
                                                       const std::optional<std::string>& version,
                                                       const std::optional<std::string>& filename,
                                                       const std::optional<std::string>& reason,
                                                       const Actor& by) {
  std::optional<core::Version> wanted;
  if (version) {
    auto v = core::Version::parse(*version);
    if (!v) return v.error();
    wanted = std::move(*v);
  }
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<std::vector<std::string>> {
        if (auto st = lock_projects_locked({std::string(project)}); !st) return st.error();
        return set_yanked_locked(project, wanted, filename, reason, by);
      },
      kKeepEvery, pg::Conn::WriteLock::shared);
}

Result<std::vector<std::string>> PgCatalog::set_yanked_locked(
    std::string_view project, const std::optional<core::Version>& version,
    const std::optional<std::string>& filename, const std::optional<std::string>& reason,
    const Actor& by) {
  auto rows = conn_->exec("yank lookup",
                          std::string("SELECT ") + kFileColumns +
                              " FROM files f JOIN projects p ON p.id = f.project_id"
                              " WHERE p.name = $1 ORDER BY f.filename COLLATE \"C\"",
                          Params().add(project));
  if (!rows) return rows.error();
  std::vector<std::pair<std::int64_t, std::string>> matched;
  for (int i = 0; i < rows->size(); ++i) {
    const core::FileRecord f = file_from_row(Row(*rows, i));
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
  if (matched.empty()) {
    return make_error(Errc::not_found,
                      "no matching file in project '" + std::string(project) + "'");
  }
  std::vector<std::string> names;
  for (const auto& [id, name] : matched) {
    auto u = conn_->exec("yank", "UPDATE files SET yanked = $1, yanked_reason = $2 WHERE id = $3",
                         Params().add(std::int64_t{reason ? 1 : 0}).add(reason).add(id));
    if (!u) return u.error();
    AuditRecord entry{0, 0, reason ? "yank" : "unyank", by, std::string(project), name, {}};
    if (reason && !reason->empty()) entry.detail = "reason: " + *reason;
    if (auto st = append_audit_locked(entry); !st) return st.error();
    names.push_back(name);
  }
  return names;
}

Result<core::ProjectRecord> PgCatalog::set_claim(std::string_view project,
                                                 const core::ProjectClaim& claim, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<core::ProjectRecord> {
        if (auto st = lock_projects_locked({std::string(project)}); !st) return st.error();
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
      kKeepEvery, pg::Conn::WriteLock::shared);
}

Result<core::ProjectRecord> PgCatalog::set_claim_locked(std::string_view project,
                                                        const core::ProjectClaim& claim) {
  auto existing = project_claim_locked(project);
  if (!existing) return existing.error();
  if (!existing->has_value()) {
    return make_error(Errc::not_found, "no such project: " + std::string(project));
  }
  if (claim.kind == core::ClaimKind::token) {
    auto t =
        conn_->exec("token lookup", "SELECT 1 FROM tokens WHERE id = $1 AND revoked_at IS NULL",
                    Params().add(claim.token_id));
    if (!t) return t.error();
    if (t->empty()) {
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

Result<std::optional<core::ProjectClaim>> PgCatalog::project_claim_locked(
    std::string_view project) {
  auto rows =
      conn_->exec("claim lookup", "SELECT claimed_by, owner_token_id FROM projects WHERE name = $1",
                  Params().add(project));
  if (!rows) return rows.error();
  if (rows->empty()) return std::optional<core::ProjectClaim>();
  return std::optional<core::ProjectClaim>(read_claim(*rows, 0, 0));
}

core::ProjectClaim PgCatalog::read_claim(const pg::Rows& rows, int row, int col) {
  const auto by = rows.opt_text(row, col);
  if (!by) return {};
  if (*by == "admin") return core::ProjectClaim{core::ClaimKind::admin, 0};
  return core::ProjectClaim{core::ClaimKind::token, rows.i64(row, col + 1)};
}

void PgCatalog::add_claim(Params& p, const core::ProjectClaim& claim) {
  switch (claim.kind) {
    case core::ClaimKind::unclaimed:
      p.null().null();
      break;
    case core::ClaimKind::admin:
      p.add("admin").null();
      break;
    case core::ClaimKind::token:
      p.add("token").add(claim.token_id);
      break;
  }
}

Status PgCatalog::write_claim_locked(std::string_view project, const core::ProjectClaim& claim) {
  Params p;
  add_claim(p, claim);
  p.add(project);
  auto u =
      conn_->exec("claim update",
                  "UPDATE projects SET claimed_by = $1, owner_token_id = $2 WHERE name = $3", p);
  if (!u) return u.error();
  return ok_status();
}

Result<core::FileRecord> PgCatalog::delete_file(std::string_view filename, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<core::FileRecord> {
        // The file's project first (a file never moves to another project), then the file
        // again under that project's lock.
        auto found = find_file_locked(filename);
        if (!found) return found.error();
        if (found->has_value()) {
          if (auto st = lock_projects_locked({(*found)->project}); !st) return st.error();
        }
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
      kKeepEvery, pg::Conn::WriteLock::shared);
}

Result<core::FileRecord> PgCatalog::delete_file_locked(std::string_view filename) {
  auto found = find_file_locked(filename);
  if (!found) return found.error();
  if (!found->has_value()) {
    return make_error(Errc::not_found, "no such file: " + std::string(filename));
  }
  const core::FileRecord f = **found;
  auto reserve =
      conn_->exec("delete file",
                  "INSERT INTO deleted_files (filename, project, sha256, deleted_at, canonical)"
                  " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (filename) DO UPDATE SET project ="
                  " EXCLUDED.project, sha256 = EXCLUDED.sha256, deleted_at = EXCLUDED.deleted_at,"
                  " canonical = EXCLUDED.canonical",
                  Params()
                      .add(f.filename)
                      .add(f.project)
                      .add(f.sha256)
                      .add(now_micros())
                      .add(core::canonical_file_key(f.filename)));
  if (!reserve) return reserve.error();
  auto del = conn_->exec("delete file", "DELETE FROM files WHERE id = $1", Params().add(f.id));
  if (!del) return del.error();
  return f;
}

Result<bool> PgCatalog::is_reserved(std::string_view filename) {
  std::lock_guard lock(mu_);
  auto found = find_reservation_locked(filename);
  if (!found) return found.error();
  return found->has_value();
}

Result<std::optional<DeletedFile>> PgCatalog::find_reservation(std::string_view filename) {
  std::lock_guard lock(mu_);
  return find_reservation_locked(filename);
}

Result<std::optional<DeletedFile>> PgCatalog::find_reservation_locked(std::string_view filename) {
  auto rows = conn_->exec("reserved-name lookup",
                          "SELECT filename, project, sha256 FROM deleted_files WHERE canonical = $1"
                          " ORDER BY filename = $2 DESC, deleted_at LIMIT 1",
                          Params().add(core::canonical_file_key(filename)).add(filename));
  if (!rows) return rows.error();
  if (rows->empty()) return std::optional<DeletedFile>();
  return std::optional<DeletedFile>(
      DeletedFile{rows->text(0, 0), rows->text(0, 1), rows->text(0, 2)});
}

Result<std::vector<DeletedFile>> PgCatalog::deleted_files(std::string_view project) {
  std::lock_guard lock(mu_);
  auto rows = conn_->exec("deleted-file listing",
                          "SELECT filename, project, sha256 FROM deleted_files WHERE project = $1"
                          " ORDER BY filename COLLATE \"C\"",
                          Params().add(project));
  if (!rows) return rows.error();
  std::vector<DeletedFile> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    out.push_back(DeletedFile{rows->text(i, 0), rows->text(i, 1), rows->text(i, 2)});
  }
  return out;
}

Result<core::FileRecord> PgCatalog::restore_file(std::string_view filename, std::string_view sha256,
                                                 const std::function<Status()>& publish) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
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
      kKeepEvery);
}

Result<bool> PgCatalog::mark_damaged(std::string_view sha256, std::string_view detail,
                                     const std::function<Result<bool>()>& quarantine) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<bool> {
        if (quarantine) {
          auto moved = quarantine();
          if (!moved) return moved.error();
          if (!*moved) return false;
        }
        auto s = conn_->exec("record damaged blob",
                             "INSERT INTO damaged_blobs (sha256, detail, found_at)"
                             " VALUES ($1, $2, $3) ON CONFLICT (sha256) DO UPDATE SET"
                             " detail = EXCLUDED.detail, found_at = EXCLUDED.found_at",
                             Params().add(sha256).add(detail).add(now_micros()));
        if (!s) return s.error();
        return true;
      },
      [](bool marked) { return marked; });
}

Status PgCatalog::clear_damaged(const std::vector<std::string>& sha256s) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction([&] { return forget_damage_locked(sha256s); }, kKeepEvery);
}

Result<std::vector<DamagedBlob>> PgCatalog::damaged_blobs() {
  std::lock_guard lock(mu_);
  auto rows = conn_->exec("list damaged blobs",
                          "SELECT sha256, detail, found_at FROM damaged_blobs"
                          " ORDER BY sha256 COLLATE \"C\"");
  if (!rows) return rows.error();
  std::vector<DamagedBlob> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    out.push_back(DamagedBlob{rows->text(i, 0), rows->text(i, 1), rows->i64(i, 2)});
  }
  return out;
}

Status PgCatalog::forget_damage_locked(const std::vector<std::string>& sha256s) {
  for (const auto& sha : sha256s) {
    auto d = conn_->exec("forget damaged blob", "DELETE FROM damaged_blobs WHERE sha256 = $1",
                         Params().add(sha));
    if (!d) return d.error();
  }
  return ok_status();
}

Result<std::vector<UninspectedWheel>> PgCatalog::uninspected_wheels() {
  std::lock_guard lock(mu_);
  auto rows = conn_->exec(
      "list uninspected wheels",
      std::string("SELECT ") + kFileColumns +
          ", f.requires_dist FROM files f JOIN projects p ON p.id = f.project_id"
          " WHERE f.kind = 'wheel' AND f.binaries IS NULL ORDER BY f.filename COLLATE \"C\"");
  if (!rows) return rows.error();
  std::vector<UninspectedWheel> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    UninspectedWheel w{file_from_row(Row(*rows, i)), {}};
    const std::string requires_dist = rows->text(i, kFileColumnCount);
    for (const auto line : split(requires_dist, '\n')) {
      if (!line.empty()) w.requires_dist.emplace_back(line);
    }
    out.push_back(std::move(w));
  }
  return out;
}

Result<bool> PgCatalog::set_provenance(std::string_view filename, std::string_view sha256,
                                       std::string_view provenance_sha256,
                                       std::uint64_t provenance_size, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<bool> {
        auto s = conn_->exec("provenance lookup",
                             "SELECT f.sha256, f.provenance_sha256, p.name FROM files f"
                             " JOIN projects p ON p.id = f.project_id WHERE f.filename = $1"
                             " FOR UPDATE OF f",
                             Params().add(filename));
        if (!s) return s.error();
        if (s->empty()) {
          return make_error(Errc::not_found, "no file named " + std::string(filename));
        }
        if (s->text(0, 0) != sha256) {
          return make_error(Errc::conflict, std::string(filename) + " holds other bytes (sha256 " +
                                                s->text(0, 0) + ")");
        }
        if (s->text(0, 1) == provenance_sha256) return false;
        if (!s->text(0, 1).empty()) {
          return make_error(Errc::conflict, provenance_exists_message(filename));
        }
        auto u = conn_->exec("record provenance",
                             "UPDATE files SET provenance_sha256 = $1, provenance_size = $2"
                             " WHERE filename = $3 AND provenance_sha256 = ''",
                             Params()
                                 .add(provenance_sha256)
                                 .add(static_cast<std::int64_t>(provenance_size))
                                 .add(filename));
        if (!u) return u.error();
        if (auto st = append_audit_locked(
                AuditRecord{0, 0, "attestations", by, s->text(0, 2), std::string(filename),
                            "provenance " + std::string(provenance_sha256)});
            !st) {
          return st.error();
        }
        return true;
      },
      [](bool written) { return written; });
}

Result<bool> PgCatalog::record_findings(std::string_view filename, std::string_view sha256,
                                        const core::WheelFindings& findings) {
  const std::string encoded = core::encode_findings(findings);
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<bool> {
        auto s = conn_->exec("findings lookup",
                             "SELECT sha256, kind, binaries IS NOT NULL FROM files"
                             " WHERE filename = $1",
                             Params().add(filename));
        if (!s) return s.error();
        if (s->empty()) {
          return make_error(Errc::not_found, "no file named " + std::string(filename));
        }
        if (s->text(0, 0) != sha256) {
          return make_error(Errc::conflict, std::string(filename) + " holds other bytes (sha256 " +
                                                s->text(0, 0) + ")");
        }
        if (s->text(0, 1) != "wheel") {
          return make_error(Errc::invalid, std::string(filename) + " is not a wheel");
        }
        if (s->i64(0, 2) != 0) return false;
        auto u =
            conn_->exec("record findings",
                        "UPDATE files SET binaries = $1 WHERE filename = $2 AND binaries IS NULL",
                        Params().add(encoded).add(filename));
        if (!u) return u.error();
        return u->affected() == 1;
      },
      [](bool written) { return written; });
}

}  // namespace wf::catalog::detail
