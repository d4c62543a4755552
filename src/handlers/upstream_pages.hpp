#pragma once
// Project pages that merge local files with upstream ones (upstream_pages.cpp). Internal to
// the handlers module.

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
};

/// Asks every upstream allowed to serve `project` (normalized) for its page (blocking).
/// Errc::not_found when neither this index nor any upstream has the project; Errc::upstream
/// when the project is not here and an upstream that might have it could not be asked (and no
/// copy of its page is cached).
[[nodiscard]] Result<MergedFiles> merge_upstream_files(const snapshot::Snapshot& snap,
                                                       Upstreams& upstreams,
                                                       std::string_view project, Micros now);

/// The merged /simple/<project>/ page in `format` (README, "Upstreams"); runs on a worker.
/// Stale upstreams are named in the page and in the Wheelforge-Upstream-Stale header.
/// In a variant view (`view` set) the merged files go through the view's selection
/// (snapshot::select_view_files), upstream builds competing with local ones.
[[nodiscard]] Response merged_project_page(const Request& req, Context& ctx,
                                           const std::optional<core::ViewSelector>& view,
                                           std::string_view project, core::PageFormat format);

}  // namespace wf::handlers
