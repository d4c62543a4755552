// /api/resolve: the builds of a torch/CUDA environment, project by project, and what exists
// nearby when a project has none.

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "handlers.hpp"
#include "read.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/torch_env.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {

namespace {

// API refusals carry JSON like the API's answers; status and reason come from error_response.
Response api_error(const Error& error, std::string body) {
  Response r = error_response(error);
  for (auto& [name, value] : r.headers) {
    if (name == "Content-Type") value = "application/json";
  }
  r.body = std::move(body);
  return r;
}

Response api_error(const Error& error) {
  return api_error(error, render::render_api_error(error.message));
}

// At most this many cells in a no-build answer: enough to see what exists nearby.
constexpr std::size_t kMaxNearest = 8;

/// The newest public version with a wheel among `files` (a view's listing, in version order),
/// preferring versions with a wheel that is not yanked; nullopt when there is no wheel.
std::optional<std::string> newest_wheel_version(const std::vector<const core::FileRecord*>& files) {
  std::optional<std::string> newest;
  std::optional<std::string> newest_usable;
  for (const auto* f : files) {
    if (f->kind != core::DistKind::wheel) continue;
    auto v = core::Version::parse(f->version);
    std::string public_version = v ? v->public_str() : f->version;
    if (!f->yanked) newest_usable = public_version;
    newest = std::move(public_version);
  }
  return newest_usable ? newest_usable : newest;
}

/// Python tags in numeric order within a prefix: cp39 before cp311 (then by text).
bool python_tag_before(const std::string& a, const std::string& b) {
  auto split_tag = [](const std::string& t) {
    const auto digits = t.find_first_of("0123456789");
    const std::string prefix = t.substr(0, digits);
    std::size_t number = 0;
    std::size_t width = 0;
    for (std::size_t i = digits; i < t.size(); ++i) {  // digits is npos: no digits
      if (t[i] < '0' || t[i] > '9' || width == 6) break;
      number = number * 10 + static_cast<std::size_t>(t[i] - '0');
      ++width;
    }
    return std::make_tuple(prefix, number, t);
  };
  return split_tag(a) < split_tag(b);
}

/// The project's wheels grouped by what they were built for (backend, torch series, ABI),
/// nearest to `wanted` first. Yanked wheels are left out.
std::vector<render::NearbyBuilds> nearest_builds(const snapshot::Snapshot& snap,
                                                 std::string_view project,
                                                 const core::ViewSelector& wanted) {
  std::vector<core::ViewSelector> cells;
  std::vector<std::vector<core::Version>> versions;
  std::vector<std::set<std::string>> pythons;
  std::map<std::string, std::size_t> index;
  for (const auto* f : snap.files_of(project)) {
    if (f->kind != core::DistKind::wheel || f->yanked || !f->hints.selects()) continue;
    const auto& h = f->hints;
    core::ViewSelector cell;
    cell.backend = h.backend;
    cell.cuda_major = h.cuda_major;
    cell.cuda_minor = h.cuda_minor;
    cell.rocm_major = h.rocm_major;
    cell.rocm_minor = h.rocm_minor;
    cell.torch = h.torch;
    cell.cxx11_abi = h.cxx11_abi;
    const auto [it, added] = index.emplace(cell.path(), cells.size());
    if (added) {
      cells.push_back(cell);
      versions.emplace_back();
      pythons.emplace_back();
    }
    auto v = core::Version::parse(f->version);
    if (v) {
      auto pub = core::Version::parse(v->public_str());
      if (pub) versions[it->second].push_back(*pub);
    }
    for (const auto& py : f->tags.python_tags()) pythons[it->second].insert(py);
  }
  std::vector<render::NearbyBuilds> out;
  for (const std::size_t i : core::nearest_cells(wanted, cells)) {
    if (out.size() == kMaxNearest) break;
    auto& vs = versions[i];
    std::sort(vs.begin(), vs.end(), [](const auto& a, const auto& b) { return a > b; });
    vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
    render::NearbyBuilds n;
    n.view = cells[i];
    for (const auto& v : vs) n.versions.push_back(v.str());
    n.python.assign(pythons[i].begin(), pythons[i].end());
    std::stable_sort(n.python.begin(), n.python.end(), python_tag_before);
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

// /api/resolve?torch=...[&cuda=...][&hip=...|&rocm=...][&abi=...][&project=...]
Response handle_resolve(const Request& req, Context& ctx) {
  const snapshot::Snapshot& snap = ctx.snapshot;
  const std::string torch = req.query_param("torch");
  const auto cuda = req.find_query_param("cuda");
  auto hip = req.find_query_param("hip");
  const auto rocm = req.find_query_param("rocm");
  if (hip && rocm && *hip != *rocm) {
    return api_error(make_error(Errc::invalid, "hip= and rocm= differ: give one of them"));
  }
  if (!hip) hip = rocm;
  // An empty abi= is what a form sends for "not chosen": treated as absent, as before.
  const std::string abi = req.query_param("abi");
  core::TorchQuery query;
  query.version = torch;
  if (cuda) query.cuda = *cuda;
  if (hip) query.hip = *hip;
  if (!abi.empty()) query.abi = abi;
  auto resolved = core::resolve_torch(query);
  if (!resolved) return api_error(resolved.error());

  render::Resolution r;
  r.torch = torch;
  r.selector = resolved->selector;
  r.backend_source = std::string(core::backend_source_name(resolved->source));
  r.base_url = base_url(req);
  r.notes = std::move(resolved->notes);
  r.sole_index =
      ctx.env.upstreams != nullptr && core::serves_every_name(ctx.env.upstreams->configs());
  if (const auto project = req.query_param("project"); !project.empty()) {
    if (!core::is_valid_project_name(project)) {
      return api_error(make_error(Errc::invalid, "invalid project name"));
    }
    const std::string normalized = core::normalize_name(project);
    // Unknown names get a 404 of their own, never an answer about another index.
    if (snap.find_project(normalized) == nullptr) {
      return api_error(make_error(Errc::not_found, "no such project: " + normalized));
    }
    r.project = normalized;
    r.version = newest_wheel_version(snap.view_files_of(r.selector, normalized));
    if (!r.version) {
      const auto nearest = nearest_builds(snap, normalized, r.selector);
      // The selector always names the torch series, so the path is never empty.
      const std::string path = r.selector.path();
      std::string message =
          "no build of " + normalized + " for " + path + " (view /" + path + "/simple/)";
      message += nearest.empty()
                     ? ": " + normalized + " has no wheel built for a torch/CUDA combination"
                     : "; the nearest builds that exist are listed in \"nearest\"";
      return api_error(make_error(Errc::not_found, message),
                       render::render_no_build(r, message, nearest));
    }
  }
  Response out;
  out.set("Content-Type", "application/json");
  out.body = render::render_resolution(r);
  return out;
}

}  // namespace wf::handlers
