// The PostgreSQL catalog's tokens (creation, revocation, last use), upstream blobs and audit
// trail (SqliteCatalog's semantics: sqlite_audit.cpp).

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/row_mapping.hpp"

namespace wf::catalog::detail {

using pg::Params;
using pg::Row;

namespace {

constexpr auto kKeep = [](const auto&) { return true; };

}  // namespace

Result<TokenRecord> PgCatalog::insert_token(const TokenRecord& token, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<TokenRecord> {
        TokenRecord stored = token;
        stored.created_by = by.label();
        auto ins = conn_->exec("insert token",
                               "INSERT INTO tokens (hash, scope, project, description, created_at,"
                               " expires_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                               " RETURNING id",
                               Params()
                                   .add(token.hash)
                                   .add(scope_name(token.scope))
                                   .add(token.project)
                                   .add(token.description)
                                   .add(token.created_at)
                                   .add(token.expires_at)
                                   .add(stored.created_by));
        if (!ins) return ins.error();
        stored.id = ins->i64(0, 0);
        if (auto st = append_audit_locked(
                AuditRecord{0, token.created_at, "token-create", by, token.project.value_or(""),
                            token_target(stored.id), token_detail(stored)});
            !st) {
          return st.error();
        }
        return stored;
      },
      kKeep);
}

Result<TokenRecord> PgCatalog::revoke_token(std::int64_t id, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<TokenRecord> {
        auto u = conn_->exec("revoke token",
                             std::string("UPDATE tokens SET revoked_at = COALESCE(revoked_at, $1)"
                                         " WHERE id = $2 RETURNING ") +
                                 kTokenColumns,
                             Params().add(now_micros()).add(id));
        if (!u) return u.error();
        if (u->empty()) return make_error(Errc::not_found, "no token #" + std::to_string(id));
        TokenRecord t = token_from_row(Row(*u, 0));
        if (auto st =
                append_audit_locked(AuditRecord{0, 0, "token-revoke", by, t.project.value_or(""),
                                                token_target(id), token_detail(t)});
            !st) {
          return st.error();
        }
        return t;
      },
      kKeep);
}

Result<std::vector<TokenRecord>> PgCatalog::tokens() {
  std::lock_guard lock(mu_);
  return tokens_locked();
}

Result<std::vector<TokenRecord>> PgCatalog::tokens_locked() {
  auto rows = conn_->exec("list tokens",
                          std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY id");
  if (!rows) return rows.error();
  std::vector<TokenRecord> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) out.push_back(token_from_row(Row(*rows, i)));
  return out;
}

Status PgCatalog::record_token_uses(const std::vector<std::pair<std::int64_t, Micros>>& uses) {
  if (uses.empty()) return ok_status();
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Status {
        for (const auto& [id, at] : uses) {
          auto u = conn_->exec("record token use",
                               "UPDATE tokens SET last_used_at = $1 WHERE id = $2"
                               " AND (last_used_at IS NULL OR last_used_at < $1)",
                               Params().add(at).add(id));
          if (!u) return u.error();
        }
        return ok_status();
      },
      kKeep, pg::Conn::WriteLock::shared);
}

Status PgCatalog::record_upstream_blob(const UpstreamBlob& blob) {
  std::lock_guard lock(mu_);
  auto s = conn_->exec("record upstream blob",
                       "INSERT INTO upstream_blobs"
                       " (sha256, upstream, filename, size, stored_at, last_used_at)"
                       " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sha256) DO NOTHING",
                       Params()
                           .add(blob.sha256)
                           .add(blob.upstream)
                           .add(blob.filename)
                           .add(static_cast<std::int64_t>(blob.size))
                           .add(blob.stored_at)
                           .add(blob.last_used_at));
  if (!s) return s.error();
  return ok_status();
}

