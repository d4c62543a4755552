#include "wheelforge/snapshot/snapshot.hpp"

#include <algorithm>
#include <atomic>

#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/render/simple.hpp"

namespace wf::snapshot {
namespace {

// Pages are cached per (key, format); keys are bounded by the projects and views that exist,
// but a cap keeps a flood of distinct view URLs from growing memory without bound.
constexpr std::size_t kMaxCachedPages = 20'000;
constexpr std::size_t kMaxDerivedPages = 2'000;

std::string format_key(core::PageFormat f) {
  switch (f) {
    case core::PageFormat::html_legacy:
      return "h";
    case core::PageFormat::html_v1:
      return "v";
    case core::PageFormat::json_v1:
      return "j";
  }
  return "?";
}

std::atomic<std::uint64_t> g_cache_hits{0};
std::atomic<std::uint64_t> g_cache_misses{0};

}  // namespace

CacheStats cache_stats() {
  return CacheStats{g_cache_hits.load(), g_cache_misses.load()};
}

std::shared_ptr<const Snapshot> Snapshot::build(catalog::Contents contents) {
  std::shared_ptr<Snapshot> s(new Snapshot());
  s->generation_ = contents.generation;
  s->projects_ = std::move(contents.projects);
  s->files_ = std::move(contents.files);
  s->tokens_ = auth::TokenIndex(std::move(contents.tokens));

  s->file_by_name_.reserve(s->files_.size());
  for (std::size_t i = 0; i < s->files_.size(); ++i) {
    s->file_by_name_.emplace(s->files_[i].filename, i);
  }
  s->project_by_name_.reserve(s->projects_.size());
  for (std::size_t i = 0; i < s->projects_.size(); ++i) {
    s->project_by_name_.emplace(s->projects_[i].name, i);
  }

  // Parse each version once, then order every project's files by (version, file name).
  std::vector<std::optional<core::Version>> parsed(s->files_.size());
  s->public_versions_.resize(s->files_.size());
  for (std::size_t i = 0; i < s->files_.size(); ++i) {
    if (auto v = core::Version::parse(s->files_[i].version)) {
      s->public_versions_[i] = v->public_str();
      parsed[i] = std::move(*v);
    } else {
      s->public_versions_[i] = s->files_[i].version;
    }
  }
  s->project_files_.resize(s->projects_.size());
  s->project_versions_.resize(s->projects_.size());
  for (std::size_t i = 0; i < s->files_.size(); ++i) {
    const auto it = s->project_by_name_.find(s->files_[i].project);
    if (it != s->project_by_name_.end()) s->project_files_[it->second].push_back(i);
  }
  for (std::size_t p = 0; p < s->projects_.size(); ++p) {
    auto& idx = s->project_files_[p];
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      if (parsed[a] && parsed[b] && !(*parsed[a] == *parsed[b])) return *parsed[a] < *parsed[b];
      return s->files_[a].filename < s->files_[b].filename;
    });
    std::vector<const core::FileRecord*> files;
    files.reserve(idx.size());
    for (const std::size_t i : idx) files.push_back(&s->files_[i]);
    s->project_versions_[p] = versions_of(files);
  }
  return s;
}

const core::FileRecord* Snapshot::find_file(std::string_view filename) const {
  const auto it = file_by_name_.find(filename);
  return it == file_by_name_.end() ? nullptr : &files_[it->second];
}

const core::ProjectRecord* Snapshot::find_project(std::string_view normalized) const {
  const auto it = project_by_name_.find(normalized);
  return it == project_by_name_.end() ? nullptr : &projects_[it->second];
}

