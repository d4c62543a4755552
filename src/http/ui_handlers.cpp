#include "ui_handlers.hpp"

#include <climits>
#include <filesystem>
#include <map>

#include "admin_handlers.hpp"
#include "read_handlers.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/ui/assets.hpp"
#include "wheelforge/ui/pages.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {

// ---- sessions ----------------------------------------------------------------------------

UiSessions::UiSessions() : secret_(crypto::random_bytes(32)) {}

std::string UiSessions::create(std::string token) {
  std::string id = base64url_nopad_encode(crypto::random_bytes(32));
  const Micros now = now_micros();
  std::lock_guard lock(mu_);
  if (sessions_.size() >= kMaxSessions) {
    std::erase_if(sessions_, [now](const auto& kv) { return kv.second.expires <= now; });
    // Still full: the oldest sessions would be the fairest to drop; any one keeps memory bounded.
    if (sessions_.size() >= kMaxSessions) sessions_.erase(sessions_.begin());
  }
  sessions_[id] = Entry{std::move(token), now + kLifetime};
  return id;
}

std::optional<std::string> UiSessions::token_of(std::string_view id) {
  std::lock_guard lock(mu_);
  const auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= now_micros()) {
    sessions_.erase(it);
    return std::nullopt;
  }
  return it->second.token;
}

void UiSessions::remove(std::string_view id) {
  std::lock_guard lock(mu_);
  sessions_.erase(std::string(id));
}

std::string UiSessions::form_token(std::string_view credential) const {
  return crypto::sha256_hex(secret_ + "\n" + std::string(credential)).substr(0, 32);
}

// ---- handlers ----------------------------------------------------------------------------

namespace {

constexpr std::string_view kCookie = "wf_session";
constexpr std::uint64_t kJobLogShown = 256 * 1024;
constexpr std::size_t kBuildsShown = 30;

// Pages may load only this server's own scripts, styles and images, and may not be framed.
constexpr const char* kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'";

void page_headers(Response& r) {
  r.set("Content-Type", "text/html; charset=utf-8");
  r.set("Content-Security-Policy", kCsp);
  r.set("X-Content-Type-Options", "nosniff");
  r.set("X-Frame-Options", "DENY");
  r.set("Referrer-Policy", "same-origin");
}

/// A page that depends on the caller (builds, jobs, errors): never stored by caches.
Response html(int status, std::string body) {
  Response r;
  r.status = status;
  page_headers(r);
  r.set("Cache-Control", "no-store");
  r.body = std::move(body);
  return r;
}

/// A page that depends only on the catalog (and the URL): revalidated by ETag, gzip-encoded
/// for clients that accept it.
Response cacheable(const Request& req, const std::shared_ptr<const snapshot::Page>& page,
                   bool private_reads) {
  Response r;
  page_headers(r);
  r.set("Vary", "Accept-Encoding");
  r.set("Cache-Control", private_reads ? "private, no-cache" : "no-cache");
  return with_page_body(req, page, std::move(r));
}

/// A page rendered for this request only, with the same validators as a cached one.
std::shared_ptr<const snapshot::Page> fresh_page(std::string body) {
  auto page = std::make_shared<snapshot::Page>();
  page->gzip = render::gzip(body);
  page->etag = "\"" + crypto::sha256_hex(body).substr(0, 32) + "\"";
  page->body = std::move(body);
  return page;
}

Response redirect(int status, std::string location) {
  Response r;
  r.status = status;
  r.set("Location", std::move(location));
  r.set("Content-Type", "text/plain; charset=utf-8");
  r.set("Cache-Control", "no-store");
  r.body = std::string(status == 301 ? "moved permanently\n" : "see other\n");
  return r;
}

std::string form_value(const std::vector<std::pair<std::string, std::string>>& form,
                       std::string_view name) {
  for (const auto& [k, v] : form) {
    if (k == name) return v;
  }
  return {};
}

std::string cookie_value(const Request& req, std::string_view name) {
  for (auto part : split(req.header("cookie"), ';')) {
    part = trim(part);
    if (part.size() > name.size() && part.starts_with(name) && part[name.size()] == '=') {
      return std::string(part.substr(name.size() + 1));
    }
  }
  return {};
}

/// Who is asking: the token from an Authorization header (Basic or Bearer), else the one a
/// session cookie stands for.
struct Caller {
  std::optional<std::string> token;
  std::string credential;  // what the form token is bound to
  std::string session;     // the session id when signed in by cookie
  std::optional<Error> error;
};

Caller identify(const Request& req, UiSessions& sessions) {
  Caller c;
  if (!req.header("authorization").empty()) {
    auto token = auth::token_from_authorization(req.header("authorization"));
    if (!token) {
      c.error = token.error();
    } else if (*token) {
      c.token = **token;
      c.credential = "token:" + **token;
    }
    return c;
  }
  const std::string id = cookie_value(req, kCookie);
  if (!id.empty()) {
    if (auto token = sessions.token_of(id)) {
      c.token = std::move(*token);
      c.credential = "session:" + id;
      c.session = id;
    }
  }
  return c;
}

/// A POST is accepted only from pages of this origin: Origin (which browsers send with every
/// form POST), else Referer. SameSite=Strict already keeps the cookie off cross-site requests;
/// this also covers credentials sent by HTTP Basic, which browsers attach to any request.
bool same_origin(const Request& req) {
  const std::string expected = base_url(req);
  if (const auto origin = req.header("origin"); !origin.empty()) return origin == expected;
  const auto referer = req.header("referer");
  return !referer.empty() && (referer == expected || referer.starts_with(expected + "/"));
}

/// Only local paths, so that a login link cannot send the browser elsewhere.
std::string safe_next(std::string_view next) {
  if (next.empty() || next.front() != '/' || next.starts_with("//") ||
      next.find('\\') != std::string_view::npos || next.size() > 500) {
    return {};
  }
  for (const char c : next) {
    if (static_cast<unsigned char>(c) < 0x20) return {};
  }
  return std::string(next);
}

std::string session_cookie(const Request& req, std::string_view value, bool clear) {
  std::string c =
      std::string(kCookie) + "=" + std::string(value) + "; Path=/; HttpOnly; SameSite=Strict";
  c += clear ? "; Max-Age=0" : "; Max-Age=" + std::to_string(UiSessions::kLifetime / 1000000);
  if (req.tls) c += "; Secure";
  return c;
}

Response not_found_page(const ui::Site& site, std::string_view message) {
  return html(404, ui::render_message(site, 404, "Not found", message));
}

struct Handler {
  const Request& req;
  std::string_view body;
  const UiContext& ctx;
  ui::Site site;
  Caller caller;
  std::string note;

