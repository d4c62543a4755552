#include "ui/frame.hpp"

#include "wheelforge/ui/assets.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::ui {

std::string render_template(std::string_view name, const mus::data& data) {
  mus::mustache tmpl{std::string(template_text(name))};
  if (!tmpl.is_valid()) return "<p>template " + html_escape(name) + ": " + tmpl.error_message();
  return tmpl.render(data);
}

std::string layout(const Site& site, const Layout& page) {
  mus::data d;
  d.set("title", page.title);
  d.set("content", page.content);
  d.set("style_url", static_url("style.css"));
  d.set("icon_url", static_url("icon.svg"));
  mus::data scripts{mus::data::type::list};
  for (const auto& s : page.scripts) scripts.push_back(mus::data("url", static_url(s)));
  d.set("scripts", scripts);
  d.set("refresh", page.refresh);
  d.set("signed_in", site.signed_in);
  set_text(d, "scope", site.scope);
  d.set("basic", site.basic);
  d.set("admin", site.scope == "admin");
  d.set("csrf", site.csrf);
  return render_template("layout", d);
}

void set_text(mus::data& d, const std::string& name, const std::string& value) {
  if (!value.empty()) d.set(name, value);
}

mus::data list_of(const std::vector<std::string>& items) {
  mus::data l{mus::data::type::list};
  for (const auto& i : items) l.push_back(mus::data(i));
  return l;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += sep;
    out += i;
  }
  return out;
}

std::string upload_date(Micros t) {
  // "2025-01-31T12:00:00.000000Z" -> "2025-01-31 12:00 UTC"
  const std::string iso = iso8601_micros(t);
  return iso.substr(0, 10) + " " + iso.substr(11, 5) + " UTC";
}

}  // namespace wf::ui
