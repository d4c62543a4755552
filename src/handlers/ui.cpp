#include "ui.hpp"

#include "handlers.hpp"
#include "read.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/handlers/upstreams.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

constexpr std::string_view kCookie = "wf_session";

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

std::string cookie_value(const Request& req, std::string_view name) {
  for (auto part : split(req.header("cookie"), ';')) {
    part = trim(part);
    if (part.size() > name.size() && part.starts_with(name) && part[name.size()] == '=') {
      return std::string(part.substr(name.size() + 1));
    }
  }
  return {};
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

}  // namespace

std::string form_value(const Form& form, std::string_view name) {
  for (const auto& [k, v] : form) {
    if (k == name) return v;
  }
  return {};
}

Response html(int status, std::string body) {
  Response r;
  r.status = status;
  page_headers(r);
  r.set("Cache-Control", "no-store");
  r.body = std::move(body);
  return r;
}

Response cacheable(const Request& req, const std::shared_ptr<const snapshot::Page>& page,
                   bool private_reads) {
  Response r;
  page_headers(r);
  r.set("Vary", "Accept-Encoding");
  r.set("Cache-Control", private_reads ? "private, no-cache" : "no-cache");
  return with_page_body(req, page, std::move(r));
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

std::string session_cookie(const Request& req, std::string_view value, bool clear) {
  std::string c =
      std::string(kCookie) + "=" + std::string(value) + "; Path=/; HttpOnly; SameSite=Strict";
  c += clear ? "; Max-Age=0" : "; Max-Age=" + std::to_string(UiSessions::kLifetime / 1000000);
  if (req.tls) c += "; Secure";
  return c;
}

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

Result<core::BuildRequest> decode_build_form(const Form& form) {
  core::BuildRequestFields fields;
  fields.recipe = form_value(form, "recipe");
  fields.version = form_value(form, "version");
  fields.force = !form_value(form, "force").empty();
  if (!form_value(form, "yank_superseded").empty()) fields.yank_superseded = true;
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

UiCall::UiCall(const Request& r, Context& c)
    : req(r),
      ctx(c),
      site{base_url(r),
           "",
           false,
           "",
           false,
           c.env.upstreams != nullptr && core::serves_every_name(c.env.upstreams->configs())} {
  if (!req.header("authorization").empty()) {
    auto token = auth::token_from_authorization(req.header("authorization"));
    if (!token) {
      error_ = token.error();
    } else if (*token) {
      token_ = **token;
      credential_ = "token:" + **token;
    }
  } else if (const std::string id = cookie_value(req, kCookie); !id.empty()) {
    if (auto token = ctx.env.ui_sessions->token_of(id)) {
      token_ = std::move(*token);
      credential_ = "session:" + id;
      session_ = id;
      site.signed_in = true;
    }
  }
  if (!credential_.empty()) site.csrf = ctx.env.ui_sessions->form_token(credential_);
  if (token_) {
    if (auto granted = auth::authorize(snap().tokens(), token_, catalog::Scope::read)) {
      site.scope = std::string(catalog::scope_name((*granted)->scope));
      site.basic = session_.empty();
    }
  }
}

ui::Site UiCall::shared_site() const {
  // The form token and the log-out button belong to one login session: such pages are not
  // shared. A caller known by an Authorization header sees the same page as every caller of
  // its scope.
  ui::Site shared{site.base_url,  "", false, site.basic ? site.scope : std::string(), site.basic,
                  site.sole_index};
  return shared;
}

Response UiCall::shared_page(const std::string& key,
                             const std::function<std::string(const ui::Site&)>& render,
                             bool cache) const {
  if (!session_.empty())
    return cacheable(req, snapshot::make_page(render(site)), ctx.env.private_reads);
  const ui::Site shared = shared_site();
  if (!cache) return cacheable(req, snapshot::make_page(render(shared)), ctx.env.private_reads);
  auto page = snap().derived_page(key + "|" + shared.base_url + "|" + shared.scope,
                                  [&] { return render(shared); });
  return cacheable(req, page, ctx.env.private_reads);
}

std::optional<Response> UiCall::require(catalog::Scope scope, bool redirect_to_login) {
  if (error_) {
    Response r = html(401, ui::render_message(site, 401, "Not signed in", error_->message, true));
    r.set("WWW-Authenticate", "Basic realm=\"wheelforge\"");
    return r;
  }
  if (!token_ && redirect_to_login) {
    std::string next = "/";
    for (std::size_t i = 0; i < req.segments.size(); ++i) {
      next += percent_encode_path(req.segments[i]) + (i + 1 < req.segments.size() ? "/" : "");
    }
    return redirect(303, "/login?next=" + percent_encode_path(next));
  }
  auto granted = auth::authorize(snap().tokens(), token_, scope);
  if (granted) return std::nullopt;
  if (granted.error().code == Errc::unauthorized) {
    const bool private_index = scope == catalog::Scope::read;
    // An expired token is told so, and when (auth::authorize's message, as the API answers);
    // only a token nobody knows gets the general text.
    const catalog::TokenRecord* record = token_record();
    const bool expired = record != nullptr && record->expired(now_micros());
    Response r =
        html(401, ui::render_message(
                      site, 401, expired ? "Token expired" : "Sign in needed",
                      expired         ? "Your " + granted.error().message + ", then log in with it."
                      : private_index ? "This index is private. Sign in with user __token__ and a "
                                        "read token as the password, or log in with a token."
                                      : "Your token is unknown or was revoked: log in again.",
                      true));
    r.set("WWW-Authenticate", "Basic realm=\"wheelforge\"");
    return r;
  }
  const auto* record = snap().tokens().find(*token_);
  const std::string has =
      record != nullptr ? std::string(catalog::scope_name(record->scope)) : std::string("another");
  return html(
      403, ui::render_message(site, 403, "Not allowed",
                              "This page needs a token of scope " +
                                  std::string(catalog::scope_name(scope)) + "; yours has scope " +
                                  has + ". Log in with an admin token.",
                              true));
}

const catalog::TokenRecord* UiCall::token_record() const {
  return token_ ? snap().tokens().find(*token_) : nullptr;
}

catalog::Actor UiCall::actor() const {
  return actor_of(req, token_record());
}

std::optional<Response> UiCall::require_read() {
  if (!ctx.env.private_reads) return std::nullopt;
  return require(catalog::Scope::read, false);
}

std::optional<Response> UiCall::check_post(const Form& form, bool needs_form_token) {
  if (!same_origin(req)) {
    note("cross-origin POST refused");
    return html(403, ui::render_message(site, 403, "Request refused",
                                        "This form was not sent from a page of this server. "
                                        "Reload the page and try again."));
  }
  if (needs_form_token && (credential_.empty() || !crypto::constant_time_equals(
                                                      ctx.env.ui_sessions->form_token(credential_),
                                                      form_value(form, "csrf")))) {
    note("POST without a valid form token refused");
    return html(403, ui::render_message(site, 403, "Request refused",
                                        "The form has expired or was not made for you. "
                                        "Reload the page and try again."));
  }
  return std::nullopt;
}

Response UiCall::not_found_page(std::string_view message) const {
  return html(404, ui::render_message(site, 404, "Not found", message));
}

}  // namespace wf::handlers
