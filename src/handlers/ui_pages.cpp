// The web UI's public pages and its login: home, the project list, project pages, static
// files, login, logout.

#include <algorithm>
#include <cstdint>

#include "handlers.hpp"
#include "read.hpp"
#include "ui.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/ui/assets.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

// METADATA is small (ingest caps it); a larger blob is not a METADATA file.
constexpr std::uint64_t kMaxMetadataRead = 16U << 20U;

Response error_page(UiCall& call, int status, std::string_view title, std::string_view message) {
  return html(status, ui::render_message(call.site, status, title, message));
}

/// The description parts of a project page, from the core metadata of the file that describes
/// the version shown, rendered once per file and kept with the project's snapshot data.
ui::ProjectText project_text(Context& ctx, const std::string& normalized,
                             const ui::Selection& selection) {
  ui::ProjectText text;
  const auto& snap = ctx.snapshot;
  const core::FileRecord* file = ui::described_file(snap, normalized, selection);
  const store::BlobStore* store = ctx.env.services.store;
  if (file == nullptr || store == nullptr) return text;
  // Read at most once per kind and file: the snapshot keeps what was made.
  const auto info = [&] {
    auto local = store->local_copy(file->metadata_sha256);
    auto bytes =
        local ? read_small_file(*local, kMaxMetadataRead) : Result<std::string>(local.error());
    if (!bytes) {
      ctx.note = "ui: metadata of " + file->filename + " unreadable: " + bytes.error().message;
      return core::ProjectInfo{};
    }
    return core::parse_project_info(*bytes);
  };
  text.about = *snap.file_derived(*file, "about", [&] { return ui::render_about(info()); });
  text.description =
      *snap.file_derived(*file, "description", [&] { return ui::render_description(info()); });
  return text;
}

}  // namespace

Response handle_home(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = call.require_read()) return std::move(*denied);
  const auto& snap = ctx.snapshot;
  const std::string q = form_value(call.query(), "q");
  // Searches are not cached: their number is unbounded.
  return call.shared_page(
      "/", [&](const ui::Site& site) { return ui::render_home(snap, site, q); }, q.empty());
}

Response handle_projects(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = call.require_read()) return std::move(*denied);
  const auto& snap = ctx.snapshot;
  const Form params = call.query();
  ui::ProjectListQuery asked;
  asked.query = form_value(params, "q");
  const std::string sort = form_value(params, "sort");
  if (!sort.empty() && sort != "name" && sort != "updated") {
    return error_page(call, 400, "Bad request",
                      "sort must be name or updated, not \"" + sanitize_for_log(sort, 40) + "\".");
  }
  asked.by_upload = sort == "updated";
  if (const std::string page = form_value(params, "page"); !page.empty()) {
    const auto n = parse_u64(page);
    if (!n || *n == 0) {
      return error_page(
          call, 400, "Bad request",
          "page must be a page number (1, 2, ...), not \"" + sanitize_for_log(page, 40) + "\".");
    }
    asked.page = static_cast<std::size_t>(std::min<std::uint64_t>(*n, SIZE_MAX));
  }
  // Only pages that exist reach the cache key, so the cache stays bounded.
  const ui::ProjectListQuery query = ui::canonical_list_query(snap, asked);
  return call.shared_page(
      "/projects/|" + query.key(),
      [&](const ui::Site& site) { return ui::render_project_list(snap, site, query); },
      query.query.empty());
}

Response handle_projects_redirect(const Request& req, Context& /*ctx*/) {
  return redirect(301, "/projects/" + (req.query.empty() ? std::string() : "?" + req.query));
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
    return html(404, ui::render_unknown_project(snap, call.site, normalized));
  }
  const auto params = call.query();
  ui::Selection selection{form_value(params, "version"), form_value(params, "torch"),
                          form_value(params, "backend"), form_value(params, "python")};
  // Only choices that exist reach the cache key, so the cache stays bounded.
  selection = ui::canonical_selection(snap, normalized, selection);
  ui::ProjectText text = project_text(ctx, normalized, selection);
  // From the upstream pages known now (never fetched here: this is the network thread).
  std::string also_key;
  if (const Upstreams* upstreams = ctx.env.upstreams; upstreams != nullptr) {
    for (auto& n : upstreams->known_upstreams_of(normalized)) {
      // An upstream that may serve this local name (serve_local) is no conflict.
      const core::UpstreamConfig* u = upstreams->find(n);
      if (u == nullptr || core::may_serve(*u, normalized, /*local=*/true)) continue;
      also_key += "|" + n;
      text.also_upstream.push_back(std::move(n));
    }
  }
  return call.shared_page(
      "/project/" + normalized + "/|" + selection.key() + also_key, [&](const ui::Site& site) {
        return ui::render_project(snap, site, normalized, selection, text).value_or("");
      });
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
    const catalog::TokenRecord* known = token.empty() ? nullptr : ctx.snapshot.tokens().find(token);
    if (known != nullptr && known->expired(now_micros())) {
      call.note("login refused: token " + std::to_string(known->id) + " expired");
      return html(401, ui::render_login(call.site, next, granted.error().message + "."));
    }
    call.note("login refused: unknown token");
    // A token created by another process a moment ago is worth one look at the catalog.
    ctx.unknown_token =
        !token.empty() && granted.error().code == Errc::unauthorized && known == nullptr;
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
