#include "wheelforge/handlers/routes.hpp"

#include <array>
#include <optional>

#include "handlers.hpp"
#include "wheelforge/auth/tokens.hpp"

namespace wf::handlers {
namespace {

using enum BodyPolicy;
using enum Access;
using enum Thread;
constexpr bool kChanges = true;
constexpr bool kReads = false;

// Lookup order matters in two places only: within a family, specific rows come before the
// family's catch-all; and the variant views (whose first segments are free) come after every
// family whose first segment is fixed. The pages pip and uv read most come first.
//
// clang-format off
//  pattern                               methods  handler                   body   access   thread   catalog   label
constexpr std::array kRoutes = std::to_array<Route>({
    // Reads, answered from the snapshot.
    {"/files/{sha256}/{file}.metadata",   kGet,    handle_file,              none,  read,    network, kReads,   "metadata"},
    {"/files/*",                          kGet,    handle_file,              none,  read,    network, kReads,   "file"},
    {"/upstream/{upstream}/{sha256}/*",   kGet,    handle_upstream_file,     none,  read,    worker,  kReads,   "upstream_file"},
    {"/integrity/{project}/{version}/{file}/provenance", kGet, handle_provenance, none, read, network, kReads, "provenance"},
    {"/simple",                           kGet,    handle_simple,            none,  read,    network, kReads,   "simple_root"},
    {"/simple/",                          kGet,    handle_simple,            none,  read,    network, kReads,   "simple_root"},
    {"/simple/*",                         kGet,    handle_simple,            none,  read,    network, kReads,   "simple_project"},
    {"/api/projects/{project}/variants",  kGet,    handle_variants,          none,  read,    network, kReads,   "api"},
    {"/api/resolve",                      kGet,    handle_resolve,           none,  read,    network, kReads,   "api"},
    {"/api/files/{sha256}/contents",      kGet,    handle_file_contents,     none,  read,    worker,  kReads,   "api"},
    {"/api/*",                            kGet,    handle_not_found,         none,  read,    network, kReads,   "api"},
    {"/healthz",                          kGet,    handle_healthz,           none,  open,    network, kReads,   "health"},
    {"/readyz",                           kGet,    handle_readyz,            none,  open,    network, kReads,   "health"},
    {"/metrics",                          kGet,    handle_metrics,           none,  read,    network, kReads,   "metrics"},
    // Uploads: the body streams into a temp file, then the handler ingests it. twine, poetry
    // and pdm never follow redirects: /legacy and /legacy/ are both answered (docs/clients.md,
    // "twine, poetry, pdm").
    {"/upload/*",                         kPut,    handle_put_upload,        file,  handler, worker,  kChanges, "upload"},
    {"/legacy",                           kPost,   handle_form_upload,       form,  upload,  worker,  kChanges, "legacy_upload"},
    {"/legacy/",                          kPost,   handle_form_upload,       form,  upload,  worker,  kChanges, "legacy_upload"},
    // Trusted publishing (docs/publishing.md): open, the OIDC token is the credential.
    {"/.well-known/pytp",                 kGet,    handle_pytp_discovery,    none,  open,    network, kReads,   "oidc"},
    {"/.well-known/pytp/*",               kGet,    handle_pytp_discovery,    none,  open,    network, kReads,   "oidc"},
    {"/_/oidc/audience",                  kGet,    handle_oidc_audience,     none,  open,    network, kReads,   "oidc"},
    {"/_/oidc/mint-token",                kPost,   handle_oidc_mint,         small, open,    worker,  kChanges, "oidc"},
    {"/_/build-provenance.pem",           kGet,    handle_build_certificate, none,  read,    network, kReads,   "provenance"},
    // The admin API.
    // Yanks take upload tokens too: the handler allows them their own project's files.
    {"/admin/yank",                       kPost,   handle_yank,              small, upload,  worker,  kChanges, "admin"},
    {"/admin/unyank",                     kPost,   handle_unyank,            small, upload,  worker,  kChanges, "admin"},
    {"/admin/files/{file}",               kDelete, handle_delete_file,       small, admin,   worker,  kChanges, "admin"},
    {"/admin/projects/{project}/claim",   kPost,   handle_claim,             small, admin,   worker,  kChanges, "admin"},
    {"/admin/projects/{project}/release", kPost,   handle_release,           small, admin,   worker,  kChanges, "admin"},
    {"/admin/tokens",                     kGet,    handle_list_tokens,       small, admin,   worker,  kReads,   "admin"},
    {"/admin/tokens",                     kPost,   handle_create_token,      small, admin,   worker,  kChanges, "admin"},
    {"/admin/tokens/{id}/revoke",         kPost,   handle_revoke_token,      small, admin,   worker,  kChanges, "admin"},
    {"/admin/audit",                      kGet,    handle_audit,             small, admin,   worker,  kReads,   "admin"},
    {"/admin/publishers",                 kGet,    handle_list_publishers,   small, admin,   worker,  kReads,   "admin"},
    {"/admin/publishers",                 kPost,   handle_add_publisher,     small, admin,   worker,  kChanges, "admin"},
    {"/admin/publishers/{id}",            kDelete, handle_remove_publisher,  small, admin,   worker,  kChanges, "admin"},
    {"/admin/builds",                     kGet,    handle_list_builds,       small, admin,   worker,  kReads,   "admin"},
    {"/admin/builds",                     kPost,   handle_submit_build,      small, admin,   worker,  kReads,   "admin"},
    {"/admin/builds/{id}",                kGet,    handle_show_build,        small, admin,   worker,  kReads,   "admin"},
    {"/admin/jobs/{id}",                  kGet,    handle_show_job,          small, admin,   worker,  kReads,   "admin"},
    {"/admin/jobs/{id}/log",              kGet,    handle_job_log,           small, admin,   worker,  kReads,   "admin"},
    {"/admin/jobs/{id}/cancel",           kPost,   handle_cancel_job,        small, admin,   worker,  kReads,   "admin"},
    {"/admin/jobs/{id}/retry",            kPost,   handle_retry_job,         small, admin,   worker,  kReads,   "admin"},
    {"/admin/*",                          kAnyMethod, handle_no_admin_endpoint, small, admin, worker, kReads,   "admin"},
    // The web UI. Its handlers check the caller themselves (cookie or Basic, redirects to the
    // login page, form tokens).
    {"/",                                 kGet,    handle_home,              none,  handler, worker,  kReads,   "home"},
    {"/project/*",                        kGet,    handle_project_page,      none,  handler, worker,  kReads,   "ui"},
    {"/inspect/{sha256}",                 kGet,    handle_inspect_page,      none,  handler, worker,  kReads,   "ui"},
    {"/projects",                         kGet,    handle_projects_redirect, none,  handler, worker,  kReads,   "ui"},
    {"/projects/",                        kGet,    handle_projects,          none,  handler, worker,  kReads,   "ui"},
    {"/projects/*",                       kGet,    handle_no_page,           none,  handler, worker,  kReads,   "ui"},
    {"/static/*",                         kGet,    handle_static,            none,  handler, worker,  kReads,   "ui"},
    {"/login",                            kGet,    handle_login_form,        none,  handler, worker,  kReads,   "ui"},
    {"/login",                            kPost,   handle_login,             small, handler, worker,  kReads,   "ui"},
    {"/login/*",                          kAnyMethod, handle_no_page,        small, handler, worker,  kReads,   "ui"},
    {"/logout",                           kPost,   handle_logout,            small, handler, worker,  kReads,   "ui"},
    {"/logout/*",                         kAnyMethod, handle_no_page,        small, handler, worker,  kReads,   "ui"},
    {"/builds",                           kGet | kPost, handle_builds_redirect, small, handler, worker, kReads, "ui"},
    {"/builds/",                          kGet,    handle_builds_page,       none,  handler, worker,  kReads,   "ui"},
    {"/builds/",                          kPost,   handle_start_build,       small, handler, worker,  kReads,   "ui"},
    {"/builds/*",                         kGet | kPost, handle_no_admin_page, small, handler, worker, kReads,   "ui"},
    {"/jobs/{id}",                        kGet,    handle_job_page,          none,  handler, worker,  kReads,   "ui"},
    {"/jobs/{id}/log",                    kGet,    handle_job_log_page,      none,  handler, worker,  kReads,   "ui"},
    {"/jobs/{id}/cancel",                 kPost,   handle_cancel_job_page,   small, handler, worker,  kReads,   "ui"},
    {"/jobs/{id}/retry",                  kPost,   handle_retry_job_page,    small, handler, worker,  kReads,   "ui"},
    {"/jobs/*",                           kGet | kPost, handle_no_admin_page, small, handler, worker, kReads,   "ui"},
    {"/tokens",                           kGet,    handle_tokens_redirect,   none,  handler, worker,  kReads,   "ui"},
    {"/tokens/",                          kGet,    handle_tokens_page,       none,  handler, worker,  kReads,   "ui"},
    {"/tokens/",                          kPost,   handle_create_token_page, small, handler, worker,  kChanges, "ui"},
    {"/tokens/{id}/revoke",               kPost,   handle_revoke_token_page, small, handler, worker,  kChanges, "ui"},
    {"/tokens/*",                         kGet | kPost, handle_no_admin_page, small, handler, worker, kReads,   "ui"},
    {"/publishers",                       kGet,    handle_publishers_redirect, none, handler, worker, kReads,   "ui"},
    {"/publishers/",                      kGet,    handle_publishers_page,   none,  handler, worker,  kReads,   "ui"},
    {"/publishers/",                      kPost,   handle_add_publisher_page, small, handler, worker, kChanges, "ui"},
    {"/publishers/{id}/remove",           kPost,   handle_remove_publisher_page, small, handler, worker, kChanges, "ui"},
    {"/publishers/*",                     kGet | kPost, handle_no_admin_page, small, handler, worker, kReads,   "ui"},
    // The variant views: /<selector...>/simple/...
    {"/{view...}/simple",                 kGet,    handle_simple,            none,  read,    network, kReads,   "view_root"},
    {"/{view...}/simple/",                kGet,    handle_simple,            none,  read,    network, kReads,   "view_root"},
    {"/{view...}/simple/*",               kGet,    handle_simple,            none,  read,    network, kReads,   "view_project"},
    {"/*",                                kGet,    handle_not_found,         none,  read,    network, kReads,   "other"},
});
// clang-format on

bool is_multi(std::string_view element) {
  return element.starts_with('{') && element.ends_with("...}");
}

// Matches the pattern's elements from `rest` against the segments from `i` on.
bool match_from(std::string_view rest, const std::vector<std::string>& segs, std::size_t i) {
  while (true) {
    const auto slash = rest.find('/');
    const bool last = slash == std::string_view::npos;
    const std::string_view element = rest.substr(0, slash);
    rest = last ? std::string_view() : rest.substr(slash + 1);
    if (element == "*") return true;
    if (is_multi(element)) {
      // One or more segments, up to the first one equal to the next element (a literal).
      if (last) return i < segs.size();
      const std::string_view next = rest.substr(0, rest.find('/'));
      for (std::size_t j = i + 1; j < segs.size(); ++j) {
        if (segs[j] == next) return match_from(rest, segs, j);
      }
      return false;
    }
    if (i >= segs.size()) return false;
    const std::string& seg = segs[i];
    if (element.starts_with('{')) {
      const std::string_view suffix = element.substr(element.find('}') + 1);
      if (!suffix.empty() && (seg.size() <= suffix.size() || !seg.ends_with(suffix))) return false;
    } else if (seg != element) {
      return false;
    }
    ++i;
    if (last) return i == segs.size();
  }
}

std::uint64_t max_file_size(const Environment& env) {
  return env.services.ingestor != nullptr ? env.services.ingestor->limits().max_file_size
                                          : UINT64_MAX;
}

}  // namespace

std::span<const Route> routes() {
  return kRoutes;
}

bool pattern_matches(std::string_view pattern, const std::vector<std::string>& segments) {
  if (!pattern.starts_with('/')) return false;
  // A hand-made request without segments is the root.
  static const std::vector<std::string> kRoot{std::string()};
  return match_from(pattern.substr(1), segments.empty() ? kRoot : segments, 0);
}

RouteMatch find_route(Method method, const std::vector<std::string>& segments) {
  const auto table = routes();
  // Most rows start with a literal segment: comparing it first rules them out cheaply (a view
  // page is looked up behind every family).
  static const auto kFirst = [] {
    std::array<std::optional<std::string_view>, kRoutes.size()> first;
    for (std::size_t i = 0; i < kRoutes.size(); ++i) {
      const std::string_view rest = kRoutes[i].pattern.substr(1);
      const std::string_view element = rest.substr(0, rest.find('/'));
      if (element != "*" && !element.starts_with('{')) first[i] = element;
    }
    return first;
  }();
  const std::string_view head = segments.empty() ? std::string_view() : segments.front();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (kFirst[i] && *kFirst[i] != head) continue;
    if (!pattern_matches(table[i].pattern, segments)) continue;
    RouteMatch m;
    m.label = table[i].label;
    for (std::size_t k = i; k < table.size() && table[k].pattern == table[i].pattern; ++k) {
      m.allowed |= table[k].methods;
      if (m.route == nullptr && (table[k].methods & method_bit(method)) != 0) {
        m.route = &table[k];
        m.label = table[k].label;
      }
    }
    return m;
  }
  return {};
}

