// What a project page says about the project, from the shown version's core metadata: the
// summary and facts (license, Requires-Python, people, links, requirements, classifiers) and
// the long description.

#include "ui/frame.hpp"
#include "wheelforge/render/markdown.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::ui {
namespace {

// Links are made only to web addresses: a Project-URL of javascript: (or anything else) is
// shown as text.
bool is_web_url(std::string_view url) {
  const auto lower = to_lower(url.substr(0, 8));
  return lower.starts_with("https://") || lower.starts_with("http://");
}

// "Name <mail>" from a name field and an email field, either of which may be empty.
std::string person(const std::string& name, const std::string& email) {
  if (name.empty()) return email;
  if (email.empty() || email.find(name) != std::string::npos) return email.empty() ? name : email;
  return name + " <" + email + ">";
}

}  // namespace

std::string render_about(const core::ProjectInfo& info) {
  mus::data d;
  set_text(d, "summary", std::string(trim(info.summary)));
  std::string license = info.license_expression;
  if (license.empty()) license = std::string(trim(info.license));
  // A License field that holds a whole license text is too long for a fact: its first line.
  if (license.size() > 200 || license.find('\n') != std::string::npos) {
    license = std::string(trim(license.substr(0, std::min(license.find('\n'), std::size_t{200}))));
    if (!license.empty()) license += " …";
  }
  set_text(d, "license", license);
  set_text(d, "requires_python", info.requires_python);
  set_text(d, "author", person(info.author, info.author_email));
  set_text(d, "maintainer", person(info.maintainer, info.maintainer_email));
  set_text(d, "keywords", info.keywords);
  mus::data links{mus::data::type::list};
  auto add_link = [&](const std::string& label, const std::string& url) {
    mus::data l;
    l.set("label", label.empty() ? url : label);
    l.set("url", url);
    if (is_web_url(url)) l.set("href", url);
    links.push_back(l);
  };
  if (!info.home_page.empty()) add_link("Homepage", info.home_page);
  for (const auto& [label, url] : info.project_urls) add_link(label, url);
  const bool has_links = !info.home_page.empty() || !info.project_urls.empty();
  d.set("has_links", has_links);
  d.set("links", links);
  d.set("has_requires", !info.requires_dist.empty());
  d.set("requires", list_of(info.requires_dist));
  d.set("has_classifiers", !info.classifiers.empty());
  d.set("classifiers", list_of(info.classifiers));
  d.set("has_facts", !license.empty() || !info.requires_python.empty() || !info.author.empty() ||
                         !info.author_email.empty() || !info.maintainer.empty() ||
                         !info.maintainer_email.empty() || !info.keywords.empty() || has_links ||
                         !info.requires_dist.empty() || !info.classifiers.empty());
  return render_template("about", d);
}

std::string render_description(const core::ProjectInfo& info) {
  if (trim(info.description).empty()) return {};
  const core::DescriptionFormat format = core::description_format(info.description_content_type);
  mus::data d;
  d.set("format", format == core::DescriptionFormat::markdown ? "markdown"
                  : format == core::DescriptionFormat::rst    ? "rst"
                                                              : "plain");
  d.set("html", render::description_html(info.description, format));
  return render_template("description", d);
}

}  // namespace wf::ui
