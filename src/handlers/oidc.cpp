// Trusted publishing (docs/publishing.md): the exchange of a CI job's OIDC token for a
// short-lived upload token of one project, and the admin API of trusted publishers.
//
//   GET    /.well-known/pytp[/...]      PEP 807 discovery: where the two routes below are
//   GET    /_/oidc/audience             {"audience": "..."}  (Warehouse's route)
//   POST   /_/oidc/mint-token           {"token": "<JWT>"} -> {"success": true, "token": ...}
//   GET    /admin/publishers            [project=NAME]
//   POST   /admin/publishers            project=NAME issuer=NAME claim.NAME=VALUE... [description]
//   DELETE /admin/publishers/{id}

#include "wheelforge/handlers/oidc.hpp"

#include <algorithm>
#include <climits>

#include "handlers.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/render/oidc.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

/// Upload tokens minted for a publisher live this long (PyPI: 15 minutes).
constexpr Micros kMintedLifetime = 15LL * 60 * 1'000'000;
/// Clock skew allowed between the issuer and this server, in seconds.
constexpr std::int64_t kLeeway = 60;

// Warehouse's refusal: 422 {"message": ..., "errors": [{"code": ..., "description": ...}]}.
Response mint_refused(Context& ctx, std::string_view code, const std::string& description) {
  ctx.note = "trusted publishing refused: " + std::string(code) + ": " + description;
  return json_no_store(422, render::render_mint_refusal(code, description));
}

}  // namespace

const auth::oidc::IssuerConfig* OidcIssuers::by_url(std::string_view iss) const {
  for (const auto& i : issuers_) {
    if (i.url == iss) return &i;
  }
  return nullptr;
}

Result<std::string> OidcIssuers::fetch_json(const std::string& url, std::string_view what) {
  FetchRequest req;
  req.url = url;
  req.headers.emplace_back("Accept", "application/json");
  req.max_bytes = 1ULL << 20U;
  req.deadline = std::chrono::seconds(10);
  auto got = fetcher_.fetch(req);
  if (!got) return got.error();
  if (got->status != 200) {
    return make_error(Errc::unavailable, std::string(what) + " " + sanitize_for_log(url, 200) +
                                             " answered HTTP " + std::to_string(got->status));
  }
  return std::move(got->body);
}

Result<auth::oidc::KeySet> OidcIssuers::keys(const auth::oidc::IssuerConfig& issuer, KeyFetch how) {
  const auto index = static_cast<std::size_t>(&issuer - issuers_.data());
  if (index >= issuers_.size()) return make_error(Errc::internal, "not a configured issuer");
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    Cached& c = cache_[index];
    if (c.loaded) {
      if (how == KeyFetch::kept) return c.keys;
      if (c.fetched && now - *c.fetched < issuer.jwks_refetch_interval) return c.keys;
    }
    c.fetched = now;  // callers within the interval take the kept set meanwhile
  }
  std::string jwks_url = issuer.jwks_url;
  if (jwks_url.empty()) {
    auto doc =
        fetch_json(issuer.url + "/.well-known/openid-configuration", "the discovery document");
    if (!doc) return doc.error();
    auto discovery = render::parse_oidc_discovery(*doc);
    if (!discovery) {
      return make_error(Errc::unavailable,
                        "issuer " + issuer.name + ": " + discovery.error().message);
    }
    if (discovery->issuer != issuer.url) {
      return make_error(Errc::unavailable,
                        "issuer " + issuer.name + ": its discovery document names another issuer");
    }
    jwks_url = discovery->jwks_uri;
  }
  auto body = fetch_json(jwks_url, "the JWKS");
  if (!body) return body.error();
  auto set = auth::oidc::KeySet::parse(*body);
  if (!set) {
    return make_error(Errc::unavailable, "issuer " + issuer.name + ": " + set.error().message);
  }
  log::info("oidc issuer {}: {} signing key(s) fetched from {}", issuer.name, set->size(),
            sanitize_for_log(jwks_url, 200));
  std::lock_guard lock(mu_);
  cache_[index].loaded = true;
  cache_[index].keys = *set;
  return std::move(*set);
}

Response handle_pytp_discovery(const Request& req, Context& ctx) {
  if (ctx.env.oidc == nullptr) return not_found("trusted publishing is not configured here");
  return json_no_store(200, render::render_pytp_discovery(base_url(req)));
}

Response handle_oidc_audience(const Request& /*req*/, Context& ctx) {
  if (ctx.env.oidc == nullptr || ctx.env.oidc->issuers().empty()) {
    return not_found("trusted publishing is not configured here");
  }
  return json_no_store(200, render::render_oidc_audience(ctx.env.oidc->issuers().front().audience));
}

