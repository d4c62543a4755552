#pragma once
// The web UI's pages, rendered from the mustache templates in templates/ (compiled into the
// binary). Pure functions of their arguments: no I/O, safe on any thread. Every value taken
// from the catalog, a request or a build log is HTML-escaped by the templates.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/metadata.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::ui {

/// What every page needs to know about how it was reached.
struct Site {
  std::string base_url;    ///< "https://host:port": scheme from the transport, host validated
  std::string csrf;        ///< the signed-in user's form token; empty when not signed in
  bool signed_in = false;  ///< a login session (the navigation has its log-out button)
  /// The scope of the caller's valid token ("read", "upload", "admin"), from a login session
  /// or HTTP Basic; empty for an anonymous caller. The navigation shows it.
  std::string scope;
  bool basic = false;  ///< the token came in an Authorization header (HTTP Basic or Bearer)
  /// An upstream serves every name (core::serves_every_name): the commands shown name this
  /// index alone (`--index-url`).
  bool sole_index = false;
};

/// `/` and `/?q=`: counts, the search form and its results (or the recently updated projects
/// when `query` is empty), and how to use this index from pip, uv, poetry and twine.
[[nodiscard]] std::string render_home(const snapshot::Snapshot& snap, const Site& site,
                                      std::string_view query);

/// The shell one-liner that asks /api/resolve which view and pip line fit the torch of the
/// Python on PATH: it sends torch.__version__, torch.version.cuda, torch.version.hip and the
/// C++ ABI, and curl prints the answer (also a 404's JSON with the nearest builds). `project`
/// goes in as given ("PROJECT" for a placeholder).
[[nodiscard]] std::string resolve_command(std::string_view base_url, std::string_view project);

/// What the picker of a project page asks for; values not on the project's axes are ignored.
struct Selection {
  std::string version;  ///< public version; empty: the latest
  std::string torch;    ///< torch series "2.8"
  std::string backend;  ///< "cu128", "cpu", "rocm6.4"
  std::string python;   ///< "3.12"
  /// A stable spelling of the selection, for cache keys.
  [[nodiscard]] std::string key() const;
};

/// The selection with every value that is not on the project's axes dropped (and the version
/// dropped when it does not exist): what render_project would show, in one spelling.
[[nodiscard]] Selection canonical_selection(const snapshot::Snapshot& snap,
                                            std::string_view normalized, const Selection& asked);

/// The file whose core metadata describes the version a project page shows (see
/// render_project): a wheel of it when there is one, else its sdist; nullptr for an unknown
/// project.
[[nodiscard]] const core::FileRecord* described_file(const snapshot::Snapshot& snap,
                                                     std::string_view normalized,
                                                     const Selection& selection);

/// A project page's description parts, rendered from a file's core metadata (about.cpp).
struct ProjectText {
  std::string about;        ///< render_about
  std::string description;  ///< render_description
  /// Upstream indexes known to have a project of the same name (shown as a notice: the
  /// ownership guard keeps their files off this index's pages).
  std::vector<std::string> also_upstream;
};
/// The summary and the facts: License (or License-Expression), Requires-Python, author,
/// maintainer, Project-URLs (linked only when http or https), keywords, Requires-Dist,
/// classifiers. Everything escaped.
[[nodiscard]] std::string render_about(const core::ProjectInfo& info);
/// The long description, as its Description-Content-Type says (render::description_html),
/// in its section; "" when there is none.
[[nodiscard]] std::string render_description(const core::ProjectInfo& info);

/// `/project/<normalized>/`: the project's description (`text`), versions and files, the
/// coverage matrix of the selected version and the picker with its install command. nullopt
/// when the project does not exist.
[[nodiscard]] std::optional<std::string> render_project(const snapshot::Snapshot& snap,
                                                        const Site& site,
                                                        std::string_view normalized,
                                                        const Selection& selection,
                                                        const ProjectText& text = {});

/// What `/projects/` lists: a page of the projects that have files, sorted, maybe filtered.
struct ProjectListQuery {
  std::string query;       ///< a part of the name (any spelling); empty: every project
  bool by_upload = false;  ///< newest upload first; otherwise by name
  std::size_t page = 1;    ///< 1-based; past the last page means the last
  static constexpr std::size_t kPageSize = 50;
  /// A stable spelling, for cache keys.
  [[nodiscard]] std::string key() const;
};
/// The query with its page brought into range (1 .. the number of pages) and the query cut
/// to 100 characters and trimmed.
[[nodiscard]] ProjectListQuery canonical_list_query(const snapshot::Snapshot& snap,
                                                    ProjectListQuery asked);
/// `/projects/`: one page of the list, with the search form, the sort links and the links to
/// the other pages.
[[nodiscard]] std::string render_project_list(const snapshot::Snapshot& snap, const Site& site,
                                              const ProjectListQuery& query);

