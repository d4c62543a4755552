#include "wheelforge/snapshot/snapshot.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <iterator>
#include <map>
#include <unordered_map>

#include "snapshot/parted_index.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/render/variants.hpp"

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

// A release's index-level variants.json (PEP 825, docs/variants.md, "variants.json").
struct VariantsDoc {
  std::string version;
  std::string filename;
  std::string body;
  std::string sha256;
};

// `{name}-{version}-variants.json`, name and version as a wheel's file name writes them.
std::string variants_filename(const std::string& project, const std::string& version) {
  std::string name = project;
  std::replace(name.begin(), name.end(), '-', '_');
  return name + "-" + version + "-variants.json";
}

// A variant wheel listed for installers: not yanked (a yanked variant leaves the file), not
// damaged (damaged files are on no page).
bool live_variant(const core::FileRecord& f) {
  return f.variant.has_value() && !f.yanked;
}

// One document per version with a live variant wheel, made from those wheels' variants: what
// the catalog holds now, so the document follows every upload, yank and deletion.
std::vector<VariantsDoc> variants_docs(const std::string& project,
                                       const std::vector<core::FileRecord>& files) {
  std::vector<VariantsDoc> docs;
  std::map<std::string, std::map<std::string, const core::WheelVariant*>> by_version;
  std::vector<std::string> order;
  for (const auto& f : files) {
    if (!live_variant(f)) continue;
    auto [it, added] = by_version.try_emplace(f.version);
    if (added) order.push_back(f.version);
    it->second.try_emplace(f.variant->label, &*f.variant);
  }
  for (const auto& version : order) {
    std::vector<core::WheelVariant> variants;
    for (const auto& [label, v] : by_version[version]) variants.push_back(*v);
    VariantsDoc doc;
    doc.version = version;
    doc.filename = variants_filename(project, version);
    doc.body = render::render_variants_json(variants);
    doc.sha256 = crypto::sha256_hex(doc.body);
    docs.push_back(std::move(doc));
  }
  return docs;
}

// The links of the documents of the versions whose variant wheels the page lists.
std::vector<render::ExtraLink> variants_links(const std::vector<VariantsDoc>& docs,
                                              const std::vector<const core::FileRecord*>& listed) {
  std::vector<render::ExtraLink> links;
  for (const auto& doc : docs) {
    const bool shown = std::any_of(listed.begin(), listed.end(), [&](const core::FileRecord* f) {
      return f->version == doc.version && live_variant(*f);
    });
    if (shown)
      links.push_back(render::ExtraLink{doc.filename, doc.filename, doc.sha256, doc.body.size()});
  }
  return links;
}

// The page cache's counters, one pair per thread (up to kCounterShards, then shared), each on
// a cache line of its own: every page request counts, from every network thread at once.
struct alignas(64) CounterShard {
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
};
constexpr std::size_t kCounterShards = 64;
std::array<CounterShard, kCounterShards> g_counters;
std::atomic<std::size_t> g_next_counter{0};

CounterShard& counters() {
  thread_local CounterShard& mine =
      g_counters[g_next_counter.fetch_add(1, std::memory_order_relaxed) % kCounterShards];
  return mine;
}
void count_hit() {
  counters().hits.fetch_add(1, std::memory_order_relaxed);
}
void count_miss() {
  counters().misses.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<std::uint64_t> g_next_serial{1};

/// Each thread's own references to the pages it found in the current snapshot's cache, by
/// format (and one map for derived pages): found again without the cache's lock, and handed
/// out through a reference count of this thread's own, so that threads serving the same page
/// do not contend for one lock and one counter on every request. They hold the pages of one
/// snapshot, the last one the thread asked, and at most kMaxThreadPages per map; a thread keeps
/// those of an older snapshot alive until it next asks for a page (never copies of them).
struct ThreadPages {
  std::uint64_t serial = 0;
  std::array<std::unordered_map<std::string, std::shared_ptr<const Page>>, 4> pages;
};
constexpr std::size_t kMaxThreadPages = 64;
thread_local ThreadPages t_pages;

std::size_t thread_map(core::PageFormat format, bool derived) {
  return derived ? 3 : static_cast<std::size_t>(format);
}

}  // namespace