Response handle_oidc_mint(const Request& req, Context& ctx) {
  ctx.changed = Changed::nothing;
  if (ctx.env.oidc == nullptr) {
    return mint_refused(ctx, "not-enabled", "trusted publishing is not configured here");
  }
  const auto body = render::parse_mint_request(req.body);
  if (!body) return mint_refused(ctx, "invalid-payload", body.error().message);
  auto jwt = auth::oidc::parse_jwt(*body);
  if (!jwt) return mint_refused(ctx, "invalid-token", jwt.error().message);
  if (!auth::oidc::parse_alg(jwt->alg)) {
    return mint_refused(ctx, "invalid-token",
                        "signature algorithm '" + sanitize_for_log(jwt->alg, 20) +
                            "' is not allowed (RS256 or ES256)");
  }
  const auto* issuer = ctx.env.oidc->by_url(jwt->issuer);
  if (issuer == nullptr) {
    return mint_refused(
        ctx, "invalid-token",
        "wrong issuer: '" + sanitize_for_log(jwt->issuer, 200) + "' is not a configured issuer");
  }
  auto keys = ctx.env.oidc->keys(*issuer, handlers::KeyFetch::kept);
  if (keys && !jwt->kid.empty() && !keys->has(jwt->kid)) {
    // A key the kept set lacks: the issuer may have rotated its keys.
    keys = ctx.env.oidc->keys(*issuer, handlers::KeyFetch::unknown_key);
  }
  if (!keys) return mint_refused(ctx, "issuer-unavailable", keys.error().message);
  if (auto st = keys->verify(*jwt); !st) {
    std::string why = st.error().message;
    if (!jwt->kid.empty() && !keys->has(jwt->kid)) {
      why += ": not in the JWKS of issuer " + issuer->name +
             " (fetched again for an unknown key id at most once per " +
             std::to_string(issuer->jwks_refetch_interval.count()) + " s)";
    }
    return mint_refused(ctx, "invalid-token", why);
  }
  const Micros now = now_micros();
  auth::oidc::Expectations expect{issuer->url, issuer->audience, now / 1'000'000, kLeeway};
  if (auto st = auth::oidc::check_claims(*jwt, expect); !st) {
    return mint_refused(ctx, "invalid-token", st.error().message);
  }
  auto publishers = ctx.env.services.catalog->publishers();
  if (!publishers) return error_response(publishers.error());
  const catalog::PublisherRecord* match = nullptr;
  for (const auto& p : *publishers) {
    if (p.issuer == issuer->name && auth::oidc::publisher_matches(p, *jwt)) {
      match = &p;
      break;
    }
  }
  if (match == nullptr) {
    const auto sub = jwt->claims.find("sub");
    return mint_refused(ctx, "invalid-publisher",
                        "valid token, but no trusted publisher of issuer " + issuer->name +
                            " matches its claims (sub '" +
                            sanitize_for_log(sub == jwt->claims.end() ? "" : sub->second, 200) +
                            "')");
  }
  catalog::MintRequest mint;
  mint.token.scope = catalog::Scope::upload;
  mint.token.project = match->project;
  mint.token.created_at = now;
  mint.token.expires_at = now + kMintedLifetime;
  mint.token.description = "trusted publisher #" + std::to_string(match->id);
  std::string secret = auth::generate_token();
  mint.token.hash = auth::hash_token(secret);
  mint.jti_key = issuer->url + " " + jwt->jti;
  mint.jti_until = (*jwt->exp + kLeeway) * 1'000'000;
  mint.publisher_id = match->id;
  mint.detail = "origin=oidc publisher=#" + std::to_string(match->id) + " issuer=" + issuer->name;
  for (const auto& [k, v] : match->claims) mint.detail += " " + k + "=" + v;
  catalog::Actor by;
  by.origin = "oidc";
  by.address = req.peer;
  auto stored = ctx.env.services.catalog->mint_token(mint, by);
  if (!stored) {
    if (stored.error().code == Errc::conflict) {
      return mint_refused(ctx, "invalid-reuse-token", stored.error().message);
    }
    return error_response(stored.error());
  }
  ctx.changed = Changed::everything;
  ctx.note = "token #" + std::to_string(stored->id) + " minted for " + match->project +
             " (trusted publisher #" + std::to_string(match->id) + ")";
  return json_no_store(200, render::render_minted_token(secret, *stored->expires_at / 1'000'000));
}

Response handle_list_publishers(const Request& req, Context& ctx) {
  std::optional<std::string> project;
  for (auto& [k, v] : parse_form(req.query)) {
    if (k == "project" && core::is_valid_project_name(v)) {
      project = core::normalize_name(v);
    } else {
      return error_response(
          make_error(Errc::invalid, "unknown or invalid parameter '" + sanitize_for_log(k) + "'"));
    }
  }
  auto all = ctx.env.services.catalog->publishers();
  if (!all) return error_response(all.error());
  std::vector<catalog::PublisherRecord> shown;
  for (auto& p : *all) {
    if (!project || p.project == *project) shown.push_back(std::move(p));
  }
  return json_no_store(200, render::render_publishers(shown));
}

Response handle_add_publisher(const Request& req, Context& ctx) {
  std::vector<std::string> issuers;
  if (ctx.env.oidc != nullptr) {
    for (const auto& i : ctx.env.oidc->issuers()) issuers.push_back(i.name);
  }
  if (issuers.empty()) {
    return error_response(
        make_error(Errc::invalid, "no [[oidc_issuer]] is configured: trusted publishers need one"));
  }
  auto record =
      auth::oidc::decode_publisher_request(request_parameters(req), issuers, now_micros());
  if (!record) return error_response(record.error());
  auto stored = ctx.env.services.catalog->insert_publisher(
      *record, actor_of(req, caller_token(req, ctx.snapshot)));
  if (!stored) return error_response(stored.error());
  ctx.changed = Changed::nothing;
  ctx.note = "publisher #" + std::to_string(stored->id) + " added for " + stored->project;
  return json_no_store(201, render::render_publisher(*stored));
}

Response handle_remove_publisher(const Request& req, Context& ctx) {
  const auto n = parse_u64(req.segments[2]);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) return not_found("no such publisher");
  auto removed = ctx.env.services.catalog->remove_publisher(
      static_cast<std::int64_t>(*n), actor_of(req, caller_token(req, ctx.snapshot)));
  if (!removed) return error_response(removed.error());
  ctx.changed = Changed::nothing;
  ctx.note = "publisher #" + std::to_string(removed->id) + " removed";
  return json_no_store(200, render::render_publisher(*removed));
}

}  // namespace wf::handlers
