#pragma once
// The S3 client's transport: blocking HTTP/1.1 over Boost.Beast (TLS through Asio's OpenSSL
// streams, certificates checked against the system's trust store), with a deadline on
// connecting and on each read and write, and a pool of kept-alive connections shared by the
// calling threads. Request bodies stream from memory or from a slice of a file; answer
// bodies stream to a sink. Nothing here signs or knows S3: s3_store.cpp does.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::store::s3http {

/// Where requests go: "http" or "https", the host (an IPv6 literal without brackets) and port.
struct Endpoint {
  bool https = false;
  std::string host;
  std::uint16_t port = 0;
};

struct Timeouts {
  std::chrono::milliseconds connect{5000};  ///< resolving, connecting and the TLS handshake
  std::chrono::milliseconds io{30000};      ///< each read or write
};

/// A request body: `bytes`, or `length` bytes of the file `file` from `offset` (read in
/// chunks as they are sent, again when a request is sent again).
struct Body {
  std::string_view bytes;
  const std::filesystem::path* file = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  [[nodiscard]] std::uint64_t size() const { return file != nullptr ? length : bytes.size(); }
};

struct Response {
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-case
  std::string body;  ///< the answer's body, unless a sink took it
  /// The first header of that (lower-case) name; "" when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

using Sink = std::function<Status(std::string_view)>;

class Client {
 public:
  Client(Endpoint endpoint, Timeouts timeouts);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  /// Checks that TLS can be set up (the system's trust store loads); ok for http.
  [[nodiscard]] Status ready() const;

  /// Sends `method target` with `headers` (and Content-Length for PUT and POST) and `body`,
  /// and reads the answer. A 2xx answer's body goes to `sink` when there is one (a failing
  /// sink ends the exchange with its error); any other body is kept, up to `max_body` bytes.
  /// unavailable (naming the cause: refused, timed out, reset) when the exchange fails on the
  /// wire. A kept connection that fails before the answer begins is replaced once.
  [[nodiscard]] Result<Response> exchange(
      std::string_view method, std::string_view target,
      const std::vector<std::pair<std::string, std::string>>& headers, const Body& body,
      const Sink* sink, std::size_t max_body);

 private:
  struct Connection;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wf::store::s3http
