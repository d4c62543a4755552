#pragma once
// An immutable in-memory picture of the catalog that answers every read without touching
// SQLite: file and project lookups, tokens, and rendered simple pages (HTML, JSON and their
// gzip form), rendered on first use and kept for the snapshot's lifetime. A change to the
// catalog produces a new snapshot; dropping the old one is the cache invalidation.
// Lookups are thread-safe; page rendering is CPU-only (no I/O).

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/records.hpp"

namespace wf::snapshot {

/// A rendered page with everything needed to answer conditional and compressed requests.
struct Page {
  std::string body;
  std::string gzip;  ///< gzip of body
  std::string etag;  ///< strong ETag, quoted
  core::PageFormat format = core::PageFormat::html_legacy;
};

/// A page of `body`: its gzip and its ETag (the first 32 hex digits of the body's sha256).
[[nodiscard]] std::shared_ptr<Page> make_page(
    std::string body, core::PageFormat format = core::PageFormat::html_legacy);

/// Page-cache counters of all snapshots in this process (for metrics).
struct CacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
};
[[nodiscard]] CacheStats cache_stats();

/// Indices (ascending: listing order) of the files a variant view lists among one project's
/// `files` (in listing order; public_versions[k] is files[k]'s version without its local
/// label): generic files as in /simple/, of the variant builds the best one per (public version,
/// python, abi, platform tags); sdists left out when the project has variant builds.
[[nodiscard]] std::vector<std::size_t> select_view_files(
    const core::ViewSelector& view, std::span<const core::FileRecord* const> files,
    std::span<const std::string> public_versions);

class Snapshot {
 public:
  /// Indexes the catalog contents. O(files log files).
  [[nodiscard]] static std::shared_ptr<const Snapshot> build(catalog::Contents contents);

  /// The snapshot after a change to one project: `prev` with that project replaced by (or
  /// added from, or removed when absent from) `contents`, the result of Catalog::load_project,
  /// whose tokens and generation it takes. Every other project's data is shared with `prev`,
  /// and so are the parts of the lookup indexes the project has no entry in: an upload into a
  /// large index costs about that project's files, not the catalog's.
  [[nodiscard]] static std::shared_ptr<const Snapshot> update(const Snapshot& prev,
                                                              std::string_view project,
                                                              catalog::Contents contents);

  /// The snapshot after changes to several projects at once, loaded together: `contents` is
  /// Catalog::load_projects(projects)'s result, sorted as it answers (a project it does not
  /// hold is removed), whose tokens and generation it takes. One copy of the project list and
  /// the indexes for all of them. nullptr when `projects` is empty.
  [[nodiscard]] static std::shared_ptr<const Snapshot> update(const Snapshot& prev,
                                                              std::vector<std::string> projects,
                                                              catalog::Contents contents);

  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  ~Snapshot();

  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  [[nodiscard]] const auth::TokenIndex& tokens() const { return tokens_; }
  [[nodiscard]] std::size_t file_count() const { return file_count_; }
  [[nodiscard]] std::size_t project_count() const { return projects_.size(); }

  /// The file with this exact name, or nullptr. Damaged files are not found here (nor listed
  /// on any page): see find_damaged().
  [[nodiscard]] const core::FileRecord* find_file(std::string_view filename) const;
  /// A file (not a damaged one) with these bytes (lower-case hex sha256), or nullptr; when
  /// several names hold the same bytes, one of them.
  [[nodiscard]] const core::FileRecord* find_file_by_sha256(std::string_view sha256) const;
  /// The damaged file (FileRecord::damaged) with this exact name, or nullptr.
  [[nodiscard]] const core::FileRecord* find_damaged(std::string_view filename) const;
  /// The project with this normalized name, or nullptr.
  [[nodiscard]] const core::ProjectRecord* find_project(std::string_view normalized) const;

  /// The root list of all projects.
  [[nodiscard]] std::shared_ptr<const Page> root_page(core::PageFormat format) const;
  /// A project's page, or nullptr when the project does not exist.
  [[nodiscard]] std::shared_ptr<const Page> project_page(std::string_view normalized,
                                                         core::PageFormat format) const;