std::shared_ptr<const Page> Snapshot::cached(const std::string& key, core::PageFormat format,
                                             const std::function<std::string()>& render) const {
  const std::string full_key = format_key(format) + key;
  {
    std::lock_guard lock(cache_mu_);
    const auto it = cache_.find(full_key);
    if (it != cache_.end()) {
      g_cache_hits.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  g_cache_misses.fetch_add(1, std::memory_order_relaxed);
  auto page = std::make_shared<Page>();
  page->body = render();
  page->gzip = render::gzip(page->body);
  page->etag = "\"" + crypto::sha256_hex(page->body).substr(0, 32) + "\"";
  page->format = format;
  std::lock_guard lock(cache_mu_);
  if (cache_.size() < kMaxCachedPages) cache_.emplace(full_key, page);
  return page;
}

std::shared_ptr<const Page> Snapshot::root_page(core::PageFormat format) const {
  return cached("/simple/", format, [&] {
    std::vector<std::string> names;
    names.reserve(projects_.size());
    for (const auto& p : projects_) names.push_back(p.name);
    return render::render_root(format, names, "/simple/");
  });
}

std::shared_ptr<const Page> Snapshot::project_page(std::string_view normalized,
                                                   core::PageFormat format) const {
  const auto it = project_by_name_.find(normalized);
  if (it == project_by_name_.end()) return nullptr;
  const std::size_t p = it->second;
  return cached("/simple/" + projects_[p].name + "/", format, [&] {
    render::ProjectPage page;
    page.name = projects_[p].name;
    page.versions = project_versions_[p];
    page.files.reserve(project_files_[p].size());
    for (const std::size_t i : project_files_[p]) page.files.push_back(&files_[i]);
    return render::render_project(format, page);
  });
}

std::vector<std::string> Snapshot::versions_of(const std::vector<const core::FileRecord*>& files) {
  std::vector<std::string> versions;
  for (const auto* f : files) {
    if (versions.empty() || versions.back() != f->version) versions.push_back(f->version);
  }
  return versions;
}

std::vector<std::size_t> Snapshot::select(const core::ViewSelector& view,
                                          std::size_t project) const {
  const auto& idx = project_files_[project];
  const bool has_variants =
      std::any_of(idx.begin(), idx.end(), [&](std::size_t i) { return files_[i].hints.selects(); });
  // Wheels compete per (public version, python, abi, platform). A group made only of generic
  // wheels is listed whole, exactly as /simple/ lists it; a group with any variant build goes
  // through selection, so pip sees at most one build per tag set.
  std::unordered_map<std::string, bool> group_has_variant;
  std::vector<std::string> keys(idx.size());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const auto& f = files_[idx[k]];
    if (f.kind != core::DistKind::wheel) continue;
    keys[k] = public_versions_[idx[k]] + '|' + f.tags.python_tag + '|' + f.tags.abi_tag + '|' +
              f.tags.platform_tag;
    group_has_variant[keys[k]] |= f.hints.selects();
  }
  std::vector<core::Candidate> candidates;
  std::vector<std::size_t> candidate_file;
  std::vector<std::size_t> chosen;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const auto& f = files_[idx[k]];
    if (f.kind != core::DistKind::wheel) {
      // A source distribution of a project that ships variant builds would let pip compile it
      // for whatever torch happens to be installed: in a view it is left out.
      if (!has_variants) chosen.push_back(idx[k]);
      continue;
    }
    if (!group_has_variant[keys[k]]) {
      chosen.push_back(idx[k]);
      continue;
    }
    core::Candidate c;
    c.hints = f.hints;
    c.group_key = keys[k];
    c.build_tag = f.tags.build_tag.value_or("");
    c.upload_time = f.upload_time;
    c.filename = f.filename;
    c.yanked = f.yanked.has_value();
    candidates.push_back(std::move(c));
    candidate_file.push_back(idx[k]);
  }
  for (const std::size_t c : core::select_for_view(view, candidates)) {
    chosen.push_back(candidate_file[c]);
  }
  // Back to the project's listing order (by version, then file name).
  std::vector<std::size_t> ordered;
  ordered.reserve(chosen.size());
  std::unordered_map<std::size_t, bool> in(chosen.size());
  for (const std::size_t i : chosen) in[i] = true;
  for (const std::size_t i : idx) {
    if (in.count(i) != 0U) ordered.push_back(i);
  }
  return ordered;
}

