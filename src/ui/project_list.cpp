// The full project list (/projects/), the shared pieces of project lists, and the 404 page of
// an unknown project with its "did you mean" names.

#include <algorithm>
#include <cctype>

#include "ui/frame.hpp"
#include "ui/internal.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::ui {
namespace {

constexpr std::size_t kMaxQuery = 100;

/// The projects that have files (a project whose files were all deleted has a row but nothing
/// to show).
std::vector<const core::ProjectRecord*> listed_projects(const snapshot::Snapshot& snap,
                                                        std::string_view query) {
  const std::string needle = normalized_query(query);
  const std::string lower = to_lower(query);
  std::vector<const core::ProjectRecord*> out;
  for (const auto* p : snap.projects()) {
    if (snap.files_of(p->name).empty()) continue;
    if (!needle.empty() && p->name.find(needle) == std::string::npos &&
        to_lower(p->display_name).find(lower) == std::string::npos) {
      continue;
    }
    out.push_back(p);
  }
  return out;
}

std::size_t page_count(std::size_t items) {
  return std::max<std::size_t>(
      1, (items + ProjectListQuery::kPageSize - 1) / ProjectListQuery::kPageSize);
}

/// The list's URL for a query, sort and page, with the defaults left out.
std::string list_url(const ProjectListQuery& q) {
  std::string params;
  const auto add = [&](std::string_view name, const std::string& value) {
    params += (params.empty() ? "?" : "&") + std::string(name) + "=" + value;
  };
  if (!q.query.empty()) add("q", percent_encode_path(q.query));
  if (q.by_upload) add("sort", "updated");
  if (q.page > 1) add("page", std::to_string(q.page));
  return "/projects/" + params;
}

}  // namespace

std::string normalized_query(std::string_view q) {
  std::string out;
  for (const char c : q) {
    const bool sep = c == '-' || c == '_' || c == '.';
    if (sep) {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

mus::data project_item(const snapshot::Snapshot& snap, const core::ProjectRecord& p) {
  mus::data d;
  d.set("name", p.name);
  d.set("display_name", p.display_name.empty() ? p.name : p.display_name);
  d.set("url", "/project/" + p.name + "/");
  const auto files = snap.files_of(p.name);
  d.set("latest", files.empty() ? std::string() : public_version_of(*files.back()));
  d.set("files", std::to_string(files.size()));
  d.set("updated", upload_date(p.last_upload));
  return d;
}

std::string ProjectListQuery::key() const {
  return "q=" + query + "&s=" + (by_upload ? "u" : "n") + "&p=" + std::to_string(page);
}

ProjectListQuery canonical_list_query(const snapshot::Snapshot& snap, ProjectListQuery asked) {
  std::string_view q = trim(asked.query);
  if (q.size() > kMaxQuery) q = trim(q.substr(0, kMaxQuery));
  asked.query = std::string(q);
  const std::size_t pages = page_count(listed_projects(snap, asked.query).size());
  asked.page = std::clamp<std::size_t>(asked.page, 1, pages);
  return asked;
}

std::string render_project_list(const snapshot::Snapshot& snap, const Site& site,
                                const ProjectListQuery& asked) {
  const ProjectListQuery q = canonical_list_query(snap, asked);
  auto projects = listed_projects(snap, q.query);
  if (q.by_upload) {
    std::stable_sort(projects.begin(), projects.end(),
                     [](const auto* a, const auto* b) { return a->last_upload > b->last_upload; });
  }
  const std::size_t pages = page_count(projects.size());
  const std::size_t first = (q.page - 1) * ProjectListQuery::kPageSize;
  const std::size_t last = std::min(projects.size(), first + ProjectListQuery::kPageSize);
  mus::data d;
  d.set("query", q.query);
  d.set("searched", !q.query.empty());
  d.set("count", std::to_string(projects.size()));
  d.set("one", projects.size() == 1);
  d.set("none", projects.empty());
  d.set("first", std::to_string(projects.empty() ? 0 : first + 1));
  d.set("last", std::to_string(last));
  d.set("page", std::to_string(q.page));
  d.set("pages", std::to_string(pages));
  d.set("paged", pages > 1);
  d.set("by_upload", q.by_upload);
  mus::data items{mus::data::type::list};
  for (std::size_t i = first; i < last; ++i) items.push_back(project_item(snap, *projects[i]));
  d.set("projects", items);
  ProjectListQuery other = q;
  other.page = 1;
  other.by_upload = false;
  d.set("by_name_url", list_url(other));
  other.by_upload = true;
  d.set("by_upload_url", list_url(other));
  if (q.page > 1) {
    other = q;
    other.page = q.page - 1;
    d.set("prev_url", list_url(other));
  }
  if (q.page < pages) {
    other = q;
    other.page = q.page + 1;
    d.set("next_url", list_url(other));
  }
  std::string title = q.query.empty() ? "Projects" : "Projects matching " + q.query;
  if (pages > 1) title += ", page " + std::to_string(q.page);
  return layout(site, Layout{title + " — wheelforge", render_template("projects", d), {}, false});
}

std::string render_unknown_project(const snapshot::Snapshot& snap, const Site& site,
                                   std::string_view normalized) {
  std::vector<std::string> names;
  for (const auto* p : listed_projects(snap, "")) names.push_back(p->name);
  const auto close = core::similar_names(normalized, names);
  mus::data d;
  d.set("status", "404");
  d.set("title", "Not found");
  d.set("message", "There is no project named " + std::string(normalized) + " on this index.");
  mus::data suggestions{mus::data::type::list};
  for (std::size_t i = 0; i < close.size(); ++i) {
    mus::data s;
    s.set("name", close[i]);
    s.set("url", "/project/" + close[i] + "/");
    s.set("comma", i > 0 && i + 1 < close.size());
    s.set("or", i > 0 && i + 1 == close.size());
    suggestions.push_back(s);
  }
  d.set("has_suggestions", !close.empty());
  d.set("suggestions", suggestions);
  d.set("login_link", false);
  return layout(site, Layout{"Not found — wheelforge", render_template("message", d), {}, false});
}

}  // namespace wf::ui
