#include "wheelforge/render/markdown.hpp"

#include <cmark.h>

#include <cstdlib>
#include <memory>

#include "wheelforge/util/strings.hpp"

namespace wf::render {
namespace {

struct NodeFree {
  void operator()(cmark_node* n) const { cmark_node_free(n); }
};
struct IterFree {
  void operator()(cmark_iter* i) const { cmark_iter_free(i); }
};
struct CharFree {
  void operator()(char* p) const { std::free(p); }  // NOLINT(cppcoreguidelines-no-malloc)
};

// Headings two levels down: the page has its <h1> and the description sits under an <h2>.
constexpr int kHeadingShift = 2;
constexpr int kDeepestHeading = 6;

}  // namespace

std::string markdown_to_html(std::string_view markdown) {
  // CMARK_OPT_SAFE is libcmark 0.30's default (no CMARK_OPT_UNSAFE); it is named so that the
  // intent does not depend on the version's default.
  const int options = CMARK_OPT_SAFE | CMARK_OPT_VALIDATE_UTF8;
  std::unique_ptr<cmark_node, NodeFree> doc(
      cmark_parse_document(markdown.data(), markdown.size(), options));
  if (!doc) return {};
  {
    std::unique_ptr<cmark_iter, IterFree> it(cmark_iter_new(doc.get()));
    for (auto ev = cmark_iter_next(it.get()); ev != CMARK_EVENT_DONE;
         ev = cmark_iter_next(it.get())) {
      cmark_node* node = cmark_iter_get_node(it.get());
      if (ev == CMARK_EVENT_ENTER && cmark_node_get_type(node) == CMARK_NODE_HEADING) {
        const int level = cmark_node_get_heading_level(node) + kHeadingShift;
        cmark_node_set_heading_level(node, level > kDeepestHeading ? kDeepestHeading : level);
      }
    }
  }
  const std::unique_ptr<char, CharFree> html(cmark_render_html(doc.get(), options));
  return html ? std::string(html.get()) : std::string();
}

std::string description_html(std::string_view text, core::DescriptionFormat format) {
  if (format == core::DescriptionFormat::markdown) return markdown_to_html(text);
  return "<pre class=\"description-text\">" + html_escape(text) + "</pre>\n";
}

}  // namespace wf::render
