#pragma once
// JSON documents of wheelforge's own API (/api/...). Pure functions.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/records.hpp"
#include "wheelforge/core/variant.hpp"

namespace wf::render {

/// One public version of a project and its files, in listing order.
struct VersionFiles {
  std::string version;  ///< public version (no local label)
  std::vector<const core::FileRecord*> files;
};

/// GET /api/projects/<name>/variants: per public version, every file with its python, ABI and
/// platform tags, its variant (backend, CUDA/ROCm version, torch series, C++ ABI), its build
/// number (`build`, from the build tag; 0 without one), the glibc its manylinux platform
/// tag promises (`glibc`, null for other platforms) and, for a wheel rebuilt since, the file
/// that supersedes it (`superseded_by`); plus the axes present (torch series, CUDA versions,
/// python tags) and a coverage matrix of (torch, backend) cells listing the python tags that
/// exist and, under `builds`, each wheel of the cell as its current build: of the rebuilds of
/// one file name (core::rebuild_key), the one the variant views list (not yanked over yanked,
/// then the highest build tag, then the latest upload). Each file carries `effective_cxx11_abi`
/// (the ABI the views treat it as: core::effective_cxx11_abi) and `binaries`, what its ELF
/// binaries say (core::WheelFindings; null for sdists and wheels stored before inspection); a
/// stable-ABI build without a series of its own fills every torch cell from its `torch_from` on.
/// The JSON of GET /api/files/<sha256>/contents: the file, its members (name, size,
/// compressed size; the first core::kMaxMembersShown, with `members_total` and
/// `members_truncated`), and per ELF member its findings and exported symbols (the first
/// core::kMaxExportedShown, with `exported_total` and `exported_truncated`).
[[nodiscard]] std::string render_file_contents(const core::FileRecord& file,
                                               const core::WheelInspection& inspection);

[[nodiscard]] std::string render_variants(std::string_view project,
                                          std::span<const VersionFiles> versions);

/// GET /api/resolve: which view fits an installed torch, and the install commands that use it.
struct Resolution {
  std::string torch;  ///< as given (torch.__version__)
  core::ViewSelector selector;
  std::string backend_source;  ///< core::backend_source_name of how the backend was chosen
  std::string base_url;        ///< "http://host:port"
  std::optional<std::string> project;
  /// The newest version of the project with a wheel in the view (not yanked where one is).
  std::optional<std::string> version;
  std::vector<std::string> notes;  ///< caveats, e.g. an assumed CUDA version
  /// The index serves every name (core::serves_every_name): the lines use --index-url.
  bool sole_index = false;
};

/// The answer: view, index URL and the pip and uv lines. Every line pins the version (or
/// says PROJECT==VERSION when no project was named) and names the project in --only-binary, so
/// that pip never falls back to building an sdist of another version from another index
/// (docs/clients.md, "pip").
[[nodiscard]] std::string render_resolution(const Resolution& r);

/// How pip is told about this index: "--index-url " when it serves every name
/// (`sole_index`: an upstream serves what it does not hold, so no other index is needed and
/// none can be merged in), else "--extra-index-url ".
[[nodiscard]] std::string_view index_option(bool sole_index);

/// The pip arguments that install `requirement` of `project` from `index_url`:
/// "--extra-index-url URL --only-binary PROJECT PROJECT==VERSION" (index_option). Shared by
/// every install command wheelforge prints.
[[nodiscard]] std::string pip_install_args(std::string_view index_url, std::string_view project,
                                           std::string_view version, bool sole_index);

/// Builds of a project that exist for one torch/backend/ABI combination (a "cell").
struct NearbyBuilds {
  core::ViewSelector view;            ///< the cell, which is also the view that lists them
  std::vector<std::string> versions;  ///< public versions with a wheel there, newest first
  std::vector<std::string> python;    ///< python tags of those wheels, sorted
};

/// The 404 of /api/resolve when the project has no wheel in the resolved view: the resolution
/// (without commands), `message`, and the nearest cells that do have builds.
[[nodiscard]] std::string render_no_build(const Resolution& r, std::string_view message,
                                          std::span<const NearbyBuilds> nearest);

/// {"error": message} for the API's other refusals.
[[nodiscard]] std::string render_api_error(std::string_view message);

// Answers of the upload and admin endpoints (fields in this order).

/// An upload that was stored: {"filename", "project", "version", "sha256", "size", "url"}.
[[nodiscard]] std::string render_stored_file(const core::FileRecord& file);

/// What an admin action changed: {"<key>": [file names]} ("yanked", "unyanked", "deleted").
[[nodiscard]] std::string render_file_names(std::string_view key,
                                            std::span<const std::string> filenames);

/// A project's claim after an admin changed it: {"project": name, "claim": text}.
[[nodiscard]] std::string render_claim(std::string_view project, std::string_view claim);

}  // namespace wf::render
