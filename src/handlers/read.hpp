#pragma once
// What the read handlers (handlers.hpp) share with the web UI's: HTTP validators and
// encodings. Pure.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/handlers/message.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::handlers {

/// Parses a Range header value against a resource of `size` bytes.
/// nullopt: ignore the header (absent, malformed or several ranges: answer 200 in full);
/// a range with length 0 and offset == size: unsatisfiable (416).
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool satisfiable = true;
};
[[nodiscard]] std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size);

/// True when the request's Accept-Encoding admits gzip (not refused with q=0).
[[nodiscard]] bool accepts_gzip(const Request& req);

/// Answers with a cached page: its ETag (a separate one for the gzip form), 304 when the
/// request's If-None-Match matches, else the body, gzip-encoded when the client accepts it.
/// `r` carries the other headers.
[[nodiscard]] Response with_page_body(const Request& req,
                                      const std::shared_ptr<const snapshot::Page>& page,
                                      Response r);

/// Answers with a blob: its size, ETag, `Accept-Ranges`, a single range (206, or 416), immutable
/// caching; the body a FileRange of `path`.
[[nodiscard]] Response file_response(const Request& req, std::string path, std::uint64_t size,
                                     const std::string& etag, std::string content_type);

struct Context;

/// What blob_response() answers with.
struct BlobAnswer {
  std::string sha256;                 ///< the blob
  std::optional<std::uint64_t> size;  ///< its size when known (else read from the local file)
  std::string etag;
  std::string content_type;
  std::string filename;  ///< the name clients save it as (Content-Disposition of a redirect)
};

/// The answer for a stored blob. File backend: file_response() of the blob file. Object
/// store, FileServing::redirect: 302 to a presigned GET (304 for a matching If-None-Match).
/// FileServing::proxy: file_response() of the read cache's copy; when there is none, on the
/// network thread it sets ctx.needs_worker (never blocks there), on a worker it fetches one.
[[nodiscard]] Response blob_response(const Request& req, Context& ctx, const BlobAnswer& blob);

/// True when an If-None-Match header value matches the (quoted) ETag.
[[nodiscard]] bool etag_matches(std::string_view if_none_match, std::string_view etag);

}  // namespace wf::handlers
