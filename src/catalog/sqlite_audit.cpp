// Tokens (creation, revocation, last use) and the audit trail.

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/row_mapping.hpp"
#include "catalog/sqlite_catalog_impl.hpp"

namespace wf::catalog {

std::string Actor::label() const {
  return token_id != 0 ? "token:" + std::to_string(token_id) : origin;
}

Actor Actor::of_token(const TokenRecord& token, std::string address) {
  Actor a;
  a.token_id = token.id;
  a.token_description = token.description;
  a.origin = "http";
  a.address = std::move(address);
  return a;
}

}  // namespace wf::catalog

namespace wf::catalog::detail {

namespace {}  // namespace

Result<TokenRecord> SqliteCatalog::insert_token(const TokenRecord& token, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<TokenRecord> {
        Stmt s(db_,
               "INSERT INTO tokens (hash, scope, project, description, created_at, expires_at,"
               " created_by) VALUES (?, ?, ?, ?, ?, ?, ?)");
        if (!s.valid()) return db_.error("prepare token insert");
        TokenRecord stored = token;
        stored.created_by = by.label();
        s.bind(1, token.hash)
            .bind(2, scope_name(token.scope))
            .bind(3, token.project)
            .bind(4, token.description)
            .bind(5, token.created_at)
            .bind(6, token.expires_at)
            .bind(7, stored.created_by);
        if (s.step() != SQLITE_DONE) return db_.error("insert token");
        stored.id = db_.last_insert_rowid();
        if (auto st = append_audit_locked(
                AuditRecord{0, token.created_at, "token-create", by, token.project.value_or(""),
                            token_target(stored.id), token_detail(stored)});
            !st) {
          return st.error();
        }
        return stored;
      },
      [](const auto&) { return true; });
}

Result<TokenRecord> SqliteCatalog::revoke_token(std::int64_t id, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<TokenRecord> {
        Stmt u(db_, "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?");
        u.bind(1, now_micros()).bind(2, id);
        if (u.step() != SQLITE_DONE) return db_.error("revoke token");
        if (db_.changes() == 0) {
          return make_error(Errc::not_found, "no token #" + std::to_string(id));
        }
        Stmt s(db_, std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE id = ?");
        s.bind(1, id);
        if (s.step() != SQLITE_ROW) return db_.error("read token");
        TokenRecord t = read_token_row(s);
        if (auto st =
                append_audit_locked(AuditRecord{0, 0, "token-revoke", by, t.project.value_or(""),
                                                token_target(id), token_detail(t)});
            !st) {
          return st.error();
        }
        return t;
      },
      [](const auto&) { return true; });
}

TokenRecord SqliteCatalog::read_token_row(const Stmt& s) {
  return token_from_row(s);
}

Result<std::vector<TokenRecord>> SqliteCatalog::tokens() {
  std::lock_guard lock(mu_);
  return tokens_locked();
}

Result<std::vector<TokenRecord>> SqliteCatalog::tokens_locked() {
  Stmt s(db_, std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY id");
  if (!s.valid()) return db_.error("prepare token list");
  std::vector<TokenRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(read_token_row(s));
  if (rc != SQLITE_DONE) return db_.error("list tokens");
  return out;
}

Status SqliteCatalog::record_token_uses(const std::vector<std::pair<std::int64_t, Micros>>& uses) {
  if (uses.empty()) return ok_status();
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Status {
        for (const auto& [id, at] : uses) {
          Stmt u(db_,
                 "UPDATE tokens SET last_used_at = ? WHERE id = ?"
                 " AND (last_used_at IS NULL OR last_used_at < ?)");
          if (!u.valid()) return db_.error("prepare token use");
          u.bind(1, at).bind(2, id).bind(3, at);
          if (u.step() != SQLITE_DONE) return db_.error("record token use");
        }
        return ok_status();
      },
      [](const auto&) { return true; });
}

Status SqliteCatalog::record_upstream_blob(const UpstreamBlob& blob) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Status {
        Stmt s(db_,
               "INSERT OR IGNORE INTO upstream_blobs"
               " (sha256, upstream, filename, size, stored_at, last_used_at)"
               " VALUES (?, ?, ?, ?, ?, ?)");
        if (!s.valid()) return db_.error("prepare upstream blob");
        s.bind(1, blob.sha256)
            .bind(2, blob.upstream)
            .bind(3, blob.filename)
            .bind(4, static_cast<std::int64_t>(blob.size))
            .bind(5, blob.stored_at)
            .bind(6, blob.last_used_at);
        if (s.step() != SQLITE_DONE) return db_.error("record upstream blob");
        return ok_status();
      },
      [](const auto&) { return true; });
}