  const snapshot::Snapshot& snap() const { return *ctx.snapshot; }

  std::vector<std::pair<std::string, std::string>> query() const { return parse_form(req.query); }

  /// Checks the caller against a scope; on failure, the page that says so.
  std::optional<Response> require(catalog::Scope scope, bool redirect_to_login) {
    if (caller.error) {
      Response r =
          html(401, ui::render_message(site, 401, "Not signed in", caller.error->message, true));
      r.set("WWW-Authenticate", "Basic realm=\"wheelforge\"");
      return r;
    }
    if (!caller.token && redirect_to_login) {
      std::string next = "/";
      for (std::size_t i = 0; i < req.segments.size(); ++i) {
        next += percent_encode_path(req.segments[i]) + (i + 1 < req.segments.size() ? "/" : "");
      }
      return redirect(303, "/login?next=" + percent_encode_path(next));
    }
    auto granted = auth::authorize(snap().tokens(), caller.token, scope);
    if (granted) return std::nullopt;
    if (granted.error().code == Errc::unauthorized) {
      const bool private_index = scope == catalog::Scope::read;
      Response r =
          html(401, ui::render_message(
                        site, 401, "Sign in needed",
                        private_index ? "This index is private. Sign in with user __token__ and a "
                                        "read token as the password, or log in with a token."
                                      : "Your token is unknown or was revoked: log in again.",
                        true));
      r.set("WWW-Authenticate", "Basic realm=\"wheelforge\"");
      return r;
    }
    const auto* record = snap().tokens().find(*caller.token);
    const std::string has = record != nullptr ? std::string(catalog::scope_name(record->scope))
                                              : std::string("another");
    return html(
        403, ui::render_message(site, 403, "Not allowed",
                                "This page needs a token of scope " +
                                    std::string(catalog::scope_name(scope)) + "; yours has scope " +
                                    has + ". Log in with an admin token.",
                                true));
  }

