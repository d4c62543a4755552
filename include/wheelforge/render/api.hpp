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
/// platform tags and its variant (backend, CUDA/ROCm version, torch series, C++ ABI); plus the
/// axes present (torch series, CUDA versions, python tags) and a coverage matrix of
/// (torch, backend) cells listing the python tags that exist, for drawing a table.
[[nodiscard]] std::string render_variants(std::string_view project,
                                          std::span<const VersionFiles> versions);

/// GET /api/resolve: which view fits an installed torch, and the pip line that uses it.
struct Resolution {
  std::string torch;  ///< as given (torch.__version__)
  core::ViewSelector selector;
  std::string base_url;  ///< "http://host:port"
  std::optional<std::string> project;
  std::vector<std::string> notes;  ///< caveats, e.g. no CUDA label in the torch version
};
[[nodiscard]] std::string render_resolution(const Resolution& r);

}  // namespace wf::render