Result<std::vector<UpstreamBlob>> SqliteCatalog::upstream_blobs() {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "SELECT sha256, upstream, filename, size, stored_at, last_used_at FROM upstream_blobs"
         " ORDER BY sha256");
  if (!s.valid()) return db_.error("prepare upstream blobs");
  std::vector<UpstreamBlob> out;
  int rc = SQLITE_ROW;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.push_back(UpstreamBlob{s.text(0), s.text(1), s.text(2),
                               static_cast<std::uint64_t>(s.i64(3)), s.i64(4), s.i64(5)});
  }
  if (rc != SQLITE_DONE) return db_.error("list upstream blobs");
  return out;
}

Status SqliteCatalog::touch_upstream_blob(std::string_view sha256, Micros at) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Status {
        Stmt s(db_,
               "UPDATE upstream_blobs SET last_used_at = ? WHERE sha256 = ? AND last_used_at < ?");
        if (!s.valid()) return db_.error("prepare upstream blob use");
        s.bind(1, at).bind(2, sha256).bind(3, at);
        if (s.step() != SQLITE_DONE) return db_.error("record upstream blob use");
        return ok_status();
      },
      [](const auto&) { return true; });
}

Result<bool> SqliteCatalog::forget_upstream_blob(std::string_view sha256) {
  std::lock_guard lock(mu_);
  bool shared = false;
  auto st = db_.write_transaction(
      [&]() -> Status {
        Stmt d(db_, "DELETE FROM upstream_blobs WHERE sha256 = ?");
        if (!d.valid()) return db_.error("prepare upstream blob removal");
        d.bind(1, sha256);
        if (d.step() != SQLITE_DONE) return db_.error("remove upstream blob");
        Stmt f(db_, "SELECT 1 FROM files WHERE sha256 = ? OR metadata_sha256 = ? LIMIT 1");
        if (!f.valid()) return db_.error("prepare blob reference check");
        f.bind(1, sha256).bind(2, sha256);
        const int rc = f.step();
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_.error("check blob references");
        shared = rc == SQLITE_ROW;
        return ok_status();
      },
      [](const auto&) { return true; });
  if (!st) return st.error();
  return shared;
}

Status SqliteCatalog::record_audit(const AuditRecord& entry) {
  std::lock_guard lock(mu_);
  return db_.write_transaction([&] { return append_audit_locked(entry); },
                               [](const auto&) { return true; });
}

Status SqliteCatalog::append_audit_locked(const AuditRecord& entry) {
  Stmt s(db_,
         "INSERT INTO audit (at, action, token_id, token_description, origin, address, project,"
         " target, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!s.valid()) return db_.error("prepare audit entry");
  const Actor& a = entry.actor;
  s.bind(1, entry.at != 0 ? entry.at : now_micros())
      .bind(2, entry.action)
      .bind(3, a.token_id != 0 ? std::optional(a.token_id) : std::nullopt)
      .bind(4, a.token_description)
      .bind(5, a.origin)
      .bind(6, a.address)
      .bind(7, entry.project)
      .bind(8, entry.target)
      .bind(9, entry.detail);
  if (s.step() != SQLITE_DONE) return db_.error("record audit entry");
  return ok_status();
}

Result<std::vector<AuditRecord>> SqliteCatalog::audit(const AuditQuery& query) {
  std::lock_guard lock(mu_);
  const std::string sql =
      std::string(
          "SELECT id, at, action, token_id, token_description, origin, address, project,"
          " target, detail FROM audit WHERE at >= ?") +
      (query.project ? " AND project = ?" : "") + " ORDER BY at DESC, id DESC LIMIT ?";
  Stmt s(db_, sql);
  if (!s.valid()) return db_.error("prepare audit query");
  int i = 1;
  s.bind(i++, query.since);
  if (query.project) s.bind(i++, *query.project);
  s.bind(i, static_cast<std::int64_t>(query.limit));
  std::vector<AuditRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = s.step()) == SQLITE_ROW) {
    AuditRecord r;
    r.id = s.i64(0);
    r.at = s.i64(1);
    r.action = s.text(2);
    r.actor.token_id = s.opt_i64(3).value_or(0);
    r.actor.token_description = s.text(4);
    r.actor.origin = s.text(5);
    r.actor.address = s.text(6);
    r.project = s.text(7);
    r.target = s.text(8);
    r.detail = s.text(9);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return db_.error("audit query");
  return out;
}

}  // namespace wf::catalog::detail

