#pragma once
// Content negotiation for the simple API (docs/packaging.md, "Content negotiation").

#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::core {

enum class PageFormat {
  html_legacy,  ///< text/html; charset=utf-8 (the original HTML API)
  html_v1,      ///< application/vnd.pypi.simple.v1+html
  json_v1,      ///< application/vnd.pypi.simple.v1+json
};

/// The Content-Type header value for a format.
[[nodiscard]] std::string_view content_type(PageFormat format);

/// Chooses a format from the `?format=` query value (wins when non-empty) or the Accept
/// header (q-values, wildcards, "latest" aliases). An empty or absent Accept means text/html.
/// Among equal q-values a type named explicitly beats one matched only by a wildcard;
/// among explicit matches JSON beats v1 HTML beats text/html; among wildcard-only matches
/// text/html wins (so `*/*` and browsers get HTML).
/// Fails with Errc::not_acceptable when nothing offered is acceptable.
[[nodiscard]] Result<PageFormat> negotiate(std::string_view accept, std::string_view format_query);

}  // namespace wf::core
