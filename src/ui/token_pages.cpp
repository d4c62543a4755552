// The admin's tokens and trusted publishers pages.

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

std::string render_publishers(const Site& site, const PublishersPage& page) {
  mus::data d;
  d.set("csrf", site.csrf);
  set_text(d, "notice", page.notice);
  set_text(d, "error", page.error);
  set_text(d, "form_project", page.form_project);
  set_text(d, "form_claims", page.form_claims);
  set_text(d, "form_description", page.form_description);
  mus::data issuers{mus::data::type::list};
  for (const auto& [name, url] : page.issuers) {
    mus::data i;
    set_text(i, "name", name);
    set_text(i, "url", url);
    i.set("selected", name == page.form_issuer);
    issuers.push_back(i);
  }
  d.set("issuers", issuers);
  d.set("has_issuers", !page.issuers.empty());
  mus::data publishers{mus::data::type::list};
  for (const auto& p : page.publishers) {
    mus::data pd;
    pd.set("id", std::to_string(p.id));
    pd.set("project", p.project);
    set_text(pd, "issuer", p.issuer);
    mus::data claims{mus::data::type::list};
    for (const auto& [name, value] : p.claims) {
      mus::data c;
      set_text(c, "name", name);
      set_text(c, "value", value);
      claims.push_back(c);
    }
    pd.set("claims", claims);
    set_text(pd, "description", p.description);
    pd.set("created", upload_date(p.created_at));
    pd.set("created_by", p.created_by.empty() ? std::string("—") : p.created_by);
    pd.set("csrf", site.csrf);
    publishers.push_back(pd);
  }
  d.set("publishers", publishers);
  d.set("has_publishers", !page.publishers.empty());
  return layout(
      site, Layout{"Trusted publishers — wheelforge", render_template("publishers", d), {}, false});
}

}  // namespace wf::ui