std::shared_ptr<Page> make_page(std::string body, core::PageFormat format) {
  auto page = std::make_shared<Page>();
  page->gzip = render::gzip(body);
  page->etag = "\"" + crypto::sha256_hex(body).substr(0, 32) + "\"";
  page->body = std::move(body);
  page->format = format;
  return page;
}

CacheStats cache_stats() {
  CacheStats out{0, 0};
  for (const auto& shard : g_counters) {
    out.hits += shard.hits.load(std::memory_order_relaxed);
    out.misses += shard.misses.load(std::memory_order_relaxed);
  }
  return out;
}

struct Snapshot::ProjectData {
  core::ProjectRecord record;
  std::vector<core::FileRecord> files;       // in version order, then by file name
  std::vector<std::string> versions;         // the distinct versions, in that order
  std::vector<std::string> public_versions;  // per file: public version (no local label)
  std::vector<core::FileRecord> damaged;     // withdrawn files: on no page, URLs answer 503
  // Values derived from single files (file_derived), keyed "kind|filename": bounded by the
  // project's files times the few kinds there are.
  mutable std::mutex derived_mu;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::string>> derived;

  ProjectData(core::ProjectRecord r, std::vector<core::FileRecord> list) : record(std::move(r)) {
    for (auto& f : list) (f.damaged ? damaged : files).push_back(std::move(f));
    // Parse each version once, then order the files by (version, file name).
    std::vector<std::optional<core::Version>> parsed(files.size());
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (auto v = core::Version::parse(files[i].version)) parsed[i] = std::move(*v);
    }
    std::vector<std::size_t> order(files.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (parsed[a] && parsed[b] && !(*parsed[a] == *parsed[b])) return *parsed[a] < *parsed[b];
      return files[a].filename < files[b].filename;
    });
    std::vector<core::FileRecord> sorted;
    sorted.reserve(files.size());
    public_versions.reserve(files.size());
    for (const std::size_t i : order) {
      public_versions.push_back(parsed[i] ? parsed[i]->public_str() : files[i].version);
      sorted.push_back(std::move(files[i]));
    }
    files = std::move(sorted);
    std::vector<const core::FileRecord*> pointers;
    pointers.reserve(files.size());
    for (const auto& f : files) pointers.push_back(&f);
    versions = versions_of(pointers);
  }
};

struct Snapshot::Indexes {
  PartedIndex<core::FileRecord> file_by_name;
  PartedIndex<core::FileRecord, /*kRepeats=*/true> file_by_sha256;
  PartedIndex<core::FileRecord> damaged_by_name;
  PartedIndex<ProjectData> project_by_name;

  // Calls fn(index, key, value) for every entry `p` has in the indexes (index() gathers the
  // same entries for a whole build, per index).
  template <typename Fn>
  void each(const ProjectData& p, Fn fn) {
    fn(project_by_name, std::string_view(p.record.name), &p);
    for (const auto& f : p.files) {
      fn(file_by_name, std::string_view(f.filename), &f);
      fn(file_by_sha256, std::string_view(f.sha256), &f);
    }
    for (const auto& f : p.damaged) fn(damaged_by_name, std::string_view(f.filename), &f);
  }
  void add(const ProjectData& p) {
    each(p, [](auto& index, std::string_view key, const auto* value) { index.add(key, value); });
  }
  void remove(const ProjectData& p) {
    each(p, [](auto& index, std::string_view key, const auto* value) { index.remove(key, value); });
  }
  [[nodiscard]] bool crowded() const {
    return file_by_name.crowded() || file_by_sha256.crowded() || damaged_by_name.crowded() ||
           project_by_name.crowded();
  }
};

Snapshot::~Snapshot() = default;

