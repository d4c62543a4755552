#pragma once
// The route table: every URL wheelforge answers, one row each, in one place (routes.cpp). The
// server looks a request up once, right after its head is read; the row says who answers it and
// how the server gets there: which methods it takes (the 405 and its Allow header come from
// the table), the credentials it needs, what to do with a body, whether the handler blocks,
// whether it changes the catalog, and the label the request is counted under in /metrics.
//
// respond() runs a request through the same steps as the server does, minus the I/O between
// them, for tests and fuzzers.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/message.hpp"

namespace wf::handlers {

using Handler = Response (*)(const Request&, Context&);

/// A set of methods, one bit each (GET also admits HEAD: the answer without its body).
using Methods = std::uint8_t;
[[nodiscard]] constexpr Methods method_bit(Method m) {
  return static_cast<Methods>(1U << static_cast<unsigned>(m));
}
inline constexpr Methods kGet = method_bit(Method::get) | method_bit(Method::head);
inline constexpr Methods kPost = method_bit(Method::post);
inline constexpr Methods kPut = method_bit(Method::put);
inline constexpr Methods kDelete = method_bit(Method::del);
inline constexpr Methods kAnyMethod = 0xFF;

/// What the server does with a request's body before the handler runs.
enum class BodyPolicy : std::uint8_t {
  none,   ///< takes none: a request that has one is answered 400 and the connection closed
  small,  ///< read whole into Request::body, at most kMaxSmallBody (admin requests, web forms)
  file,   ///< the body is a file: streamed into a temp file while it is hashed (PUT /upload/)
  form,   ///< a multipart form with a file in it, streamed the same way (POST /legacy/)
};

/// The largest body a `small` route reads.
inline constexpr std::size_t kMaxSmallBody = 64 * 1024;

/// The credentials a route needs, checked from the request head before any body is read.
enum class Access : std::uint8_t {
  open,     ///< none (health probes)
  read,     ///< a read token when the index is private (Environment::private_reads); the
            ///< 401's WWW-Authenticate is what makes pip try .netrc, keyring or a prompt
            ///< (docs/clients.md, "pip")
  upload,   ///< an upload token
  admin,    ///< an admin token
  handler,  ///< the handler checks (web UI: cookies, forms, redirects to the login page;
            ///< PUT /upload/: tokens limited to the project the file name names)
};

/// Where the handler runs.
enum class Thread : std::uint8_t {
  network,  ///< on the connection's network thread: answers from the snapshot, never blocks
  worker,   ///< on the worker pool: reads or writes SQLite or files
};

struct Route {
  /// The path, segment by segment: a literal; `{name}` any one segment; `{name}.metadata` one
  /// that ends so; `{name...}` one or more, up to the next literal; `*` (last) any number, none
  /// included; a trailing `/` is an empty last segment. Rows with the same pattern are one
  /// resource: the methods of all of them are its Allow header.
  std::string_view pattern;
  Methods methods;
  Handler handler;
  BodyPolicy body;
  Access access;
  Thread thread;
  /// A successful answer (< 300, or a web form's 303) changed the catalog: the server loads a
  /// new snapshot before it sends the answer (Context::changed says how much to load).
  bool changes_catalog;
  std::string_view label;  ///< for /metrics: low cardinality, never the raw path
};

/// Every route, in the order they are looked up.
[[nodiscard]] std::span<const Route> routes();

struct RouteMatch {
  const Route* route = nullptr;  ///< the row that answers; null when the method is not allowed
  Methods allowed = 0;           ///< the methods of the path's resource (the Allow header)
  std::string_view label;        ///< the resource's metrics label
};

/// The route of a request: the first resource whose pattern matches the path, and its row
/// for the method. Every path matches some resource (the table ends in catch-alls).
[[nodiscard]] RouteMatch find_route(Method method, const std::vector<std::string>& segments);

/// True when `pattern` (see Route::pattern) matches the path segments.
[[nodiscard]] bool pattern_matches(std::string_view pattern,
                                   const std::vector<std::string>& segments);

/// "GET, HEAD, POST": the Allow header of a set of methods.
[[nodiscard]] std::string allow_header(Methods methods);

/// The 405 answer for a method the matched resource does not take, with `Allow` from the
/// table. A POST or PUT (an upload sent to the wrong address: twine or poetry given the index
/// URL instead of the upload URL) also hears where uploads go, in the body and the reason
/// phrase that twine and poetry print.
[[nodiscard]] Response wrong_method(const RouteMatch& match, Method method);

/// The route's credentials (Route::access) against the request's Authorization header:
/// Errc::unauthorized (none, unknown) or forbidden (too small a scope).
[[nodiscard]] Status check_access(const Route& route, const Request& req,
                                  const snapshot::Snapshot& snap, const Environment& env);

/// True when the request carries a token the snapshot does not know: one another process may
/// have created since the snapshot was loaded.
[[nodiscard]] bool has_unknown_token(const Request& req, const snapshot::Snapshot& snap);

/// What the body policy says about a request head: nothing when the body may be read (or there
/// is none); Errc::invalid when a route that takes no body gets one, too_large when a small
/// body declares more than kMaxSmallBody. `has_body`: the head announces one.
[[nodiscard]] std::optional<Error> check_body_head(const Route& route, bool has_body,
                                                   std::optional<std::uint64_t> length);

/// The answer to `req`, through the steps the server takes: route lookup (405), access, the
/// body policy (`req.body` is the body), the upload routes' head check (plan_upload, whose plan
/// goes into `ctx.upload`, or plan_form), the handler. Upload routes need `ctx.upload` holding
/// the received body; without it they are answered 400 once their head check passes.
/// Work the handler leaves for after its answer (Context::after_answer) runs here, before
/// returning; a growing file (Context::growing) is answered as it ended (growing_file_answer).
[[nodiscard]] Response respond(const Request& req, Context& ctx);

}  // namespace wf::handlers
