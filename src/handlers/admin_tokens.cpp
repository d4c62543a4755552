// The admin API's tokens and audit trail (admin token checked by the route table; on a worker).
//
//   GET    /admin/tokens
//   POST   /admin/tokens             scope=read|upload|admin [project=NAME] [description=TEXT]
//                                    [expires=90d|12h|2027-01-31|...]
//   POST   /admin/tokens/<id>/revoke
//   GET    /admin/audit              [project=NAME] [since=7d|2027-01-31|...] [limit=N]

#include <climits>

#include "handlers.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/render/admin.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

constexpr std::size_t kMaxDescription = 200;
constexpr std::size_t kAuditLimit = 1000;
constexpr std::size_t kMaxAuditLimit = 10000;

}  // namespace

const catalog::TokenRecord* caller_token(const Request& req, const snapshot::Snapshot& snap) {
  const auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token || !*token) return nullptr;
  return snap.tokens().find(**token);
}

catalog::Actor actor_of(const Request& req, const catalog::TokenRecord* token) {
  if (token != nullptr) return catalog::Actor::of_token(*token, req.peer);
  catalog::Actor a;
  a.origin = "http";
  a.address = req.peer;
  return a;
}

void record_build(Context& ctx, const catalog::Actor& actor, const catalog::BuildRecord& build,
                  std::size_t jobs) {
  catalog::AuditRecord entry;
  entry.action = "build";
  entry.actor = actor;
  entry.target = "build #" + std::to_string(build.id);
  entry.detail = "recipe=" + build.recipe + " version=" + build.version +
                 " jobs=" + std::to_string(jobs) + (build.force ? " force" : "");
  if (auto st = ctx.env.services.catalog->record_audit(entry); !st) {
    ctx.note = "build " + std::to_string(build.id) +
               " not recorded in the audit trail: " + st.error().message;
  }
}

Response handle_list_tokens(const Request& /*req*/, Context& ctx) {
  auto tokens = ctx.env.services.catalog->tokens();
  if (!tokens) return error_response(tokens.error());
  return json_no_store(200, render::render_tokens(*tokens, now_micros()));
}

Result<catalog::TokenRecord> decode_token_request(const Fields& fields, Micros now) {
  Problems problems;
  std::optional<catalog::Scope> scope;
  bool scope_given = false;
  catalog::TokenRecord record;
  record.created_at = now;
  for (const auto& [k, v] : fields) {
    if (k == "scope") {
      scope_given = true;
      scope = catalog::parse_scope(v);
      if (!scope) problems.add("scope must be read, upload or admin");
    } else if (k == "project") {
      if (!v.empty() && core::is_valid_project_name(v)) {
        record.project = core::normalize_name(v);
      } else if (!v.empty()) {
        problems.add("project: '" + sanitize_for_log(v, 100) + "' is not a valid project name");
      }
    } else if (k == "description") {
      if (v.size() > kMaxDescription) {
        problems.add("description is longer than " + std::to_string(kMaxDescription) +
                     " characters");
      }
      if (auto st = check_free_text("description", v); !st) problems.add(st.error().message);
      record.description = v;
    } else if (k == "expires") {
      if (v.empty()) continue;
      auto at = auth::parse_expiry(v, now);
      if (at) {
        record.expires_at = *at;
      } else {
        problems.add(at.error().message);
      }
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (!scope_given) problems.add("scope=read|upload|admin is required");
  if (scope && record.project && *scope != catalog::Scope::upload) {
    problems.add("project= limits upload tokens only");
  }
  if (!problems.empty()) return problems.to_error();
  record.scope = *scope;
  return record;
}

Result<std::pair<catalog::TokenRecord, std::string>> create_token(Context& ctx,
                                                                  catalog::TokenRecord record,
                                                                  const catalog::Actor& by) {
  std::string secret = auth::generate_token();
  record.hash = auth::hash_token(secret);
  auto stored = ctx.env.services.catalog->insert_token(record, by);
  if (!stored) return stored.error();
  ctx.note = "token #" + std::to_string(stored->id) + " created (" +
             std::string(catalog::scope_name(stored->scope)) + ")";
  return std::pair{std::move(*stored), std::move(secret)};
}

Response handle_create_token(const Request& req, Context& ctx) {
  auto record = decode_token_request(request_parameters(req), now_micros());
  if (!record) return error_response(record.error());
  auto created =
      create_token(ctx, std::move(*record), actor_of(req, caller_token(req, ctx.snapshot)));
  if (!created) return error_response(created.error());
  return json_no_store(201,
                       render::render_created_token(created->first, created->second, now_micros()));
}

Response handle_revoke_token(const Request& req, Context& ctx) {
  const auto n = parse_u64(req.segments[2]);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) {
    return error_response(make_error(Errc::not_found, "no such token"));
  }
  auto revoked = ctx.env.services.catalog->revoke_token(
      static_cast<std::int64_t>(*n), actor_of(req, caller_token(req, ctx.snapshot)));
  if (!revoked) return error_response(revoked.error());
  ctx.note = "token #" + std::to_string(revoked->id) + " revoked";
  return json_no_store(200, render::render_token(*revoked, now_micros()));
}

Response handle_audit(const Request& req, Context& ctx) {
  Problems problems;
  catalog::AuditQuery query;
  query.limit = kAuditLimit;
  for (auto& [k, v] : parse_form(req.query)) {
    if (k == "project") {
      if (core::is_valid_project_name(v)) {
        query.project = core::normalize_name(v);
      } else {
        problems.add("project: '" + sanitize_for_log(v, 100) + "' is not a valid project name");
      }
    } else if (k == "since") {
      auto since = auth::parse_since(v, now_micros());
      if (since) {
        query.since = *since;
      } else {
        problems.add("since: " + since.error().message);
      }
    } else if (k == "limit") {
      const auto n = parse_u64(v);
      if (!n || *n == 0 || *n > kMaxAuditLimit) {
        problems.add("limit must be a number from 1 to " + std::to_string(kMaxAuditLimit));
      } else {
        query.limit = static_cast<std::size_t>(*n);
      }
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (!problems.empty()) return error_response(problems.to_error());
  auto entries = ctx.env.services.catalog->audit(query);
  if (!entries) return error_response(entries.error());
  return json_no_store(200, render::render_audit(*entries));
}

}  // namespace wf::handlers