std::string allow_header(Methods methods) {
  std::string out;
  for (const Method m : {Method::get, Method::head, Method::post, Method::put, Method::del}) {
    if ((methods & method_bit(m)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += method_name(m);
  }
  return out;
}

Response wrong_method(const RouteMatch& match, Method method) {
  const std::string allow = allow_header(match.allowed);
  if (method != Method::post && method != Method::put) return method_not_allowed(allow);
  Response r = error_response(make_error(Errc::method_not_allowed,
                                         "method not allowed: this address answers " + allow +
                                             "; uploads go to /legacy/ (twine, poetry, pdm) or PUT "
                                             "/upload/<filename>"));
  r.set("Allow", allow);
  return r;
}

Status check_access(const Route& route, const Request& req, const snapshot::Snapshot& snap,
                    const Environment& env) {
  catalog::Scope scope = catalog::Scope::read;
  switch (route.access) {
    case Access::open:
    case Access::handler:
      return ok_status();
    case Access::read:
      if (!env.private_reads) return ok_status();
      break;
    case Access::upload:
      scope = catalog::Scope::upload;
      break;
    case Access::admin:
      scope = catalog::Scope::admin;
      break;
  }
  auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token) return token.error();
  if (auto granted = auth::authorize(snap.tokens(), *token, scope); !granted) {
    return granted.error();
  }
  return ok_status();
}

bool has_unknown_token(const Request& req, const snapshot::Snapshot& snap) {
  const auto token = auth::token_from_authorization(req.header("authorization"));
  return token && *token && snap.tokens().find(**token) == nullptr;
}

std::optional<Error> check_body_head(const Route& route, bool has_body,
                                     std::optional<std::uint64_t> length) {
  if (route.body == BodyPolicy::none && has_body) {
    return make_error(Errc::invalid, "this request takes no body");
  }
  if (route.body == BodyPolicy::small && length && *length > kMaxSmallBody) {
    return body_too_large("request body", *length, kMaxSmallBody);
  }
  return std::nullopt;
}

Response respond(const Request& req, Context& ctx) {
  const RouteMatch match = find_route(req.method, req.segments);
  if (match.route == nullptr) return wrong_method(match, req.method);
  const Route& route = *match.route;
  if (auto allowed = check_access(route, req, ctx.snapshot, ctx.env); !allowed) {
    return error_response(allowed.error());
  }
  if (auto refused = check_body_head(route, !req.body.empty(), req.body.size())) {
    return error_response(*refused);
  }
  if (route.body == BodyPolicy::file || route.body == BodyPolicy::form) {
    if (route.body == BodyPolicy::file) {
      auto plan = plan_upload(req, std::nullopt, max_file_size(ctx.env), ctx.snapshot);
      if (!plan) return error_response(plan.error());
      if (ctx.upload != nullptr) ctx.upload->plan = std::move(*plan);
    } else if (auto boundary = plan_form(req, std::nullopt, max_file_size(ctx.env)); !boundary) {
      return error_response(boundary.error());
    }
    if (ctx.upload == nullptr) {
      return error_response(make_error(Errc::invalid, "the upload's body was not received"));
    }
  }
  if (route.thread == Thread::worker) ctx.on_worker = true;
  Response response = route.handler(req, ctx);
  if (ctx.needs_worker && !ctx.on_worker) {
    // What the server does: the same request again, on a worker.
    ctx.needs_worker = false;
    ctx.on_worker = true;
    response = route.handler(req, ctx);
  }
  if (ctx.after_answer) {
    auto after = std::move(ctx.after_answer);
    ctx.after_answer = nullptr;
    after();
  }
  // A growing file is streamed by the server while it grows; here, its answer once it ended.
  if (ctx.growing) response = growing_file_answer(req, *ctx.growing);
  return response;
}

}  // namespace wf::handlers
