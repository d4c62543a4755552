// The web UI's public pages and its login: home, project pages, static files, login, logout.

#include "handlers.hpp"
#include "read.hpp"
#include "ui.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/ui/assets.hpp"

namespace wf::handlers {

Response handle_home(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = call.require_read()) return std::move(*denied);
  const auto& snap = ctx.snapshot;
  const std::string q = form_value(call.query(), "q");
  // Pages are rendered without the caller's identity so that every caller shares them.
  const ui::Site shared{call.site.base_url, "", false};
  if (q.empty()) {
    auto page = snap.derived_page("/|" + shared.base_url,
                                  [&] { return ui::render_home(snap, shared, ""); });
    return cacheable(req, page, ctx.env.private_reads);
  }
  // Searches are not cached: their number is unbounded.
  return cacheable(req, fresh_page(ui::render_home(snap, shared, q)), ctx.env.private_reads);
}

Response handle_project_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = call.require_read()) return std::move(*denied);
  const auto& snap = ctx.snapshot;
  const auto& seg = req.segments;
  if (seg.size() == 1 || (seg.size() == 2 && seg[1].empty())) return redirect(301, "/");
  const std::string& name = seg[1];
  const bool trailing = seg.size() == 3 && seg[2].empty();
  if (seg.size() > 3 || (seg.size() == 3 && !trailing) || !core::is_valid_project_name(name)) {
    return call.not_found_page("There is no such page.");
  }
  const std::string normalized = core::normalize_name(name);
  if (!trailing || normalized != name) {
    std::string location = "/project/" + normalized + "/";
    if (!req.query.empty()) location += "?" + req.query;
    return redirect(301, std::move(location));
  }
  if (snap.find_project(normalized) == nullptr) {
    return call.not_found_page("There is no project named " + normalized + " on this index.");
  }
  const auto params = call.query();
  ui::Selection selection{form_value(params, "version"), form_value(params, "torch"),
                          form_value(params, "backend"), form_value(params, "python")};
  // Only choices that exist reach the cache key, so the cache stays bounded.
  selection = ui::canonical_selection(snap, normalized, selection);
  // Admins see who uploaded each file: their own variant of the page, never stored by a
  // shared cache.
  const auto* caller = call.token_record();
  const bool admin =
      caller != nullptr && caller->scope == catalog::Scope::admin && !caller->expired(now_micros());
  const ui::Site shared{call.site.base_url, "", false, admin};
  auto page = snap.derived_page(
      "/project/" + normalized + "/|" + shared.base_url + "|" + selection.key() +
          (admin ? "|admin" : ""),
      [&] { return ui::render_project(snap, shared, normalized, selection).value_or(""); });
  return cacheable(req, page, ctx.env.private_reads || admin);
}

Response handle_static(const Request& req, Context& /*ctx*/) {
  const auto& seg = req.segments;
  const ui::StaticFile* file = nullptr;
  bool hashed = false;
  if (seg.size() == 2) {
    file = ui::find_static(seg[1]);
  } else if (seg.size() == 3) {
    file = ui::find_static(seg[2]);
    if (file != nullptr && file->hash != seg[1]) file = nullptr;
    hashed = true;
  }
  if (file == nullptr) return error_response(make_error(Errc::not_found, "no such file"));
  Response r;
  r.set("Content-Type", file->content_type);
  r.set("X-Content-Type-Options", "nosniff");
  r.set("Vary", "Accept-Encoding");
  // A content-addressed URL never changes; the plain name is revalidated.
  r.set("Cache-Control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
  const bool gz = accepts_gzip(req);
  const std::string etag = "\"" + file->hash + (gz ? "-gzip\"" : "\"");
  r.set("ETag", etag);
  if (etag_matches(req.header("if-none-match"), etag)) {
    r.status = 304;
    r.body = std::string();
    return r;
  }
  if (gz) {
    r.set("Content-Encoding", "gzip");
    r.body = file->gzip;
  } else {
    r.body = std::string(file->bytes);
  }
  return r;
}

Response handle_login_form(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  const std::string next = safe_next(form_value(call.query(), "next"));
  return html(200, ui::render_login(call.site, next, ""));
}

Response handle_login(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  const Form form = parse_form(req.body);
  if (auto refused = call.check_post(form, false)) return std::move(*refused);
  const std::string next = safe_next(form_value(form, "next"));
  const std::string token = form_value(form, "token");
  auto granted =
      auth::authorize(ctx.snapshot.tokens(), token.empty() ? std::nullopt : std::optional(token),
                      catalog::Scope::read);
  if (!granted) {
    call.note("login refused: unknown token");
    // A token created by another process a moment ago is worth one look at the catalog.
    ctx.unknown_token = !token.empty() && granted.error().code == Errc::unauthorized &&
                        ctx.snapshot.tokens().find(token) == nullptr;
    return html(401, ui::render_login(call.site, next, "Unknown or revoked token."));
  }
  const bool admin = auth::scope_includes((*granted)->scope, catalog::Scope::admin);
  const std::string id = ctx.env.ui_sessions->create(token);
  call.note("login (scope " + std::string(catalog::scope_name((*granted)->scope)) + ")");
  Response r = redirect(303, !next.empty() ? next : admin ? "/builds/" : "/");
  r.set("Set-Cookie", session_cookie(req, id, false));
  return r;
}

Response handle_logout(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto refused = call.check_post(parse_form(req.body), !call.session().empty())) {
    return std::move(*refused);
  }
  if (!call.session().empty()) ctx.env.ui_sessions->remove(call.session());
  call.note("logout");
  Response r = redirect(303, "/");
  r.set("Set-Cookie", session_cookie(req, "", true));
  return r;
}

Response handle_no_page(const Request& req, Context& ctx) {
  return UiCall(req, ctx).not_found_page("There is no such page.");
}

}  // namespace wf::handlers