std::shared_ptr<const Page> Snapshot::view_root_page(const core::ViewSelector& view,
                                                     core::PageFormat format) const {
  const std::string prefix = "/" + view.path() + "/simple/";
  return cached(prefix, format, [&] {
    std::vector<std::string> names;
    for (std::size_t p = 0; p < projects_.size(); ++p) {
      if (!select(view, p).empty()) names.push_back(projects_[p].name);
    }
    return render::render_root(format, names, prefix);
  });
}

std::shared_ptr<const Page> Snapshot::view_project_page(const core::ViewSelector& view,
                                                        std::string_view normalized,
                                                        core::PageFormat format) const {
  const auto it = project_by_name_.find(normalized);
  if (it == project_by_name_.end()) return nullptr;
  const std::size_t p = it->second;
  return cached("/" + view.path() + "/simple/" + projects_[p].name + "/", format, [&] {
    render::ProjectPage page;
    page.name = projects_[p].name;
    for (const std::size_t i : select(view, p)) page.files.push_back(&files_[i]);
    page.versions = versions_of(page.files);
    return render::render_project(format, page);
  });
}

std::shared_ptr<const Page> Snapshot::variants_page(std::string_view normalized) const {
  const auto it = project_by_name_.find(normalized);
  if (it == project_by_name_.end()) return nullptr;
  const std::size_t p = it->second;
  return cached("/api/projects/" + projects_[p].name + "/variants", core::PageFormat::json_v1, [&] {
    std::vector<render::VersionFiles> versions;
    for (const std::size_t i : project_files_[p]) {
      if (versions.empty() || versions.back().version != public_versions_[i]) {
        versions.push_back(render::VersionFiles{public_versions_[i], {}});
      }
      versions.back().files.push_back(&files_[i]);
    }
    return render::render_variants(projects_[p].name, versions);
  });
}

std::vector<const core::FileRecord*> Snapshot::files_of(std::string_view normalized) const {
  std::vector<const core::FileRecord*> out;
  const auto it = project_by_name_.find(normalized);
  if (it == project_by_name_.end()) return out;
  for (const std::size_t i : project_files_[it->second]) out.push_back(&files_[i]);
  return out;
}

std::vector<const core::FileRecord*> Snapshot::view_files_of(const core::ViewSelector& view,
                                                             std::string_view normalized) const {
  std::vector<const core::FileRecord*> out;
  const auto it = project_by_name_.find(normalized);
  if (it == project_by_name_.end()) return out;
  for (const std::size_t i : select(view, it->second)) out.push_back(&files_[i]);
  return out;
}

std::shared_ptr<const Page> Snapshot::derived_page(
    const std::string& key, const std::function<std::string()>& render) const {
  // The "u" prefix keeps these keys apart from the simple pages'. Derived pages have their own,
  // smaller bound: their keys come partly from request headers, and a flood of them must not
  // crowd the simple pages out of the cache.
  const std::string full_key = "u" + key;
  {
    std::lock_guard lock(cache_mu_);
    const auto it = cache_.find(full_key);
    if (it != cache_.end()) {
      g_cache_hits.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  g_cache_misses.fetch_add(1, std::memory_order_relaxed);
  auto page = std::make_shared<Page>();
  page->body = render();
  page->gzip = render::gzip(page->body);
  page->etag = "\"" + crypto::sha256_hex(page->body).substr(0, 32) + "\"";
  page->format = core::PageFormat::html_v1;
  std::lock_guard lock(cache_mu_);
  if (derived_pages_ < kMaxDerivedPages && cache_.size() < kMaxCachedPages &&
      cache_.emplace(full_key, page).second) {
    ++derived_pages_;
  }
  return page;
}

}  // namespace wf::snapshot
