#pragma once
// What the web UI's handlers share (ui.cpp): who the caller is, the checks every page makes, the
// headers of its pages. The pages (ui_pages.cpp, ui_builds.cpp) are rendered by wheelforge/ui.
//
//   GET  /, /?q=NAME                     home: counts, search, how to use the index
//   GET  /project/<name>/[?version=&torch=&backend=&python=]   project page, matrix, picker
//   GET  /projects/[?q=&sort=name|updated&page=N]              every project with files
//   GET  /static/<name>, /static/<hash>/<name>                 embedded CSS, scripts, icon
//   GET  /login, POST /login, POST /logout                     token login, session cookie
//   GET  /builds/, POST /builds/                               builds and jobs; start a build
//   GET  /jobs/<id>, POST /jobs/<id>/cancel, POST /jobs/<id>/retry
//   GET  /jobs/<id>/log?offset=N[&follow=1]                    the log (follow=1 streams)
//
// Reads follow the server's read policy (private mode: read credentials, from a Basic/Bearer
// header or a session cookie). Builds pages need admin scope. Every POST must come from this
// origin (Origin, else Referer) and, once signed in, carry the session's form token.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/core/build.hpp"
#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/message.hpp"
#include "wheelforge/ui/pages.hpp"

namespace wf::handlers {

using Form = std::vector<std::pair<std::string, std::string>>;

/// The value of the first field with this name, or "".
[[nodiscard]] std::string form_value(const Form& form, std::string_view name);

/// A page that depends on the caller (builds, jobs, errors): never stored by caches.
[[nodiscard]] Response html(int status, std::string body);

/// A page that depends only on the catalog (and the URL): revalidated by ETag, gzip-encoded
/// for clients that accept it.
[[nodiscard]] Response cacheable(const Request& req,
                                 const std::shared_ptr<const snapshot::Page>& page,
                                 bool private_reads);

/// 301 or 303 to a path of this server.
[[nodiscard]] Response redirect(int status, std::string location);

/// The session cookie to set (`clear`: the one that ends the session).
[[nodiscard]] std::string session_cookie(const Request& req, std::string_view value, bool clear);

/// A login link's `next`: a local path, or "" for anything that could send the browser
/// elsewhere.
[[nodiscard]] std::string safe_next(std::string_view next);

/// The "Start a build" form as a build request, by the rules the JSON API follows
/// (core::check_build_request): the matrix fields are comma-separated lists.
[[nodiscard]] Result<core::BuildRequest> decode_build_form(const Form& form);

/// One web UI request as its handler sees it: who asks (the token of an Authorization header,
/// else the one a session cookie stands for), the site values every page is rendered with,
/// and the checks pages share. Notes go to ctx.note, prefixed "ui: ".
class UiCall {
 public:
  UiCall(const Request& req, Context& ctx);

  const Request& req;
  Context& ctx;
  ui::Site site;

  [[nodiscard]] const snapshot::Snapshot& snap() const { return ctx.snapshot; }
  [[nodiscard]] build::Runner* runner() const { return ctx.env.services.runner; }
  [[nodiscard]] Form query() const { return parse_form(req.query); }
  /// The caller's token as the snapshot knows it (header or session), or nullptr.
  [[nodiscard]] const catalog::TokenRecord* token_record() const;
  /// Who the caller is, for the audit trail.
  [[nodiscard]] catalog::Actor actor() const;
  /// The session id when the caller signed in with the login form; "" otherwise.
  [[nodiscard]] const std::string& session() const { return session_; }

  /// Checks the caller against a scope; on failure, the page that says so (or, for a caller
  /// without credentials and `redirect_to_login`, the way to the login page).
  [[nodiscard]] std::optional<Response> require(catalog::Scope scope, bool redirect_to_login);
  /// The read policy of pages: a read token when the index is private.
  [[nodiscard]] std::optional<Response> require_read();
  /// A POST's origin and, when `needs_form_token`, the session's form token.
  [[nodiscard]] std::optional<Response> check_post(const Form& form, bool needs_form_token);

  [[nodiscard]] Response not_found_page(std::string_view message) const;

  /// The site a shared (cached) page is rendered with: the caller's navigation state without
  /// anything that belongs to one login session.
  [[nodiscard]] ui::Site shared_site() const;
  /// A page that depends on the catalog, the URL and the caller's navigation state only:
  /// rendered once per snapshot under `key` (when `cache`; searches are not, their number is
  /// unbounded) for every caller who sees the same navigation (anonymous, or signed in by an
  /// Authorization header, per scope). A caller with a login session gets a page of its own.
  [[nodiscard]] Response shared_page(const std::string& key,
                                     const std::function<std::string(const ui::Site&)>& render,
                                     bool cache = true) const;
  void note(std::string text) { ctx.note = "ui: " + std::move(text); }

 private:
  std::optional<std::string> token_;
  std::string credential_;  // what the form token is bound to
  std::string session_;
  std::optional<Error> error_;  // an Authorization header that could not be read
};

/// The admin every builds and tokens page needs; a browser without credentials is sent to the
/// login page (not for a POST: its form would be lost on the way).
[[nodiscard]] inline std::optional<Response> require_admin(UiCall& call) {
  return call.require(catalog::Scope::admin, call.req.method != Method::post);
}

}  // namespace wf::handlers