  /// Origin check and, for signed-in callers, the form token.
  std::optional<Response> check_post(const std::vector<std::pair<std::string, std::string>>& form,
                                     bool needs_form_token) {
    if (!same_origin(req)) {
      note = "cross-origin POST refused";
      return html(403, ui::render_message(site, 403, "Request refused",
                                          "This form was not sent from a page of this server. "
                                          "Reload the page and try again."));
    }
    if (needs_form_token &&
        (caller.credential.empty() ||
         !crypto::constant_time_equals(ctx.sessions->form_token(caller.credential),
                                       form_value(form, "csrf")))) {
      note = "POST without a valid form token refused";
      return html(403, ui::render_message(site, 403, "Request refused",
                                          "The form has expired or was not made for you. "
                                          "Reload the page and try again."));
    }
    return std::nullopt;
  }

  UiResult done(Response r) { return UiResult{std::move(r), std::nullopt, 0, std::move(note)}; }

  // -- public pages ------------------------------------------------------------------------

  UiResult home() {
    if (auto denied = ctx.private_reads ? require(catalog::Scope::read, false) : std::nullopt) {
      return done(std::move(*denied));
    }
    const std::string q = form_value(query(), "q");
    // Pages are rendered without the caller's identity so that every caller shares them.
    const ui::Site shared{site.base_url, "", false};
    if (q.empty()) {
      auto page = snap().derived_page("/|" + site.base_url,
                                      [&] { return ui::render_home(snap(), shared, ""); });
      return done(cacheable(req, page, ctx.private_reads));
    }
    // Searches are not cached: their number is unbounded.
    return done(cacheable(req, fresh_page(ui::render_home(snap(), shared, q)), ctx.private_reads));
  }

  UiResult project() {
    if (auto denied = ctx.private_reads ? require(catalog::Scope::read, false) : std::nullopt) {
      return done(std::move(*denied));
    }
    const auto& seg = req.segments;
    if (seg.size() == 1 || (seg.size() == 2 && seg[1].empty())) return done(redirect(301, "/"));
    const std::string& name = seg[1];
    const bool trailing = seg.size() == 3 && seg[2].empty();
    if (seg.size() > 3 || (seg.size() == 3 && !trailing) || !core::is_valid_project_name(name)) {
      return done(not_found_page(site, "There is no such page."));
    }
    const std::string normalized = core::normalize_name(name);
    if (!trailing || normalized != name) {
      std::string location = "/project/" + normalized + "/";
      if (!req.query.empty()) location += "?" + req.query;
      return done(redirect(301, std::move(location)));
    }
    if (snap().find_project(normalized) == nullptr) {
      return done(
          not_found_page(site, "There is no project named " + normalized + " on this index."));
    }
    const auto params = query();
    ui::Selection selection{form_value(params, "version"), form_value(params, "torch"),
                            form_value(params, "backend"), form_value(params, "python")};
    // Only choices that exist reach the cache key, so the cache stays bounded.
    selection = ui::canonical_selection(snap(), normalized, selection);
    const ui::Site shared{site.base_url, "", false};
    auto page = snap().derived_page(
        "/project/" + normalized + "/|" + site.base_url + "|" + selection.key(),
        [&] { return ui::render_project(snap(), shared, normalized, selection).value_or(""); });
    return done(cacheable(req, page, ctx.private_reads));
  }

  UiResult static_file() {
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
    if (file == nullptr) return done(error_response(make_error(Errc::not_found, "no such file")));
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
      return done(std::move(r));
    }
    if (gz) {
      r.set("Content-Encoding", "gzip");
      r.body = file->gzip;
    } else {
      r.body = std::string(file->bytes);
    }
    return done(std::move(r));
  }

  // -- login -------------------------------------------------------------------------------

  UiResult login() {
    if (req.method == Method::post) {
      const auto form = parse_form(body);
      if (auto refused = check_post(form, false)) return done(std::move(*refused));
      const std::string next = safe_next(form_value(form, "next"));
      const std::string token = form_value(form, "token");
      auto granted =
          auth::authorize(snap().tokens(), token.empty() ? std::nullopt : std::optional(token),
                          catalog::Scope::read);
      if (!granted) {
        note = "login refused: unknown token";
        return done(html(401, ui::render_login(site, next, "Unknown or revoked token.")));
      }
      const bool admin = auth::scope_includes((*granted)->scope, catalog::Scope::admin);
      const std::string id = ctx.sessions->create(token);
      note = "login (scope " + std::string(catalog::scope_name((*granted)->scope)) + ")";
      Response r = redirect(303, !next.empty() ? next : admin ? "/builds/" : "/");
      r.set("Set-Cookie", session_cookie(req, id, false));
      return done(std::move(r));
    }
    const std::string next = safe_next(form_value(query(), "next"));
    return done(html(200, ui::render_login(site, next, "")));
  }