Result<std::vector<UpstreamBlob>> PgCatalog::upstream_blobs() {
  std::lock_guard lock(mu_);
  auto rows = conn_->exec("list upstream blobs",
                          "SELECT sha256, upstream, filename, size, stored_at, last_used_at"
                          " FROM upstream_blobs ORDER BY sha256 COLLATE \"C\"");
  if (!rows) return rows.error();
  std::vector<UpstreamBlob> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    out.push_back(UpstreamBlob{rows->text(i, 0), rows->text(i, 1), rows->text(i, 2),
                               static_cast<std::uint64_t>(rows->i64(i, 3)), rows->i64(i, 4),
                               rows->i64(i, 5)});
  }
  return out;
}

Status PgCatalog::touch_upstream_blob(std::string_view sha256, Micros at) {
  std::lock_guard lock(mu_);
  auto s = conn_->exec(
      "record upstream blob use",
      "UPDATE upstream_blobs SET last_used_at = $1 WHERE sha256 = $2 AND last_used_at < $1",
      Params().add(at).add(sha256));
  if (!s) return s.error();
  return ok_status();
}

Result<bool> PgCatalog::forget_upstream_blob(std::string_view sha256) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<bool> {
        auto d = conn_->exec("remove upstream blob", "DELETE FROM upstream_blobs WHERE sha256 = $1",
                             Params().add(sha256));
        if (!d) return d.error();
        auto f =
            conn_->exec("check blob references",
                        "SELECT 1 FROM files WHERE sha256 = $1 OR metadata_sha256 = $1 LIMIT 1",
                        Params().add(sha256));
        if (!f) return f.error();
        return !f->empty();
      },
      kKeep);
}

Status PgCatalog::record_audit(const AuditRecord& entry) {
  std::lock_guard lock(mu_);
  return append_audit_locked(entry);
}

Status PgCatalog::append_audit_locked(const AuditRecord& entry) {
  const Actor& a = entry.actor;
  auto s = conn_->exec("record audit entry",
                       "INSERT INTO audit (at, action, token_id, token_description, origin,"
                       " address, project, target, detail)"
                       " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                       Params()
                           .add(entry.at != 0 ? entry.at : now_micros())
                           .add(entry.action)
                           .add(a.token_id != 0 ? std::optional(a.token_id) : std::nullopt)
                           .add(a.token_description)
                           .add(a.origin)
                           .add(a.address)
                           .add(entry.project)
                           .add(entry.target)
                           .add(entry.detail));
  if (!s) return s.error();
  return ok_status();
}

