#pragma once
// Rendering of the simple repository API pages (HTML and JSON: docs/packaging.md, "Simple API:
// HTML" and "Simple API: JSON") and their gzip form. Pure functions: no I/O, safe on any thread.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/records.hpp"

namespace wf::render {

/// The one URL of a file, whatever page lists it: "/files/<sha256>/<percent-encoded name>".
[[nodiscard]] std::string file_url(const core::FileRecord& file);

/// The URL of a file's PEP 740 provenance object, whatever page lists it (docs/packaging.md,
/// "Provenance"): "/integrity/<project>/<version>/<name>/provenance", each part
/// percent-encoded. Empty when the file has none (FileRecord::provenance_sha256 empty; always
/// for an upstream's file).
[[nodiscard]] std::string provenance_url(const core::FileRecord& file);

/// A link a project page carries besides its distribution files: a release's index-level
/// `{name}-{version}-variants.json` (PEP 825, docs/variants.md).
struct ExtraLink {
  std::string filename;
  std::string url;  ///< as written in the page (relative to it)
  std::string sha256;
  std::uint64_t size = 0;
};

/// An upstream whose files on a page come from a cached copy older than its TTL, because the
/// upstream could not be asked (docs/upstreams.md).
struct StaleUpstream {
  std::string name;
  std::int64_t age_seconds = 0;
};

struct ProjectPage {
  std::string name;                            ///< normalized project name
  std::vector<std::string> versions;           ///< JSON `versions`, already in version order
  std::vector<const core::FileRecord*> files;  ///< in listing order
  std::vector<ExtraLink> extras;               ///< listed after the files
  /// Said in an HTML comment and in JSON's `meta` (`_stale-upstreams`).
  std::vector<StaleUpstream> stale;
};

/// Root list: one anchor (HTML) or entry (JSON) per project name, in the given order.
/// `prefix` is the URL path up to and including "simple/" ("/simple/" or "/cu128/simple/").
[[nodiscard]] std::string render_root(core::PageFormat format,
                                      std::span<const std::string> project_names,
                                      std::string_view prefix);

/// Project page with every file: hashes, requires-python, core metadata, yanked, size,
/// upload-time, and the provenance URL of a file that has one.
[[nodiscard]] std::string render_project(core::PageFormat format, const ProjectPage& page);

/// gzip (docs/formats.md, "gzip") of bytes at the given zlib level (1-9; values outside are
/// clamped).
/// Throws std::bad_alloc only when zlib cannot allocate its state.
[[nodiscard]] std::string gzip(std::string_view bytes, int level = 6);

}  // namespace wf::render