  UiResult logout() {
    const auto form = parse_form(body);
    if (auto refused = check_post(form, !caller.session.empty())) return done(std::move(*refused));
    if (!caller.session.empty()) ctx.sessions->remove(caller.session);
    note = "logout";
    Response r = redirect(303, "/");
    r.set("Set-Cookie", session_cookie(req, "", true));
    return done(std::move(r));
  }

  // -- builds ------------------------------------------------------------------------------

  ui::BuildsPage builds_page() {
    ui::BuildsPage page;
    page.now = now_micros();
    page.runner_enabled = ctx.runner != nullptr;
    if (ctx.runner == nullptr) return page;
    const build::RunnerConfig config = ctx.runner->config();
    for (const auto& [name, rc] : config.recipes) {
      ui::RecipeInfo info;
      info.name = name;
      info.project = rc.recipe.project;
      info.python = rc.matrix.python;
      for (const auto& t : rc.matrix.torch) info.torch.push_back(t.str());
      for (const auto& c : rc.matrix.cuda) info.cuda.push_back(c.str());
      page.recipes.push_back(std::move(info));
    }
    auto& jobs = ctx.runner->jobs();
    auto builds = jobs.list_builds(kBuildsShown);
    if (!builds) {
      page.error = "Cannot list the builds: " + builds.error().message;
      return page;
    }
    for (auto& b : *builds) {
      auto of = jobs.jobs_of_build(b.id);
      page.builds.push_back(
          ui::BuildRow{std::move(b), of ? std::move(*of) : std::vector<catalog::JobRecord>{}});
    }
    return page;
  }

  /// Reads the form of "Start a build" into a request, by the rules the JSON API follows.
  static Result<core::BuildRequest> build_request(
      const std::vector<std::pair<std::string, std::string>>& form) {
    core::BuildRequestFields fields;
    fields.recipe = form_value(form, "recipe");
    fields.version = form_value(form, "version");
    fields.force = !form_value(form, "force").empty();
    // The non-empty items of a comma-separated field, trimmed.
    const auto items = [&](const char* name) {
      const std::string value = form_value(form, name);  // split() returns views into it
      std::vector<std::string> out;
      for (auto v : split(value, ',')) {
        v = trim(v);
        if (!v.empty()) out.emplace_back(v);
      }
      return out;
    };
    fields.python = items("python");
    fields.torch = items("torch");
    fields.cuda = items("cuda");
    return core::check_build_request(fields);
  }

  UiResult builds() {
    if (auto denied = require(catalog::Scope::admin, req.method != Method::post))
      return done(std::move(*denied));
    const auto& seg = req.segments;
    if (seg.size() == 1) return done(redirect(301, "/builds/"));
    if (seg.size() != 2 || !seg[1].empty())
      return done(not_found_page(site, "There is no such page."));
    if (req.method == Method::post) {
      const auto form = parse_form(body);
      if (auto refused = check_post(form, true)) return done(std::move(*refused));
      if (ctx.runner == nullptr)
        return done(not_found_page(site, "The build runner is not enabled."));
      auto request = build_request(form);
      Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> created =
          request ? ctx.runner->submit(*request)
                  : Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>>(
                        request.error());
      if (!created) {
        note = "build refused";
        ui::BuildsPage page = builds_page();
        page.error = "The build was not started: " + created.error().message;
        return done(html(status_for(created.error().code), ui::render_builds(site, page)));
      }
      const auto id = std::to_string(created->first.id);
      note = "build " + id + " submitted (" + std::to_string(created->second.size()) + " jobs)";
      return done(redirect(303, "/builds/?created=" + id + "#build-" + id));
    }
    ui::BuildsPage page = builds_page();
    if (const auto created = parse_u64(form_value(query(), "created"))) {
      page.notice = "Build " + std::to_string(*created) + " was started.";
    }
    return done(html(200, ui::render_builds(site, page)));
  }

  UiResult job_page(std::int64_t id, int status, std::string error) {
    auto job = ctx.runner->jobs().find_job(id);
    if (!job) return done(html(500, ui::render_message(site, 500, "Error", job.error().message)));
    if (!job->has_value())
      return done(not_found_page(site, "There is no job " + std::to_string(id) + "."));
    ui::JobPage page;
    page.job = **job;
    page.now = now_micros();
    page.error = std::move(error);
    build::LogChunk tail = ctx.runner->read_log_tail(id, kJobLogShown);
    page.log = std::move(tail.data);
    page.log_offset = tail.offset + page.log.size();
    page.log_truncated = tail.offset > 0;
    return done(html(status, ui::render_job(site, page)));
  }

