#include "wheelforge/ui/pages.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <kainjow/mustache.hpp>
#include <map>
#include <set>

#include "ui/frame.hpp"
#include "ui/internal.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/torch_env.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/ui/assets.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::ui {
namespace {

constexpr std::size_t kMaxSearchResults = 100;
constexpr std::size_t kRecentProjects = 20;

/// The version a project page shows: the one asked for when it exists, else the newest with a
/// file that is not yanked, else the newest.
std::string chosen_version(const std::vector<const core::FileRecord*>& files,
                           std::string_view asked) {
  std::string newest;
  std::string newest_usable;
  for (const auto* f : files) {  // ascending version order
    std::string v = public_version_of(*f);
    if (v == asked) return v;
    newest = v;
    if (!f->yanked) newest_usable = v;
  }
  return newest_usable.empty() ? newest : newest_usable;
}

/// Every Python version of a coverage matrix ("3.9+" counts as "3.9"), sorted.
std::vector<std::string> pythons_of(const Coverage& cov) {
  std::vector<std::string> out;
  for (const auto& row : cov.cells) {
    for (const auto& cell : row) {
      for (auto p : cell.pythons) {
        if (!p.empty() && p.back() == '+') p.pop_back();
        out.push_back(std::move(p));
      }
    }
  }
  sort_pythons(out);
  return out;
}

bool on_axis(const std::vector<std::string>& values, const std::string& v) {
  return !v.empty() && std::find(values.begin(), values.end(), v) != values.end();
}

/// A backend label in words, CUDA as torch.version.cuda prints it: "CUDA 12.8", "CUDA 12.x"
/// (a major-only build), "CPU", "ROCm 6.4".
std::string backend_words(const std::string& backend) {
  const core::VariantHints h = core::parse_local_label(backend);
  switch (h.backend) {
    case core::Backend::cpu:
      return "CPU";
    case core::Backend::cuda:
      return "CUDA " + std::to_string(*h.cuda_major) +
             (h.cuda_minor ? "." + std::to_string(*h.cuda_minor) : std::string(".x"));
    case core::Backend::rocm:
      return "ROCm " + std::to_string(*h.rocm_major) +
             (h.rocm_minor ? "." + std::to_string(*h.rocm_minor) : std::string());
    case core::Backend::none:
      break;
  }
  return backend;
}

/// How the picker's CUDA menu names a backend: "12.8 (cu128)", "CPU", "ROCm 6.4".
std::string backend_option_label(const std::string& backend) {
  std::string words = backend_words(backend);
  if (!words.starts_with("CUDA ")) return words;
  return words.substr(5) + " (" + backend + ")";
}

/// The view of a picker cell: backend and torch series, either of which may be "".
std::optional<core::ViewSelector> cell_view(const std::string& backend, const std::string& torch) {
  std::vector<std::string> parts;
  if (!backend.empty()) parts.push_back(backend);
  if (!torch.empty()) parts.push_back("torch" + torch);
  if (parts.empty()) return std::nullopt;
  const std::vector<std::string_view> segments(parts.begin(), parts.end());
  auto view = core::parse_view_selector(segments);
  if (!view) return std::nullopt;
  return *view;
}

bool view_has_wheel(const snapshot::Snapshot& snap, const core::ViewSelector& view,
                    std::string_view project, const std::string& version) {
  const auto files = snap.view_files_of(view, project);
  return std::any_of(files.begin(), files.end(), [&](const core::FileRecord* f) {
    return f->kind == core::DistKind::wheel && public_version_of(*f) == version;
  });
}

/// The command a project page shows before anything is chosen: the build for the newest torch
/// series whose PyPI wheels' CUDA (docs/pypi-torch-cuda.md) has one (what `pip install torch`
/// brings), else the cell with
/// the most Python versions (newer torch, then newer backend on ties).
struct DefaultChoice {
  core::ViewSelector view;
  std::string label;
};
std::optional<DefaultChoice> default_choice(const snapshot::Snapshot& snap,
                                            std::string_view project, const std::string& version,
                                            const Coverage& cov) {
  for (auto t = cov.torch.rbegin(); t != cov.torch.rend(); ++t) {
    const auto series = core::torch_series_of_version(*t);
    if (!series) continue;
    const auto cuda = core::pypi_default_cuda(*series);
    if (!cuda) continue;
    core::ViewSelector view;
    view.backend = core::Backend::cuda;
    view.cuda_major = cuda->major;
    view.cuda_minor = cuda->minor;
    view.torch = series;
    if (view_has_wheel(snap, view, project, version)) {
      return DefaultChoice{view, "PyTorch " + *t + " from PyPI (CUDA " + cuda->str() + ")"};
    }
  }
  std::optional<DefaultChoice> best;
  std::size_t most = 0;
  for (std::size_t r = cov.torch.size(); r-- > 0;) {
    for (std::size_t c = cov.backends.size(); c-- > 0;) {
      const std::size_t n = cov.cells[r][c].pythons.size();
      if (n <= most) continue;
      const auto view = cell_view(cov.backends[c], cov.torch[r]);
      if (!view || !view_has_wheel(snap, *view, project, version)) continue;
      most = n;
      std::string label = cov.torch[r].empty() ? std::string("any torch") : "torch " + cov.torch[r];
      if (!cov.backends[c].empty()) label += ", " + backend_words(cov.backends[c]);
      best = DefaultChoice{*view, label};
    }
  }
  return best;
}

}  // namespace

