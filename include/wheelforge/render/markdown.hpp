#pragma once
// A project's long description as HTML for its web page: Markdown (CommonMark) through
// libcmark, which no other module includes; reStructuredText and plain text shown as written.
// Pure functions: no I/O, safe on any thread. Nothing executable comes out: raw HTML is never
// passed through, and links to javascript:, vbscript:, file: or data: URLs are emptied.

#include <string>
#include <string_view>

#include "wheelforge/core/metadata.hpp"

namespace wf::render {

/// CommonMark as HTML, in libcmark's safe mode: raw HTML blocks and inline HTML become an
/// HTML comment ("raw HTML omitted"), dangerous link and image URLs are emptied, all text is
/// escaped. Headings are moved down two levels (# becomes <h3>, at most <h6>) so that the
/// description fits under the page's own headings. Invalid UTF-8 is replaced.
[[nodiscard]] std::string markdown_to_html(std::string_view markdown);

/// The description as its Description-Content-Type asks: Markdown through markdown_to_html;
/// reStructuredText and plain text escaped inside <pre class="description-text">.
[[nodiscard]] std::string description_html(std::string_view text, core::DescriptionFormat format);

}  // namespace wf::render
