#pragma once
// Admin API handlers (admin-scope token checked by the caller before the body is read).
// They write to the catalog, so they block: run them on a worker thread.
//
//   POST   /admin/yank          project=NAME [version=V | filename=F] [reason=TEXT]
//   POST   /admin/unyank        project=NAME [version=V | filename=F]
//   DELETE /admin/files/<filename>
//
// Parameters come from the query string or an application/x-www-form-urlencoded body.

#include <string_view>

#include "message.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::http {

/// True for requests the admin handler serves (so the session knows to read a small body).
[[nodiscard]] bool is_admin_route(const Request& req);

[[nodiscard]] Response handle_admin(const Request& req, std::string_view body,
                                    catalog::Catalog& catalog);

/// Decodes an application/x-www-form-urlencoded string ('+' is a space).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s);

}  // namespace wf::http