  /// Root list of a variant view: the projects with at least one file in the view.
  /// `prefix` is the URL path up to and including "simple/".
  [[nodiscard]] std::shared_ptr<const Page> view_root_page(const core::ViewSelector& view,
                                                           core::PageFormat format) const;
  /// A project's page in a variant view (docs/views.md): generic files as
  /// in /simple/, and of the variant builds only the best one per (public version, python,
  /// abi, platform tags).
  /// An existing project with nothing in the view gets an empty page (so that a client does
  /// not fall through to another index); nullptr when the project does not exist.
  [[nodiscard]] std::shared_ptr<const Page> view_project_page(const core::ViewSelector& view,
                                                              std::string_view normalized,
                                                              core::PageFormat format) const;

  /// A release's index-level `{name}-{version}-variants.json` (PEP 825, docs/variants.md),
  /// made from its variant wheels that are not yanked; nullptr when the project has no
  /// release of that name with such a wheel. Project pages link it with its sha256.
  [[nodiscard]] std::shared_ptr<const Page> variants_json(std::string_view normalized,
                                                          std::string_view filename) const;

  /// The coverage document of /api/projects/<name>/variants (JSON), nullptr when unknown.
  [[nodiscard]] std::shared_ptr<const Page> variants_page(std::string_view normalized) const;

  /// Every project, sorted by normalized name.
  [[nodiscard]] std::vector<const core::ProjectRecord*> projects() const;
  /// A project's files in listing order (version, then file name); empty when unknown.
  [[nodiscard]] std::vector<const core::FileRecord*> files_of(std::string_view normalized) const;
  /// The files a variant view lists for a project (as view_project_page does), listing order.
  [[nodiscard]] std::vector<const core::FileRecord*> view_files_of(
      const core::ViewSelector& view, std::string_view normalized) const;

  /// Any other page derived from this snapshot (the web UI's), rendered on first use under
  /// `key` and cached like the simple pages for the snapshot's lifetime (up to a bound on
  /// distinct keys; past it, pages are rendered for each call). `render` runs unlocked.
  [[nodiscard]] std::shared_ptr<const Page> derived_page(
      const std::string& key, const std::function<std::string()>& render) const;

  /// Something derived from one file (the web UI's rendered project description, read from
  /// its METADATA), made by `make` on first use under (`kind`, file) and kept with the file's
  /// project: it lives while the project is unchanged, across every snapshot that shares the
  /// project's data, and goes with it. `file` must be one of this snapshot's (find_file,
  /// files_of); otherwise the value is made and not kept. `make` runs unlocked and may block
  /// (read the store): call it from a worker.
  [[nodiscard]] std::shared_ptr<const std::string> file_derived(
      const core::FileRecord& file, std::string_view kind,
      const std::function<std::string()>& make) const;

 private:
  Snapshot() = default;
  /// The page under `key`, rendered and cached on first use. `derived`: a derived_page (its
  /// own key space and bound).
  std::shared_ptr<const Page> cached(const std::string& key, core::PageFormat format,
                                     const std::function<std::string()>& render,
                                     bool derived = false) const;

  /// One project and its files; immutable, shared by the snapshots it did not change in.
  struct ProjectData;
  /// Files by name and by digest, projects by name: in parts shared between snapshots.
  struct Indexes;
  void index();
  /// update()'s work for one project, on this snapshot while it is being made.
  void apply(std::string_view project, std::optional<core::ProjectRecord> record,
             std::vector<core::FileRecord> files);

  std::uint64_t generation_ = 0;
  std::vector<std::shared_ptr<const ProjectData>> projects_;  // sorted by name
  std::size_t file_count_ = 0;
  std::unique_ptr<Indexes> indexes_;
  [[nodiscard]] const ProjectData* project_data(std::string_view normalized) const;
  /// Indices into the project's files chosen for a view.
  static std::vector<std::size_t> select(const core::ViewSelector& view, const ProjectData& p);
  static std::vector<std::string> versions_of(const std::vector<const core::FileRecord*>& files);
  auth::TokenIndex tokens_;

  // Tells this snapshot's pages apart in the network threads' own copies of the cache
  // (cached()); 0: none kept.
  std::uint64_t serial_ = 0;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Page>> cache_;
  mutable std::size_t derived_pages_ = 0;
};

}  // namespace wf::snapshot
