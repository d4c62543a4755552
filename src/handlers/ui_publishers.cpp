// The web UI's trusted publishers page (admin scope): every publisher, adding one for a
// configured issuer, removing one (docs/publishing.md, "Trusted publishing"). The same records
// and checks as the admin API (oidc.cpp) and `wheelforge publisher`.

#include <climits>

#include "handlers.hpp"
#include "ui.hpp"
#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/handlers/oidc.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

ui::PublishersPage publishers_page(Context& ctx) {
  ui::PublishersPage page;
  if (ctx.env.oidc != nullptr) {
    for (const auto& i : ctx.env.oidc->issuers()) page.issuers.emplace_back(i.name, i.url);
  }
  auto publishers = ctx.env.services.catalog->publishers();
  if (publishers) {
    page.publishers = std::move(*publishers);
  } else {
    page.error = "Cannot list the trusted publishers: " + publishers.error().message;
  }
  return page;
}

// The form's fields as decode_publisher_request takes them: each line of `claims` becomes a
// claim=NAME=VALUE field.
Form publisher_fields(const Form& form) {
  Form fields;
  for (const auto& [k, v] : form) {
    if (k == "csrf") continue;
    if (k != "claims") {
      fields.emplace_back(k, v);
      continue;
    }
    for (const auto line : split(v, '\n')) {
      const std::string_view claim = trim(line);
      if (!claim.empty()) fields.emplace_back("claim", std::string(claim));
    }
  }
  return fields;
}

}  // namespace

Response handle_publishers_redirect(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  return redirect(301, "/publishers/");
}

Response handle_publishers_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  ui::PublishersPage page = publishers_page(ctx);
  if (const auto added = parse_u64(form_value(call.query(), "added"))) {
    page.notice = "Publisher " + std::to_string(*added) + " was added.";
  } else if (const auto removed = parse_u64(form_value(call.query(), "removed"))) {
    page.notice = "Publisher " + std::to_string(*removed) + " was removed.";
  }
  return html(200, ui::render_publishers(call.site, page));
}

Response handle_add_publisher_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  const Form form = parse_form(req.body);
  if (auto refused = call.check_post(form, true)) return std::move(*refused);
  ui::PublishersPage page = publishers_page(ctx);
  std::vector<std::string> issuers;
  for (const auto& [name, url] : page.issuers) issuers.push_back(name);
  Result<catalog::PublisherRecord> stored =
      make_error(Errc::invalid, "no [[oidc_issuer]] is configured: trusted publishers need one");
  if (!issuers.empty()) {
    auto record =
        auth::oidc::decode_publisher_request(publisher_fields(form), issuers, now_micros());
    stored = record ? ctx.env.services.catalog->insert_publisher(*record, call.actor())
                    : Result<catalog::PublisherRecord>(record.error());
  }
  if (!stored) {
    call.note("publisher refused");
    ctx.changed = Changed::nothing;
    page.error = "The publisher was not added: " + stored.error().message;
    page.form_project = std::string(form_value(form, "project"));
    page.form_issuer = std::string(form_value(form, "issuer"));
    page.form_claims = std::string(form_value(form, "claims"));
    page.form_description = std::string(form_value(form, "description"));
    return html(status_for(stored.error().code), ui::render_publishers(call.site, page));
  }
  call.note("publisher " + std::to_string(stored->id) + " added for " + stored->project);
  ctx.changed = Changed::nothing;
  return redirect(303, "/publishers/?added=" + std::to_string(stored->id));
}

Response handle_remove_publisher_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  if (auto refused = call.check_post(parse_form(req.body), true)) return std::move(*refused);
  const auto n = parse_u64(req.segments[1]);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) {
    return call.not_found_page("There is no such publisher.");
  }
  auto removed =
      ctx.env.services.catalog->remove_publisher(static_cast<std::int64_t>(*n), call.actor());
  ctx.changed = Changed::nothing;
  if (!removed) {
    ui::PublishersPage page = publishers_page(ctx);
    page.error =
        "Could not remove publisher " + std::to_string(*n) + ": " + removed.error().message;
    return html(status_for(removed.error().code), ui::render_publishers(call.site, page));
  }
  call.note("publisher " + std::to_string(*n) + " removed");
  return redirect(303, "/publishers/?removed=" + std::to_string(*n));
}

}  // namespace wf::handlers
