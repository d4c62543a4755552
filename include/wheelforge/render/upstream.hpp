#pragma once
// Reading an upstream index's PEP 691 JSON project page (docs/packaging.md, "Simple API: JSON")
// into the model core::parse_upstream_html() also produces. Pure: no I/O, safe on any thread.

#include <string_view>

#include "wheelforge/core/upstream.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::render {

/// Parses a JSON project page fetched from `page_url`: each file's `url` (resolved against
/// `page_url`), `hashes.sha256`, `requires-python`, `yanked` (false, true or a reason),
/// `core-metadata` (or the older `dist-info-metadata`) with its sha256, `size` and
/// `upload-time`. Files without a sha256 are counted in dropped_without_hash and left out.
/// Errc::invalid for text that is not a JSON object with a `files` list, a page over
/// core::kMaxUpstreamPageBytes or core::kMaxUpstreamFiles, or a `meta.api-version` whose major
/// is not 1.
[[nodiscard]] Result<core::UpstreamPage> parse_upstream_json(std::string_view body,
                                                             std::string_view page_url);

}  // namespace wf::render
