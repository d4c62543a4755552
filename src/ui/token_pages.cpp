// The admin's tokens page.

#include <string>

#include "ui/frame.hpp"
#include "wheelforge/ui/pages.hpp"

namespace wf::ui {
namespace {

std::string when(const std::optional<Micros>& t, const char* none) {
  return t ? upload_date(*t) : std::string(none);
}

std::string state_of(const catalog::TokenRecord& t, Micros now) {
  if (t.revoked) return "revoked";
  if (t.expired(now)) return "expired";
  return "active";
}

mus::data token_data(const catalog::TokenRecord& t, Micros now) {
  mus::data d;
  d.set("id", std::to_string(t.id));
  d.set("scope", std::string(catalog::scope_name(t.scope)));
  set_text(d, "project", t.project.value_or(""));
  set_text(d, "description", t.description);
  d.set("state", state_of(t, now));
  d.set("active", !t.revoked && !t.expired(now));
  d.set("created", upload_date(t.created_at));
  d.set("created_by", t.created_by.empty() ? std::string("—") : t.created_by);
  d.set("expires", when(t.expires_at, "never"));
  d.set("last_used", when(t.last_used_at, "never"));
  return d;
}

}  // namespace

std::string render_tokens(const Site& site, const TokensPage& page) {
  mus::data d;
  d.set("csrf", site.csrf);
  set_text(d, "notice", page.notice);
  set_text(d, "error", page.error);
  if (page.created) {
    mus::data created = token_data(*page.created, page.now);
    created.set("secret", page.secret);
    d.set("created", created);
  }
  mus::data tokens{mus::data::type::list};
  for (const auto& t : page.tokens) {
    mus::data td = token_data(t, page.now);
    td.set("csrf", site.csrf);
    tokens.push_back(td);
  }
  d.set("tokens", tokens);
  d.set("has_tokens", !page.tokens.empty());
  return layout(site, Layout{"Tokens — wheelforge", render_template("tokens", d), {}, false});
}

}  // namespace wf::ui