Result<std::vector<AuditRecord>> PgCatalog::audit(const AuditQuery& query) {
  std::lock_guard lock(mu_);
  Params p;
  p.add(query.since);
  if (query.project) p.add(*query.project);
  p.add(static_cast<std::int64_t>(query.limit));
  auto rows = conn_->exec(
      "audit query",
      std::string("SELECT id, at, action, token_id, token_description, origin, address, project,"
                  " target, detail FROM audit WHERE at >= $1") +
          (query.project ? " AND project = $2 ORDER BY at DESC, id DESC LIMIT $3"
                         : " ORDER BY at DESC, id DESC LIMIT $2"),
      p);
  if (!rows) return rows.error();
  std::vector<AuditRecord> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    AuditRecord r;
    r.id = rows->i64(i, 0);
    r.at = rows->i64(i, 1);
    r.action = rows->text(i, 2);
    r.actor.token_id = rows->opt_i64(i, 3).value_or(0);
    r.actor.token_description = rows->text(i, 4);
    r.actor.origin = rows->text(i, 5);
    r.actor.address = rows->text(i, 6);
    r.project = rows->text(i, 7);
    r.target = rows->text(i, 8);
    r.detail = rows->text(i, 9);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace wf::catalog::detail

// Trusted publishers and minted tokens (SqliteCatalog's semantics: sqlite_audit.cpp).
namespace wf::catalog::detail {

Result<PublisherRecord> PgCatalog::insert_publisher(const PublisherRecord& publisher,
                                                    const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<PublisherRecord> {
        PublisherRecord stored = publisher;
        stored.claims = decode_claims(encode_claims(publisher.claims));
        stored.created_by = by.label();
        auto ins = conn_->exec("insert publisher",
                               "INSERT INTO trusted_publishers (project, issuer, claims,"
                               " description, created_at, created_by)"
                               " VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                               Params()
                                   .add(stored.project)
                                   .add(stored.issuer)
                                   .add(encode_claims(stored.claims))
                                   .add(stored.description)
                                   .add(stored.created_at)
                                   .add(stored.created_by));
        if (!ins) return ins.error();
        stored.id = ins->i64(0, 0);
        if (auto st = append_audit_locked(AuditRecord{0, stored.created_at, "publisher-add", by,
                                                      stored.project, publisher_target(stored.id),
                                                      publisher_detail(stored)});
            !st) {
          return st.error();
        }
        return stored;
      },
      kKeep);
}

Result<PublisherRecord> PgCatalog::remove_publisher(std::int64_t id, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<PublisherRecord> {
        auto d =
            conn_->exec("remove publisher",
                        std::string("DELETE FROM trusted_publishers WHERE id = $1 RETURNING ") +
                            kPublisherColumns,
                        Params().add(id));
        if (!d) return d.error();
        if (d->empty()) return make_error(Errc::not_found, "no publisher #" + std::to_string(id));
        PublisherRecord p = publisher_from_row(Row(*d, 0));
        if (auto st = append_audit_locked(AuditRecord{0, 0, "publisher-remove", by, p.project,
                                                      publisher_target(id), publisher_detail(p)});
            !st) {
          return st.error();
        }
        return p;
      },
      kKeep);
}

Result<std::vector<PublisherRecord>> PgCatalog::publishers() {
  std::lock_guard lock(mu_);
  auto rows = conn_->exec("list publishers", std::string("SELECT ") + kPublisherColumns +
                                                 " FROM trusted_publishers ORDER BY id");
  if (!rows) return rows.error();
  std::vector<PublisherRecord> out;
  out.reserve(static_cast<std::size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) out.push_back(publisher_from_row(Row(*rows, i)));
  return out;
}

Result<TokenRecord> PgCatalog::mint_token(const MintRequest& req, const Actor& by) {
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<TokenRecord> {
        auto forget =
            conn_->exec("forget expired token ids", "DELETE FROM oidc_jtis WHERE expires_at < $1",
                        Params().add(req.token.created_at));
        if (!forget) return forget.error();
        // A second server inserting the same id waits for the first one's commit, then
        // inserts nothing: only one of them mints.
        auto j = conn_->exec("record token id",
                             "INSERT INTO oidc_jtis (jti, expires_at) VALUES ($1, $2)"
                             " ON CONFLICT (jti) DO NOTHING RETURNING jti",
                             Params().add(req.jti_key).add(req.jti_until));
        if (!j) return j.error();
        if (j->empty()) {
          return make_error(Errc::conflict, "this OIDC token (its jti) was exchanged before");
        }
        TokenRecord stored = req.token;
        stored.created_by = by.label();
        stored.publisher_id = req.publisher_id;
        auto ins = conn_->exec("insert token",
                               "INSERT INTO tokens (hash, scope, project, description, created_at,"
                               " expires_at, created_by, publisher_id)"
                               " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                               Params()
                                   .add(stored.hash)
                                   .add(scope_name(stored.scope))
                                   .add(stored.project)
                                   .add(stored.description)
                                   .add(stored.created_at)
                                   .add(stored.expires_at)
                                   .add(stored.created_by)
                                   .add(stored.publisher_id));
        if (!ins) return ins.error();
        stored.id = ins->i64(0, 0);
        if (auto st = append_audit_locked(
                AuditRecord{0, stored.created_at, "token-create", by, stored.project.value_or(""),
                            token_target(stored.id), token_detail(stored) + " " + req.detail});
            !st) {
          return st.error();
        }
        return stored;
      },
      kKeep);
}

}  // namespace wf::catalog::detail