  UiResult jobs() {
    const bool post = req.method == Method::post;
    if (auto denied = require(catalog::Scope::admin, !post)) return done(std::move(*denied));
    // The origin and the form token are checked before anything else is looked at.
    if (post) {
      if (auto refused = check_post(parse_form(body), true)) return done(std::move(*refused));
    }
    const auto& seg = req.segments;
    const auto n = seg.size() >= 2 ? parse_u64(seg[1]) : std::nullopt;
    if (!n || *n > static_cast<std::uint64_t>(INT64_MAX) || seg.size() > 3) {
      return done(not_found_page(site, "There is no such page."));
    }
    if (ctx.runner == nullptr)
      return done(not_found_page(site, "The build runner is not enabled."));
    const auto id = static_cast<std::int64_t>(*n);
    if (seg.size() == 2) {
      if (post) return done(method_not_allowed("GET, HEAD"));
      return job_page(id, 200, "");
    }
    if (seg[2] == "log") {
      if (post) return done(method_not_allowed("GET, HEAD"));
      const std::uint64_t offset = parse_u64(req.query_param("offset")).value_or(0);
      const std::string follow = req.query_param("follow");
      auto job = ctx.runner->jobs().find_job(id);
      if (!job) return done(error_response(job.error()));
      if (!job->has_value())
        return done(error_response(make_error(Errc::not_found, "no such job")));
      if (follow == "1") return UiResult{Response{}, id, offset, std::move(note)};
      std::string chunk = ctx.runner->read_log(id, offset, 1U << 20U);
      Response r;
      r.set("Content-Type", "text/plain; charset=utf-8");
      r.set("Cache-Control", "no-store");
      r.set("X-Log-Next-Offset", std::to_string(offset + chunk.size()));
      r.set("X-Job-State", std::string(core::state_name((*job)->state)));
      r.body = std::move(chunk);
      return done(std::move(r));
    }
    if (seg[2] != "cancel" && seg[2] != "retry")
      return done(not_found_page(site, "There is no such page."));
    if (!post) return done(method_not_allowed("POST"));
    auto changed = seg[2] == "cancel" ? ctx.runner->cancel(id) : ctx.runner->retry(id);
    if (!changed) {
      note = "job " + std::to_string(id) + " " + seg[2] + " refused";
      return job_page(id, status_for(changed.error().code),
                      "Could not " + seg[2] + " the job: " + changed.error().message);
    }
    note = "job " + std::to_string(id) + " " + seg[2];
    return done(redirect(303, "/jobs/" + std::to_string(id)));
  }

  UiResult route() {
    const auto& seg = req.segments;
    const std::string_view first = seg.empty() ? std::string_view() : std::string_view(seg[0]);
    const bool post = req.method == Method::post;
    const bool read = req.method == Method::get || req.method == Method::head;
    if (first == "login") {
      if (seg.size() != 1) return done(not_found_page(site, "There is no such page."));
      if (!post && !read) return done(method_not_allowed("GET, HEAD, POST"));
      return login();
    }
    if (first == "logout") {
      if (seg.size() != 1) return done(not_found_page(site, "There is no such page."));
      if (!post) return done(method_not_allowed("POST"));
      return logout();
    }
    if (first == "builds") {
      if (!post && !read) return done(method_not_allowed("GET, HEAD, POST"));
      return builds();
    }
    if (first == "jobs") {
      if (!post && !read) return done(method_not_allowed("GET, HEAD, POST"));
      return jobs();
    }
    if (!read) return done(method_not_allowed("GET, HEAD"));
    if (first == "static") return static_file();
    if (first == "project") return project();
    return home();
  }
};

}  // namespace

bool is_ui_route(const Request& req) {
  const auto& seg = req.segments;
  if (seg.empty() || (seg.size() == 1 && seg[0].empty())) return true;
  const std::string& first = seg[0];
  return first == "project" || first == "static" || first == "login" || first == "logout" ||
         first == "builds" || first == "jobs";
}

UiResult handle_ui(const Request& req, std::string_view body, const UiContext& ctx) {
  Handler h{req, body, ctx, ui::Site{base_url(req), "", false}, identify(req, *ctx.sessions), {}};
  if (!h.caller.session.empty()) {
    h.site.signed_in = true;
  }
  if (!h.caller.credential.empty()) h.site.csrf = ctx.sessions->form_token(h.caller.credential);
  return h.route();
}

}  // namespace wf::http
