#pragma once
// The frame every page is rendered in, and the template helpers the pages share (pages.cpp,
// build_pages.cpp); private to ui, the only module that sees kainjow mustache.

#include <kainjow/mustache.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/ui/pages.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::ui {

namespace mus = kainjow::mustache;

/// Renders templates/<name>.mustache. Templates are part of the binary and checked by the unit
/// tests, so a parse error is a programming error: it is shown in the page, not thrown.
[[nodiscard]] std::string render_template(std::string_view name, const mus::data& data);

struct Layout {
  std::string title;
  std::string content;  // already rendered HTML
  std::vector<std::string> scripts;
  bool refresh = false;  // without JavaScript, reload every few seconds (a running job)
};

/// The page in the site's frame (layout.mustache): title, styles, scripts, the signed-in state.
[[nodiscard]] std::string layout(const Site& site, const Layout& page);

/// Sets a string only when it is not empty: mustache treats an empty string as true, and the
/// templates use {{#name}}...{{/name}} to show optional values.
void set_text(mus::data& d, const std::string& name, const std::string& value);

/// A mustache list of strings.
[[nodiscard]] mus::data list_of(const std::vector<std::string>& items);

/// The items with `sep` between them.
[[nodiscard]] std::string join(const std::vector<std::string>& items, std::string_view sep);

/// "2025-01-31 12:00 UTC".
[[nodiscard]] std::string upload_date(Micros t);

/// A search query as a name: lower-case, runs of '-', '_' and '.' as one '-'.
[[nodiscard]] std::string normalized_query(std::string_view q);

/// A project's summary for lists: name, link, latest public version, number of files, last
/// upload (project_list.cpp).
[[nodiscard]] mus::data project_item(const snapshot::Snapshot& snap, const core::ProjectRecord& p);

}  // namespace wf::ui
