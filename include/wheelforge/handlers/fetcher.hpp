#pragma once
// Outbound HTTP as the handlers see it: one blocking call that fetches one URL from an upstream
// index. The implementation (http module: Boost.Beast client with TLS verified against the
// system's certificate store) runs the I/O on threads of its own, never on the network threads,
// and bounds every fetch by a timeout and all fetches together by a concurrency limit. Handlers
// call it only from the worker pool (Route::thread == Thread::worker); tests pass a fake.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::handlers {

/// HTTP Basic credentials and the one origin they belong to.
struct FetchCredentials {
  /// A URL whose scheme, host and port are the only ones the credentials are sent to (an
  /// upstream's index URL); its path does not matter.
  std::string origin;
  std::string username;
  std::string password;
};

struct FetchRequest {
  std::string url;  ///< http:// or https://, with its query; redirects (3xx) are followed
  /// Extra request headers (Accept, If-None-Match, If-Modified-Since). Host, User-Agent and
  /// Connection are the fetcher's; Authorization and Proxy-Authorization are refused here
  /// (Errc::invalid): credentials go in `credentials`, so that the fetcher alone decides
  /// where they are sent.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Sent as `Authorization: Basic` with every request of the fetch (the first, each
  /// redirect) whose URL has the scheme, host and port of `credentials->origin`, and with no
  /// other: a page's link or a redirect to another host never receives them. Unset: the
  /// userinfo of `url` ("https://user:pw@host/"), if any, belongs to the origin of `url`
  /// in the same way.
  std::optional<FetchCredentials> credentials;
  /// The largest body accepted: a longer one fails the fetch with Errc::too_large.
  std::uint64_t max_bytes = 16ULL * 1024 * 1024;
  /// The whole fetch (waiting for a place, connecting, every redirect and the whole body) must
  /// end within this, or it fails with Errc::unavailable ("deadline passed"): an upstream that
  /// keeps a page coming a byte at a time does not hold its caller longer. Zero: no such bound
  /// (files, which may take minutes on a slow link; the fetcher's minimum transfer rate and
  /// its idle limit still apply).
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
  /// Empty: the body is returned in FetchResponse::body. Set: the body is handed over chunk by
  /// chunk as it arrives and never held whole in memory (wheel files); an error from the sink
  /// stops the fetch and is its result.
  std::function<Status(std::string_view chunk)> sink;
  /// Set: called once with the final answer's status and headers (names lower-case), after
  /// redirects and before its body reaches the sink; an error from it stops the fetch and is
  /// its result (a caller that streams the body on decides here whether it is the file).
  std::function<Status(int status, const std::vector<std::pair<std::string, std::string>>& headers)>
      on_head;
};

struct FetchResponse {
  int status = 0;  ///< the final answer's status (304 for a revalidated page)
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-case
  std::string body;                                          ///< empty when the request had a sink
  std::uint64_t body_bytes = 0;  ///< bytes received (handed to the sink, or in `body`)
  std::string url;               ///< the URL that answered, after redirects

  /// First header with this (lower-case) name, or "".
  [[nodiscard]] std::string_view header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
};

class Fetcher {
 public:
  Fetcher() = default;
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;
  Fetcher(Fetcher&&) = delete;
  Fetcher& operator=(Fetcher&&) = delete;
  virtual ~Fetcher() = default;

  /// Fetches `req`, blocking the calling thread until the whole answer has arrived. Any HTTP
  /// status is a successful fetch; an unreachable host, a refused or failed TLS handshake
  /// (certificate not trusted, name mismatch), a timeout or too many redirects is
  /// Errc::unavailable with a message naming the host and the cause (never the credentials).
  [[nodiscard]] virtual Result<FetchResponse> fetch(const FetchRequest& req) = 0;

  /// Connections opened to upstreams so far (a kept connection that is used again is not
  /// counted again); 0 for fetchers that do not keep count.
  [[nodiscard]] virtual std::uint64_t connections_opened() const { return 0; }
};

}  // namespace wf::handlers