std::string resolve_command(std::string_view base_url, std::string_view project) {
  return "curl -sS \"" + std::string(base_url) + "/api/resolve?project=" + std::string(project) +
         "&$(python -c 'import torch, urllib.parse as p; print(p.urlencode(dict("
         "torch=torch.__version__, cuda=torch.version.cuda, hip=torch.version.hip, "
         "abi=int(torch._C._GLIBCXX_USE_CXX11_ABI))))')\"";
}

Selection canonical_selection(const snapshot::Snapshot& snap, std::string_view normalized,
                              const Selection& asked) {
  const auto files = snap.files_of(normalized);
  Selection out;
  const std::string version = chosen_version(files, asked.version);
  if (version == asked.version) out.version = version;
  const Coverage cov = coverage_of(files, version);
  out.torch = on_axis(cov.torch, asked.torch) ? asked.torch : "";
  out.backend = on_axis(cov.backends, asked.backend) ? asked.backend : "";
  out.python = on_axis(pythons_of(cov), asked.python) ? asked.python : "";
  return out;
}

std::string human_size(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string human_duration(Micros micros) {
  if (micros < 0) micros = 0;
  const double seconds = static_cast<double>(micros) / 1e6;
  char buf[48];
  if (seconds < 60.0) {
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  } else if (seconds < 3600.0) {
    const auto s = static_cast<long long>(seconds);
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", s / 60, s % 60);
  } else {
    const auto s = static_cast<long long>(seconds);
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string Selection::key() const {
  return "v=" + version + "&t=" + torch + "&b=" + backend + "&p=" + python;
}

std::string render_home(const snapshot::Snapshot& snap, const Site& site, std::string_view query) {
  query = trim(query);
  if (query.size() > 100) query = query.substr(0, 100);
  mus::data d;
  d.set("base", site.base_url);
  d.set("sole_index", site.sole_index);
  d.set("resolve_command", resolve_command(site.base_url, "PROJECT"));
  d.set("projects", std::to_string(snap.project_count()));
  d.set("files", std::to_string(snap.file_count()));
  std::size_t variants = 0;
  for (const auto* p : snap.projects()) {
    for (const auto* f : snap.files_of(p->name)) variants += f->hints.selects() ? 1U : 0U;
  }
  d.set("variant_files", std::to_string(variants));
  d.set("empty_index", snap.file_count() == 0);
  d.set("query", std::string(query));
  mus::data items{mus::data::type::list};
  if (!query.empty()) {
    const std::string needle = normalized_query(query);
    const std::string lower = to_lower(query);
    // Exact name first, then names that start with the query, then the rest; each by name.
    std::vector<std::pair<int, const core::ProjectRecord*>> hits;
    for (const auto* p : snap.projects()) {
      int rank = 3;
      if (p->name == needle) {
        rank = 0;
      } else if (p->name.starts_with(needle)) {
        rank = 1;
      } else if (p->name.find(needle) != std::string::npos ||
                 to_lower(p->display_name).find(lower) != std::string::npos) {
        rank = 2;
      }
      if (rank < 3) hits.emplace_back(rank, p);
    }
    std::stable_sort(hits.begin(), hits.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    d.set("searched", true);
    d.set("result_count", std::to_string(hits.size()));
    d.set("one_result", hits.size() == 1);
    d.set("more", hits.size() > kMaxSearchResults);
    for (std::size_t i = 0; i < hits.size() && i < kMaxSearchResults; ++i) {
      items.push_back(project_item(snap, *hits[i].second));
    }
  } else {
    std::vector<const core::ProjectRecord*> recent = snap.projects();
    std::stable_sort(recent.begin(), recent.end(),
                     [](const auto* a, const auto* b) { return a->last_upload > b->last_upload; });
    if (recent.size() > kRecentProjects) recent.resize(kRecentProjects);
    for (const auto* p : recent) items.push_back(project_item(snap, *p));
    d.set("searched", false);
    d.set("has_recent", !recent.empty());
  }
  d.set("results", items);
  const std::string title =
      query.empty() ? "wheelforge" : "Search: " + std::string(query) + " — wheelforge";
  return layout(site, Layout{title, render_template("home", d), {"copy.js"}, false});
}

namespace {

// "token #3 (ci uploader)", "wheelforge ingest", "the build runner"; "" when not known (files
// stored before uploaders were recorded).
std::string uploaded_by(const snapshot::Snapshot& snap, const core::FileRecord& f) {
  if (f.uploaded_by_token != 0) {
    std::string who = "token #" + std::to_string(f.uploaded_by_token);
    const auto* t = snap.tokens().find_id(f.uploaded_by_token);
    if (t != nullptr && !t->description.empty()) who += " (" + t->description + ")";
    if (t != nullptr && t->revoked) who += ", since revoked";
    return who;
  }
  if (f.uploaded_by == "cli") return "wheelforge ingest";
  if (f.uploaded_by == "build") return "the build runner";
  return f.uploaded_by;
}

}  // namespace

const core::FileRecord* described_file(const snapshot::Snapshot& snap, std::string_view normalized,
                                       const Selection& selection) {
  const auto files = snap.files_of(normalized);
  const std::string version = chosen_version(files, selection.version);
  const core::FileRecord* chosen = nullptr;
  for (const auto* f : files) {
    if (public_version_of(*f) != version) continue;
    // A wheel over the sdist; among wheels, the newest upload (the last word on the release).
    if (chosen == nullptr ||
        (f->kind == core::DistKind::wheel &&
         (chosen->kind != core::DistKind::wheel || f->upload_time > chosen->upload_time))) {
      chosen = f;
    }
  }
  return chosen;
}

std::optional<std::string> render_project(const snapshot::Snapshot& snap, const Site& site,
                                          std::string_view normalized, const Selection& selection,
                                          const ProjectText& text) {
  const core::ProjectRecord* project = snap.find_project(normalized);
  if (project == nullptr) return std::nullopt;
  const auto files = snap.files_of(normalized);
  const std::string display = project->display_name.empty() ? project->name : project->display_name;

  // Versions, newest first, each with its files.
  std::vector<std::pair<std::string, std::vector<const core::FileRecord*>>> versions;
  for (const auto* f : files) {
    const std::string v = public_version_of(*f);
    if (versions.empty() || versions.back().first != v)
      versions.emplace_back(v, std::vector<const core::FileRecord*>{});
    versions.back().second.push_back(f);
  }
  std::reverse(versions.begin(), versions.end());

  mus::data d;
  d.set("name", project->name);
  d.set("display_name", display);
  d.set("base", site.base_url);
  d.set("file_count", std::to_string(files.size()));
  d.set("updated", upload_date(project->last_upload));
  d.set("about", text.about);
  d.set("description", text.description);
  if (!text.also_upstream.empty()) {
    std::string names;
    for (const auto& n : text.also_upstream) names += (names.empty() ? "" : ", ") + n;
    d.set("also_upstream", names);
  }

  const std::string version = chosen_version(files, selection.version);
  d.set("latest", versions.empty() ? std::string() : versions.front().first);
  d.set("version", version);

  mus::data version_list{mus::data::type::list};
  for (const auto& [v, fs] : versions) {
    mus::data dv;
    dv.set("version", v);
    dv.set("anchor", "v-" + v);
    dv.set("selected", v == version);
    const bool all_yanked =
        std::all_of(fs.begin(), fs.end(), [](const auto* f) { return f->yanked.has_value(); });
    dv.set("yanked", all_yanked);
    set_text(dv, "yank_reason", all_yanked ? fs.front()->yanked.value_or("") : std::string());
    mus::data file_list{mus::data::type::list};
    for (const auto* f : fs) {
      mus::data df;
      df.set("filename", f->filename);
      df.set("url", render::file_url(*f));
      df.set("size", human_size(f->size));
      df.set("bytes", std::to_string(f->size));
      df.set("sha256", f->sha256);
      df.set("uploaded", upload_date(f->upload_time));
      df.set("uploaded_iso", iso8601_micros(f->upload_time));
      df.set("requires_python", f->requires_python.value_or(""));
      df.set("variant", f->hints.describe());
      df.set("kind", f->kind == core::DistKind::wheel ? "wheel" : "sdist");
      df.set("inspectable", f->kind == core::DistKind::wheel);
      // PEP 740: the attestations it was uploaded with, where the simple pages link them.
      set_text(df, "provenance_url", render::provenance_url(*f));
      df.set("python",
             f->kind == core::DistKind::wheel ? join(python_versions_of(*f), ", ") : "source");
      df.set("yanked", f->yanked.has_value());
      set_text(df, "yank_reason", f->yanked.value_or(""));
      // Admins (a valid admin token, by a login or HTTP Basic) see who uploaded each file.
      if (site.scope == "admin") set_text(df, "uploaded_by", uploaded_by(snap, *f));
      file_list.push_back(df);
    }
    dv.set("files", file_list);
    version_list.push_back(dv);
  }
  d.set("versions", version_list);
  d.set("version_options", [&] {
    mus::data l{mus::data::type::list};
    for (const auto& [v, fs] : versions) {
      mus::data o;
      o.set("value", v);
      o.set("selected", v == version);
      l.push_back(o);
    }
    return l;
  }());

  // The coverage matrix of the selected version.
  const Coverage cov = coverage_of(files, version);
  const bool has_matrix = !cov.torch.empty();
  d.set("has_matrix", has_matrix);
  mus::data columns{mus::data::type::list};
  for (const auto& b : cov.backends)
    columns.push_back(mus::data("label", b.empty() ? "any backend" : b));
  d.set("columns", columns);
  const std::vector<std::string> all_pythons = pythons_of(cov);
  mus::data rows{mus::data::type::list};
  for (std::size_t r = 0; r < cov.torch.size(); ++r) {
    mus::data row;
    row.set("torch", cov.torch[r].empty() ? "any torch" : "torch " + cov.torch[r]);
    mus::data cells{mus::data::type::list};
    for (std::size_t c = 0; c < cov.backends.size(); ++c) {
      mus::data cell;
      const auto& pythons = cov.cells[r][c].pythons;
      cell.set("missing", pythons.empty());
      mus::data links{mus::data::type::list};
      for (const auto& py : pythons) {
        std::string exact = py;
        if (!exact.empty() && exact.back() == '+') exact.pop_back();
        mus::data link;
        link.set("python", py);
        if (!cov.torch[r].empty() && !cov.backends[c].empty()) {
          link.set("href", "?version=" + version + "&torch=" + cov.torch[r] +
                               "&backend=" + cov.backends[c] + "&python=" + exact + "#picker");
        }
        links.push_back(link);
      }
      cell.set("pythons", links);
      cell.set("label", (cov.torch[r].empty() ? "any torch" : "torch " + cov.torch[r]) + ", " +
                            (cov.backends[c].empty() ? "any backend" : cov.backends[c]));
      cells.push_back(cell);
    }
    row.set("cells", cells);
    rows.push_back(row);
  }
  d.set("rows", rows);
  d.set("generic", list_of(cov.generic));
  d.set("has_generic", !cov.generic.empty());

  // The picker: choices are the axes of the selected version's matrix.
  auto options = [](const std::vector<std::string>& values, const std::string& chosen,
                    const auto& label) {
    mus::data l{mus::data::type::list};
    for (const auto& v : values) {
      if (v.empty()) continue;
      mus::data o;
      o.set("value", v);
      o.set("label", label(v));
      o.set("selected", v == chosen);
      l.push_back(o);
    }
    return l;
  };
  const std::string torch = on_axis(cov.torch, selection.torch) ? selection.torch : "";
  const std::string backend = on_axis(cov.backends, selection.backend) ? selection.backend : "";
  const std::string python = on_axis(all_pythons, selection.python) ? selection.python : "";
  d.set("torch_options",
        options(cov.torch, torch, [](const std::string& v) { return "torch " + v; }));
  d.set("backend_options", options(cov.backends, backend, backend_option_label));
  d.set("python_options",
        options(all_pythons, python, [](const std::string& v) { return "Python " + v; }));

  const std::string requirement = project->name + "==" + version;
  // --only-binary keeps pip from building an sdist of this project from another index
  // (docs/clients.md, "pip"); a
  // version published only as an sdist must be built, so it is left out there.
  const bool version_has_wheel = std::any_of(files.begin(), files.end(), [&](const auto* f) {
    return f->kind == core::DistKind::wheel && public_version_of(*f) == version;
  });
  auto install_args = [&](const std::string& index_url) {
    return version_has_wheel
               ? render::pip_install_args(index_url, project->name, version, site.sole_index)
               : std::string(render::index_option(site.sole_index)) + index_url + " " + requirement;
  };
  d.set("generic_command", "pip install " + install_args(site.base_url + "/simple/"));
  d.set("resolve_command", resolve_command(site.base_url, project->name));
  const bool chosen = !torch.empty() && !backend.empty() && !python.empty();
  d.set("chosen", chosen);
  if (!chosen && has_matrix) {
    if (const auto choice = default_choice(snap, project->name, version, cov)) {
      const std::string index_url = site.base_url + "/" + choice->view.path() + "/simple/";
      d.set("default_command", "pip install " + install_args(index_url));
      d.set("default_label", choice->label);
    }
  }
  if (chosen) {
    const std::string torch_segment = "torch" + torch;
    const std::vector<std::string_view> segments{backend, torch_segment};
    auto view = core::parse_view_selector(segments);
    std::vector<const core::FileRecord*> matches;
    if (view) {
      for (const auto* f : snap.view_files_of(*view, project->name)) {
        if (f->kind != core::DistKind::wheel || public_version_of(*f) != version) continue;
        const auto key = python_sort_key(python);
        const auto pythons = python_versions_of(*f);
        const bool fits = std::any_of(pythons.begin(), pythons.end(), [&](const std::string& p) {
          const auto k = python_sort_key(p);
          if (!p.empty() && p.back() == '+') return k.first == key.first && k.second <= key.second;
          return k == key || (k.second == -1 && k.first == key.first);
        });
        if (fits) matches.push_back(f);
      }
    }
    d.set("found", !matches.empty());
    d.set("selection_label",
          "torch " + torch + ", " + backend_words(backend) + ", Python " + python);
    if (view && !matches.empty()) {
      const std::string index_url = site.base_url + "/" + view->path() + "/simple/";
      d.set("index_url", index_url);
      d.set("pip_command", "python" + python + " -m pip install " + install_args(index_url));
      d.set("uv_command", "uv pip install --python " + python + " " + install_args(index_url));
      std::vector<std::string> names;
      names.reserve(matches.size());
      for (const auto* f : matches) names.push_back(f->filename);
      d.set("matches", list_of(names));
    }
  }
  const std::string title = display + " " + version + " — wheelforge";
  return layout(site,
                Layout{title, render_template("project", d), {"copy.js", "picker.js"}, false});
}

std::string render_message(const Site& site, int status, std::string_view title,
                           std::string_view message, bool login_link) {
  mus::data d;
  d.set("status", std::to_string(status));
  d.set("title", std::string(title));
  d.set("message", std::string(message));
  d.set("login_link", login_link);
  return layout(
      site, Layout{std::string(title) + " — wheelforge", render_template("message", d), {}, false});
}

std::string render_login(const Site& site, std::string_view next, std::string_view error) {
  mus::data d;
  d.set("next", std::string(next));
  set_text(d, "error", std::string(error));
  d.set("has_error", !error.empty());
  return layout(site, Layout{"Log in — wheelforge", render_template("login", d), {}, false});
}

}  // namespace wf::ui