void Snapshot::index() {
  file_count_ = 0;
  for (const auto& p : projects_) file_count_ += p->files.size();
  // The entries Indexes::each() lists, gathered per index, then each index filled part by part.
  indexes_ = std::make_unique<Indexes>();
  std::vector<std::pair<std::string_view, const core::FileRecord*>> by_name;
  std::vector<std::pair<std::string_view, const core::FileRecord*>> by_sha256;
  std::vector<std::pair<std::string_view, const core::FileRecord*>> damaged;
  std::vector<std::pair<std::string_view, const ProjectData*>> projects;
  by_name.reserve(file_count_);
  by_sha256.reserve(file_count_);
  projects.reserve(projects_.size());
  for (const auto& p : projects_) {
    projects.emplace_back(p->record.name, p.get());
    for (const auto& f : p->files) {
      by_name.emplace_back(f.filename, &f);
      by_sha256.emplace_back(f.sha256, &f);
    }
    for (const auto& f : p->damaged) damaged.emplace_back(f.filename, &f);
  }
  indexes_->file_by_name.assign(by_name);
  indexes_->file_by_sha256.assign(by_sha256);
  indexes_->damaged_by_name.assign(damaged);
  indexes_->project_by_name.assign(projects);
}

std::shared_ptr<const Snapshot> Snapshot::build(catalog::Contents contents) {
  std::shared_ptr<Snapshot> s(new Snapshot());
  s->serial_ = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  s->generation_ = contents.generation;
  s->tokens_ = auth::TokenIndex(std::move(contents.tokens));
  // Hand each project its files: both lists come sorted by project name (the catalog's
  // order), so one merge pass does it; other input is sorted first.
  auto& projects = contents.projects;
  auto& files = contents.files;
  const auto by_name = [](const core::ProjectRecord& a, const core::ProjectRecord& b) {
    return a.name < b.name;
  };
  const auto by_project = [](const core::FileRecord& a, const core::FileRecord& b) {
    return a.project < b.project;
  };
  if (!std::is_sorted(projects.begin(), projects.end(), by_name)) {
    std::sort(projects.begin(), projects.end(), by_name);
  }
  if (!std::is_sorted(files.begin(), files.end(), by_project)) {
    std::stable_sort(files.begin(), files.end(), by_project);
  }
  s->projects_.reserve(projects.size());
  std::size_t next = 0;
  for (auto& p : projects) {
    // Files of projects without a project row are left out, as no page could list them.
    while (next < files.size() && files[next].project < p.name) ++next;
    std::vector<core::FileRecord> mine;
    while (next < files.size() && files[next].project == p.name) {
      mine.push_back(std::move(files[next++]));
    }
    s->projects_.push_back(std::make_shared<const ProjectData>(std::move(p), std::move(mine)));
  }
  files.clear();
  files.shrink_to_fit();
  s->index();
  return s;
}

std::shared_ptr<const Snapshot> Snapshot::update(const Snapshot& prev, std::string_view project,
                                                 catalog::Contents contents) {
  return update(prev, std::vector<std::string>{std::string(project)}, std::move(contents));
}

std::shared_ptr<const Snapshot> Snapshot::update(const Snapshot& prev,
                                                 std::vector<std::string> projects,
                                                 catalog::Contents contents) {
  if (projects.empty()) return nullptr;
  std::sort(projects.begin(), projects.end());
  projects.erase(std::unique(projects.begin(), projects.end()), projects.end());
  auto& records = contents.projects;  // sorted by name, as Catalog::load_projects answers
  auto& files = contents.files;       // sorted by project
  // Each project's record and run of files, all found before any is moved out.
  struct Found {
    core::ProjectRecord* record = nullptr;
    std::vector<core::FileRecord>::iterator first, last;
  };
  std::vector<Found> found;
  found.reserve(projects.size());
  for (const auto& project : projects) {
    Found f;
    const auto r = std::lower_bound(
        records.begin(), records.end(), project,
        [](const core::ProjectRecord& p, std::string_view name) { return p.name < name; });
    if (r != records.end() && r->name == project) f.record = &*r;
    f.first = std::lower_bound(
        files.begin(), files.end(), project,
        [](const core::FileRecord& file, std::string_view name) { return file.project < name; });
    f.last = f.first;
    while (f.last != files.end() && f.last->project == project) ++f.last;
    found.push_back(f);
  }
  std::shared_ptr<Snapshot> s(new Snapshot());
  s->serial_ = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  s->generation_ = contents.generation;
  s->tokens_ = auth::TokenIndex(std::move(contents.tokens));
  s->projects_ = prev.projects_;
  s->file_count_ = prev.file_count_;
  s->indexes_ = std::make_unique<Indexes>(*prev.indexes_);
  for (std::size_t i = 0; i < projects.size(); ++i) {
    std::optional<core::ProjectRecord> record;
    if (found[i].record != nullptr) record = std::move(*found[i].record);
    s->apply(projects[i], std::move(record),
             std::vector<core::FileRecord>(std::make_move_iterator(found[i].first),
                                           std::make_move_iterator(found[i].last)));
  }
  // Parts sized for a much smaller catalog: index it again, sized for this one.
  if (s->indexes_->crowded()) s->index();
  return s;
}

