// The web UI's tokens page (admin scope): every token (never a secret), creating one (its
// secret shown once, in the answer to the form), revoking one.

#include <climits>

#include "handlers.hpp"
#include "ui.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

ui::TokensPage tokens_page(Context& ctx) {
  ui::TokensPage page;
  page.now = now_micros();
  auto tokens = ctx.env.services.catalog->tokens();
  if (tokens) {
    page.tokens = std::move(*tokens);
  } else {
    page.error = "Cannot list the tokens: " + tokens.error().message;
  }
  return page;
}

}  // namespace

Response handle_tokens_redirect(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  return redirect(301, "/tokens/");
}

Response handle_tokens_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  ui::TokensPage page = tokens_page(ctx);
  if (const auto revoked = parse_u64(form_value(call.query(), "revoked"))) {
    page.notice = "Token " + std::to_string(*revoked) + " was revoked.";
  }
  return html(200, ui::render_tokens(call.site, page));
}

Response handle_create_token_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  Form form = parse_form(req.body);
  if (auto refused = call.check_post(form, true)) return std::move(*refused);
  std::erase_if(form, [](const auto& f) { return f.first == "csrf"; });
  auto record = decode_token_request(form, now_micros());
  auto created = record ? create_token(ctx, std::move(*record), call.actor())
                        : Result<std::pair<catalog::TokenRecord, std::string>>(record.error());
  if (!created) {
    call.note("token creation refused");
    ctx.changed = Changed::nothing;
    ui::TokensPage page = tokens_page(ctx);
    page.error = "The token was not created: " + created.error().message;
    return html(status_for(created.error().code), ui::render_tokens(call.site, page));
  }
  call.note("token " + std::to_string(created->first.id) + " created");
  ui::TokensPage page = tokens_page(ctx);
  page.created = created->first;
  page.secret = created->second;
  // The secret is in this answer only (html() answers are never stored by caches).
  return html(201, ui::render_tokens(call.site, page));
}

Response handle_revoke_token_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  if (auto refused = call.check_post(parse_form(req.body), true)) return std::move(*refused);
  const auto n = parse_u64(req.segments[1]);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) {
    return call.not_found_page("There is no such token.");
  }
  auto revoked =
      ctx.env.services.catalog->revoke_token(static_cast<std::int64_t>(*n), call.actor());
  if (!revoked) {
    ctx.changed = Changed::nothing;
    ui::TokensPage page = tokens_page(ctx);
    page.error = "Could not revoke token " + std::to_string(*n) + ": " + revoked.error().message;
    return html(status_for(revoked.error().code), ui::render_tokens(call.site, page));
  }
  call.note("token " + std::to_string(*n) + " revoked");
  return redirect(303, "/tokens/?revoked=" + std::to_string(*n));
}

}  // namespace wf::handlers
