#pragma once
// Project pages that merge local files with upstream ones (upstream_pages.cpp). Internal to
// the handlers module.

#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/message.hpp"
#include "wheelforge/render/simple.hpp"

namespace wf::handlers {

/// The upstream files a page of `project` lists besides the local ones.
struct MergedFiles {
  bool local = false;  ///< the project exists here
  /// Files of the upstreams allowed to serve the project, past their cooldown, whose names
  /// parse as a wheel or sdist of the project and are not listed here already (a local file,
  /// or an earlier upstream's, of the same name wins).
  std::vector<core::FileRecord> upstream_files;
  std::vector<render::StaleUpstream> stale;  ///< upstreams listed from an expired copy
  /// The listings the files came from; complete (every upstream asked gave a listing) only
  /// when `complete`.
  std::vector<Upstreams::RenderedMerge::Source> sources;
  bool complete = true;
  /// The earliest end of a listing's TTL, or of a hidden file's cooldown: when the same
  /// listings may give another page.
  Micros valid_until = std::numeric_limits<Micros>::max();
};

/// Asks every upstream allowed to serve `project` (normalized) for its page (blocking).
/// Errc::not_found when neither this index nor any upstream has the project; Errc::upstream
/// when the project is not here and an upstream that might have it could not be asked (and no
/// copy of its page is cached).
[[nodiscard]] Result<MergedFiles> merge_upstream_files(const snapshot::Snapshot& snap,
                                                       Upstreams& upstreams,
                                                       std::string_view project, Micros now);

/// The merged /simple/<project>/ page in `format` (docs/upstreams.md); runs on a worker.
/// Stale upstreams are named in the page and in the Wheelforge-Upstream-Stale header.
/// In a variant view (`view` set) the merged files go through the view's selection
/// (snapshot::select_view_files), upstream builds competing with local ones.
/// The merged page is kept as rendered (Upstreams::keep_rendered_merge) when no upstream is
/// stale or missing, keyed by the snapshot's generation, the project, the format and the view.
[[nodiscard]] Response merged_project_page(const Request& req, Context& ctx,
                                           const std::optional<core::ViewSelector>& view,
                                           std::string_view project, core::PageFormat format);

/// The merged page as kept by merged_project_page() while it is still current (the same
/// snapshot, each upstream's listing the one it was made from and within its TTL); nullopt
/// otherwise. No I/O: a network thread answers with it.
[[nodiscard]] std::optional<Response> current_merged_page(
    const Request& req, Context& ctx, const std::optional<core::ViewSelector>& view,
    std::string_view project, core::PageFormat format);

}  // namespace wf::handlers