void Snapshot::apply(std::string_view project, std::optional<core::ProjectRecord> record,
                     std::vector<core::FileRecord> files) {
  const auto at = std::lower_bound(projects_.begin(), projects_.end(), project,
                                   [](const std::shared_ptr<const ProjectData>& p,
                                      std::string_view name) { return p->record.name < name; });
  const bool present = at != projects_.end() && (*at)->record.name == project;
  if (present) {
    indexes_->remove(**at);
    file_count_ -= (*at)->files.size();
  }
  if (!record) {
    if (present) projects_.erase(at);
    return;
  }
  auto data = std::make_shared<const ProjectData>(std::move(*record), std::move(files));
  indexes_->add(*data);
  file_count_ += data->files.size();
  if (present) {
    *at = std::move(data);
  } else {
    projects_.insert(at, std::move(data));
  }
}

const core::FileRecord* Snapshot::find_file(std::string_view filename) const {
  return indexes_->file_by_name.find(filename);
}

const core::FileRecord* Snapshot::find_file_by_sha256(std::string_view sha256) const {
  return indexes_->file_by_sha256.find(sha256);
}

const core::FileRecord* Snapshot::find_damaged(std::string_view filename) const {
  return indexes_->damaged_by_name.find(filename);
}

const Snapshot::ProjectData* Snapshot::project_data(std::string_view normalized) const {
  return indexes_->project_by_name.find(normalized);
}

const core::ProjectRecord* Snapshot::find_project(std::string_view normalized) const {
  const ProjectData* p = project_data(normalized);
  return p == nullptr ? nullptr : &p->record;
}

std::shared_ptr<const Page> Snapshot::cached(const std::string& key, core::PageFormat format,
                                             const std::function<std::string()>& render,
                                             bool derived) const {
  // The "u" prefix keeps derived pages' keys apart from the simple pages'.
  auto& mine = t_pages.pages[thread_map(format, derived)];
  if (serial_ != 0 && t_pages.serial == serial_) {
    if (const auto it = mine.find(key); it != mine.end()) {
      count_hit();
      return it->second;
    }
  }
  const auto keep_here = [&](const std::shared_ptr<const Page>& page) {
    if (serial_ == 0) return;
    if (t_pages.serial != serial_) {
      for (auto& m : t_pages.pages) m.clear();
      t_pages.serial = serial_;
    }
    if (mine.size() >= kMaxThreadPages) mine.clear();
    // The thread's own reference count, which keeps the shared one's reference.
    auto holder = std::make_shared<std::shared_ptr<const Page>>(page);
    mine.emplace(key, std::shared_ptr<const Page>(holder, holder->get()));
  };
  const std::string full_key = derived ? "u" + key : format_key(format) + key;
  {
    std::lock_guard lock(cache_mu_);
    const auto it = cache_.find(full_key);
    if (it != cache_.end()) {
      count_hit();
      keep_here(it->second);
      return it->second;
    }
  }
  count_miss();
  std::shared_ptr<const Page> page = make_page(render(), format);
  std::lock_guard lock(cache_mu_);
  // Derived pages have their own, smaller bound: their keys come partly from request headers,
  // and a flood of them must not crowd the simple pages out of the cache.
  if (cache_.size() < kMaxCachedPages && (!derived || derived_pages_ < kMaxDerivedPages) &&
      cache_.emplace(full_key, page).second) {
    if (derived) ++derived_pages_;
    keep_here(page);
  }
  return page;
}

