#include "wheelforge/snapshot/snapshot.hpp"

#include <algorithm>

#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/simple.hpp"

namespace wf::snapshot {
namespace {

// Pages are cached per (key, format); keys are bounded by the projects and views that exist,
// but a cap keeps a flood of distinct view URLs from growing memory without bound.
constexpr std::size_t kMaxCachedPages = 20'000;

std::string format_key(core::PageFormat f) {
  switch (f) {
    case core::PageFormat::html_legacy: return "h";
    case core::PageFormat::html_v1: return "v";
    case core::PageFormat::json_v1: return "j";
  }
  return "?";
}

}  // namespace

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
  for (std::size_t i = 0; i < s->files_.size(); ++i) {
    if (auto v = core::Version::parse(s->files_[i].version)) parsed[i] = std::move(*v);
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
    auto& versions = s->project_versions_[p];
    for (const std::size_t i : idx) {
      if (versions.empty() || versions.back() != s->files_[i].version) {
        versions.push_back(s->files_[i].version);
      }
    }
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
    if (it != cache_.end()) return it->second;
  }
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

}  // namespace wf::snapshot