// Trusted publishers and minted tokens (docs/publishing.md, "Trusted publishing").
namespace wf::catalog {

std::string encode_claims(const std::vector<std::pair<std::string, std::string>>& c) {
  auto sorted = c;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (const auto& [k, v] : sorted) out += k + "=" + v + "\n";
  return out;
}

std::vector<std::pair<std::string, std::string>> decode_claims(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return out;
}

}  // namespace wf::catalog

namespace wf::catalog::detail {

Result<PublisherRecord> SqliteCatalog::insert_publisher(const PublisherRecord& publisher,
                                                        const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<PublisherRecord> {
        PublisherRecord stored = publisher;
        stored.claims = decode_claims(encode_claims(publisher.claims));
        stored.created_by = by.label();
        Stmt s(db_,
               "INSERT INTO trusted_publishers (project, issuer, claims, description, created_at,"
               " created_by) VALUES (?, ?, ?, ?, ?, ?)");
        if (!s.valid()) return db_.error("prepare publisher insert");
        s.bind(1, stored.project)
            .bind(2, stored.issuer)
            .bind(3, encode_claims(stored.claims))
            .bind(4, stored.description)
            .bind(5, stored.created_at)
            .bind(6, stored.created_by);
        if (s.step() != SQLITE_DONE) return db_.error("insert publisher");
        stored.id = db_.last_insert_rowid();
        if (auto st = append_audit_locked(AuditRecord{0, stored.created_at, "publisher-add", by,
                                                      stored.project, publisher_target(stored.id),
                                                      publisher_detail(stored)});
            !st) {
          return st.error();
        }
        return stored;
      },
      [](const auto&) { return true; });
}

Result<PublisherRecord> SqliteCatalog::remove_publisher(std::int64_t id, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<PublisherRecord> {
        Stmt s(db_, std::string("SELECT ") + kPublisherColumns +
                        " FROM trusted_publishers WHERE id = ?");
        s.bind(1, id);
        if (s.step() != SQLITE_ROW) {
          return make_error(Errc::not_found, "no publisher #" + std::to_string(id));
        }
        PublisherRecord p = publisher_from_row(s);
        Stmt d(db_, "DELETE FROM trusted_publishers WHERE id = ?");
        d.bind(1, id);
        if (d.step() != SQLITE_DONE) return db_.error("remove publisher");
        if (auto st = append_audit_locked(AuditRecord{0, 0, "publisher-remove", by, p.project,
                                                      publisher_target(id), publisher_detail(p)});
            !st) {
          return st.error();
        }
        return p;
      },
      [](const auto&) { return true; });
}

Result<std::vector<PublisherRecord>> SqliteCatalog::publishers() {
  std::lock_guard lock(mu_);
  Stmt s(db_, std::string("SELECT ") + kPublisherColumns + " FROM trusted_publishers ORDER BY id");
  if (!s.valid()) return db_.error("prepare publisher list");
  std::vector<PublisherRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(publisher_from_row(s));
  if (rc != SQLITE_DONE) return db_.error("list publishers");
  return out;
}

Result<TokenRecord> SqliteCatalog::mint_token(const MintRequest& req, const Actor& by) {
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<TokenRecord> {
        Stmt forget(db_, "DELETE FROM oidc_jtis WHERE expires_at < ?");
        forget.bind(1, req.token.created_at);
        if (forget.step() != SQLITE_DONE) return db_.error("forget expired token ids");
        Stmt j(db_, "INSERT INTO oidc_jtis (jti, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING");
        j.bind(1, req.jti_key).bind(2, req.jti_until);
        if (j.step() != SQLITE_DONE) return db_.error("record token id");
        if (db_.changes() == 0) {
          return make_error(Errc::conflict, "this OIDC token (its jti) was exchanged before");
        }
        Stmt s(db_,
               "INSERT INTO tokens (hash, scope, project, description, created_at, expires_at,"
               " created_by, publisher_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        TokenRecord stored = req.token;
        stored.created_by = by.label();
        stored.publisher_id = req.publisher_id;
        s.bind(1, stored.hash)
            .bind(2, scope_name(stored.scope))
            .bind(3, stored.project)
            .bind(4, stored.description)
            .bind(5, stored.created_at)
            .bind(6, stored.expires_at)
            .bind(7, stored.created_by)
            .bind(8, stored.publisher_id);
        if (s.step() != SQLITE_DONE) return db_.error("insert token");
        stored.id = db_.last_insert_rowid();
        if (auto st = append_audit_locked(
                AuditRecord{0, stored.created_at, "token-create", by, stored.project.value_or(""),
                            token_target(stored.id), token_detail(stored) + " " + req.detail});
            !st) {
          return st.error();
        }
        return stored;
      },
      [](const auto&) { return true; });
}

}  // namespace wf::catalog::detail