/// The 404 page of an unknown project, naming up to three projects with close names ("did you
/// mean flash-attn?", core::similar_names) with links to them.
[[nodiscard]] std::string render_unknown_project(const snapshot::Snapshot& snap, const Site& site,
                                                 std::string_view normalized);

/// `/inspect/<sha256>`: a wheel's members with their sizes and, per ELF member, what it needs
/// (NEEDED, glibc floor, CUDA, torch binding) and the symbols it exports, within the bounds of
/// core::WheelInspection (each cut said so on the page).
[[nodiscard]] std::string render_file_page(const Site& site, const core::FileRecord& file,
                                           const core::WheelInspection& inspection);

/// One cell of a coverage matrix: the Python versions built for (torch series, backend).
struct CoverageCell {
  std::vector<std::string> pythons;  ///< "3.11", "3.12", "3.9+" (abi3); empty: missing
};
/// The coverage of one public version: rows are torch series (ascending), columns backends
/// (CPU, then CUDA and ROCm ascending); "" stands for "no such label" on either axis.
struct Coverage {
  std::vector<std::string> torch;
  std::vector<std::string> backends;
  std::vector<std::vector<CoverageCell>> cells;  ///< [row][column]
  std::vector<std::string> generic;              ///< file names of wheels with no variant label
};
[[nodiscard]] Coverage coverage_of(std::span<const core::FileRecord* const> files,
                                   std::string_view public_version);

/// The Python versions a wheel's tags name: "cp312" → "3.12", "py3" → "3", a cpXY with abi3
/// → "X.Y+".
[[nodiscard]] std::vector<std::string> python_versions_of(const core::FileRecord& file);

/// A message page (404, 401, 403, ...) with a heading and a sentence saying what to do.
[[nodiscard]] std::string render_message(const Site& site, int status, std::string_view title,
                                         std::string_view message, bool login_link = false);

/// `/login`: a form that takes a token. `error` is shown above the form.
[[nodiscard]] std::string render_login(const Site& site, std::string_view next,
                                       std::string_view error);

/// A build and its jobs, as the builds page lists them.
struct BuildRow {
  catalog::BuildRecord build;
  std::vector<catalog::JobRecord> jobs;
};
/// A recipe that can be triggered from the builds page, with its matrix axes.
struct RecipeInfo {
  std::string name;
  std::string project;
  std::vector<std::string> python;
  std::vector<std::string> torch;
  std::vector<std::string> cuda;
};
struct BuildsPage {
  std::vector<BuildRow> builds;  ///< newest first
  std::vector<RecipeInfo> recipes;
  bool runner_enabled = true;
  std::string notice;  ///< e.g. "Build 3 created with 2 jobs."
  std::string error;   ///< a rejected request's reasons
  Micros now = 0;
};
/// `/builds/`: the builds and their jobs (state, duration, MAX_JOBS), the trigger form and the
/// cancel/retry buttons.
[[nodiscard]] std::string render_builds(const Site& site, const BuildsPage& page);

struct JobPage {
  catalog::JobRecord job;
  std::string log;               ///< the end of the log (at most the last few hundred KiB)
  std::uint64_t log_offset = 0;  ///< where the shown log ends in the file
  bool log_truncated = false;    ///< the log's beginning is not shown
  std::string error;
  Micros now = 0;
};
/// `/jobs/<id>`: the job, its log (followed live by static/job.js, refreshed without it) and
/// its buttons.
[[nodiscard]] std::string render_job(const Site& site, const JobPage& page);

/// "1.2 MiB".
[[nodiscard]] std::string human_size(std::uint64_t bytes);
/// "1 min 05 s", "3.2 s".
[[nodiscard]] std::string human_duration(Micros micros);

/// `/tokens/` (admin): every token with its scope, project, state, creator, expiry and last
/// use (never a secret), a form to create one and revoke buttons. `created`/`secret`: the
/// token just created, whose secret is shown this once.
struct TokensPage {
  std::vector<catalog::TokenRecord> tokens;
  Micros now = 0;
  std::optional<catalog::TokenRecord> created;
  std::string secret;
  std::string notice;
  std::string error;
};
[[nodiscard]] std::string render_tokens(const Site& site, const TokensPage& page);

/// `/publishers/` (admin): every trusted publisher (docs/publishing.md), a form to add one (for
/// a configured issuer) and remove buttons. `form_*`: what a refused form said, shown again.
struct PublishersPage {
  std::vector<catalog::PublisherRecord> publishers;
  std::vector<std::pair<std::string, std::string>> issuers;  ///< configured: name, URL
  std::string form_project;
  std::string form_issuer;
  std::string form_claims;
  std::string form_description;
  std::string notice;
  std::string error;
};
[[nodiscard]] std::string render_publishers(const Site& site, const PublishersPage& page);

}  // namespace wf::ui
