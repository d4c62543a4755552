#pragma once
// Admin API handlers (admin-scope token checked by the caller before the body is read).
// They write to the catalog, so they block: run them on a worker thread.
//
//   POST   /admin/yank          project=NAME [version=V | filename=F] [reason=TEXT]
//   POST   /admin/unyank        project=NAME [version=V | filename=F]
//   DELETE /admin/files/<filename>
//   POST   /admin/builds                    JSON build request -> 202 build and its jobs
//   GET    /admin/builds, /admin/builds/<id>, /admin/jobs/<id>
//   GET    /admin/jobs/<id>/log?offset=N     the log from byte N (follow=1 is streamed by the
//                                            session, see log_follow_request())
//   POST   /admin/jobs/<id>/cancel, /admin/jobs/<id>/retry
//
// Parameters come from the query string or an application/x-www-form-urlencoded body.

#include <string_view>

#include "message.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::http {

/// True for requests the admin handler serves (so the session knows to read a small body).
[[nodiscard]] bool is_admin_route(const Request& req);

/// `runner` is null when no build recipes are configured.
[[nodiscard]] Response handle_admin(const Request& req, std::string_view body,
                                    catalog::Catalog& catalog, build::Runner* runner);

/// The job id of `GET /admin/jobs/<id>/log?follow=1`, whose answer streams.
[[nodiscard]] std::optional<std::int64_t> log_follow_request(const Request& req);

/// Decodes an application/x-www-form-urlencoded string ('+' is a space).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s);

}  // namespace wf::http