std::shared_ptr<const Page> Snapshot::root_page(core::PageFormat format) const {
  return cached("/simple/", format, [&] {
    std::vector<std::string> names;
    names.reserve(projects_.size());
    for (const auto& p : projects_) names.push_back(p->record.name);
    return render::render_root(format, names, "/simple/");
  });
}

std::shared_ptr<const Page> Snapshot::project_page(std::string_view normalized,
                                                   core::PageFormat format) const {
  const ProjectData* found = project_data(normalized);
  if (found == nullptr) return nullptr;
  const ProjectData& p = *found;
  return cached("/simple/" + p.record.name + "/", format, [&] {
    render::ProjectPage page;
    page.name = p.record.name;
    page.versions = p.versions;
    page.files.reserve(p.files.size());
    for (const auto& f : p.files) page.files.push_back(&f);
    page.extras = variants_links(variants_docs(p.record.name, p.files), page.files);
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

std::vector<std::size_t> Snapshot::select(const core::ViewSelector& view, const ProjectData& p) {
  std::vector<const core::FileRecord*> files;
  files.reserve(p.files.size());
  for (const auto& f : p.files) files.push_back(&f);
  return select_view_files(view, files, p.public_versions);
}

std::vector<std::size_t> select_view_files(const core::ViewSelector& view,
                                           std::span<const core::FileRecord* const> files,
                                           std::span<const std::string> public_versions) {
  const std::size_t n = files.size();
  const bool has_variants = std::any_of(
      files.begin(), files.end(), [](const core::FileRecord* f) { return f->hints.selects(); });
  // Wheels compete per (public version, python, abi, platform). A group made only of generic
  // wheels is listed whole, exactly as /simple/ lists it; a group with any variant build goes
  // through selection, so pip sees at most one build per tag set.
  std::unordered_map<std::string, bool> group_has_variant;
  std::vector<std::string> keys(n);
  for (std::size_t k = 0; k < n; ++k) {
    const core::FileRecord& f = *files[k];
    if (f.kind != core::DistKind::wheel) continue;
    keys[k] = public_versions[k] + '|' + f.tags.python_tag + '|' + f.tags.abi_tag + '|' +
              f.tags.platform_tag;
    // A variant wheel whose properties say nothing a view selects on (x86_64 :: level) is a
    // build of its own, listed beside the others, as in /simple/ (docs/variants.md).
    if (f.variant && !f.hints.selects()) keys[k] += '|' + f.variant->label;
    group_has_variant[keys[k]] |= f.hints.selects();
  }
  std::vector<core::Candidate> candidates;
  std::vector<std::size_t> candidate_file;
  std::vector<std::size_t> chosen;
  for (std::size_t k = 0; k < n; ++k) {
    const core::FileRecord& f = *files[k];
    if (f.kind != core::DistKind::wheel) {
      // A source distribution of a project that ships variant builds would let pip compile it
      // for whatever torch happens to be installed: in a view it is left out.
      if (!has_variants) chosen.push_back(k);
      continue;
    }
    if (!group_has_variant[keys[k]]) {
      chosen.push_back(k);
      continue;
    }
    core::Candidate c;
    c.hints = f.hints;
    c.group_key = keys[k];
    c.build_tag = f.tags.build_tag.value_or("");
    c.upload_time = f.upload_time;
    c.filename = f.filename;
    c.yanked = f.yanked.has_value();
    c.linux_binary =
        f.tags.platform_tag.starts_with("linux_") || f.tags.platform_tag.starts_with("manylinux");
    if (f.binaries) c.torch_from = f.binaries->torch_from;
    candidates.push_back(std::move(c));
    candidate_file.push_back(k);
  }
  for (const std::size_t c : core::select_for_view(view, candidates)) {
    chosen.push_back(candidate_file[c]);
  }
  // Back to the project's listing order (by version, then file name).
  std::vector<std::size_t> ordered;
  ordered.reserve(chosen.size());
  std::unordered_map<std::size_t, bool> in(chosen.size());
  for (const std::size_t i : chosen) in[i] = true;
  for (std::size_t i = 0; i < n; ++i) {
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
      if (!select(view, *projects_[p]).empty()) names.push_back(projects_[p]->record.name);
    }
    return render::render_root(format, names, prefix);
  });
}

std::shared_ptr<const Page> Snapshot::view_project_page(const core::ViewSelector& view,
                                                        std::string_view normalized,
                                                        core::PageFormat format) const {
  const ProjectData* found = project_data(normalized);
  if (found == nullptr) return nullptr;
  const ProjectData& data = *found;
  return cached("/" + view.path() + "/simple/" + data.record.name + "/", format, [&] {
    render::ProjectPage page;
    page.name = data.record.name;
    for (const std::size_t i : select(view, data)) page.files.push_back(&data.files[i]);
    page.versions = versions_of(page.files);
    page.extras = variants_links(variants_docs(data.record.name, data.files), page.files);
    return render::render_project(format, page);
  });
}

std::shared_ptr<const Page> Snapshot::variants_json(std::string_view normalized,
                                                    std::string_view filename) const {
  const ProjectData* found = project_data(normalized);
  if (found == nullptr) return nullptr;
  const ProjectData& p = *found;
  if (!filename.ends_with("-variants.json")) return nullptr;
  auto docs = variants_docs(p.record.name, p.files);
  const auto doc = std::find_if(docs.begin(), docs.end(),
                                [&](const VariantsDoc& d) { return d.filename == filename; });
  if (doc == docs.end()) return nullptr;
  return cached("/simple/" + p.record.name + "/" + doc->filename, core::PageFormat::json_v1,
                [&] { return std::move(doc->body); });
}

std::shared_ptr<const Page> Snapshot::variants_page(std::string_view normalized) const {
  const ProjectData* found = project_data(normalized);
  if (found == nullptr) return nullptr;
  const ProjectData& p = *found;
  return cached("/api/projects/" + p.record.name + "/variants", core::PageFormat::json_v1, [&] {
    std::vector<render::VersionFiles> versions;
    for (std::size_t i = 0; i < p.files.size(); ++i) {
      if (versions.empty() || versions.back().version != p.public_versions[i]) {
        versions.push_back(render::VersionFiles{p.public_versions[i], {}});
      }
      versions.back().files.push_back(&p.files[i]);
    }
    return render::render_variants(p.record.name, versions);
  });
}

std::vector<const core::ProjectRecord*> Snapshot::projects() const {
  std::vector<const core::ProjectRecord*> out;
  out.reserve(projects_.size());
  for (const auto& p : projects_) out.push_back(&p->record);
  return out;
}

std::vector<const core::FileRecord*> Snapshot::files_of(std::string_view normalized) const {
  std::vector<const core::FileRecord*> out;
  const ProjectData* p = project_data(normalized);
  if (p == nullptr) return out;
  for (const auto& f : p->files) out.push_back(&f);
  return out;
}

std::vector<const core::FileRecord*> Snapshot::view_files_of(const core::ViewSelector& view,
                                                             std::string_view normalized) const {
  std::vector<const core::FileRecord*> out;
  const ProjectData* p = project_data(normalized);
  if (p == nullptr) return out;
  for (const std::size_t i : select(view, *p)) out.push_back(&p->files[i]);
  return out;
}

std::shared_ptr<const std::string> Snapshot::file_derived(
    const core::FileRecord& file, std::string_view kind,
    const std::function<std::string()>& make) const {
  const ProjectData* project = project_data(file.project);
  if (project == nullptr || find_file(file.filename) != &file) {
    return std::make_shared<const std::string>(make());
  }
  const ProjectData& data = *project;
  std::string key = std::string(kind) + "|" + file.filename;
  {
    std::lock_guard lock(data.derived_mu);
    const auto it = data.derived.find(key);
    if (it != data.derived.end()) {
      count_hit();
      return it->second;
    }
  }
  count_miss();
  auto value = std::make_shared<const std::string>(make());
  std::lock_guard lock(data.derived_mu);
  return data.derived.emplace(std::move(key), std::move(value)).first->second;
}

std::shared_ptr<const Page> Snapshot::derived_page(
    const std::string& key, const std::function<std::string()>& render) const {
  return cached(key, core::PageFormat::html_v1, render, /*derived=*/true);
}

}  // namespace wf::snapshot
