#pragma once
// The web UI's static files (static/*.css, *.js, *.svg), compiled into the binary. Each is
// served at a content-addressed URL (/static/<hash>/<name>, cacheable forever) and at its
// plain name (/static/<name>, revalidated by ETag). Thread-safe.

#include <string>
#include <string_view>

namespace wf::ui {

struct StaticFile {
  std::string name;          ///< "style.css"
  std::string_view bytes;    ///< the content
  std::string content_type;  ///< "text/css; charset=utf-8"
  std::string hash;          ///< the first 16 hex digits of the content's sha256
  std::string gzip;          ///< gzip of bytes (static files are compressible text)
};

/// The static file of that name, or nullptr.
[[nodiscard]] const StaticFile* find_static(std::string_view name);

/// The content-addressed URL path of a static file: "/static/<hash>/<name>". The file must
/// exist (the templates only name files that do).
[[nodiscard]] std::string static_url(std::string_view name);

/// The template of that name ("home" for templates/home.mustache); empty when missing.
[[nodiscard]] std::string_view template_text(std::string_view name);

}  // namespace wf::ui
