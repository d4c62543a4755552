#pragma once
// The HTTP front end: network threads (Boost.Beast/Asio, hidden behind this interface; one
// io_context each, a connection stays on one thread) that only do I/O, and a small worker
// pool for everything that blocks (SQLite, hashing, archive reads, fsync). Which handler
// answers a request, and how it is reached, is the route table's (wheelforge/handlers);
// reads are answered from an in-memory snapshot of the catalog.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "wheelforge/handlers/context.hpp"
#include "wheelforge/http/client_address.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::catalog {
class ChangeFeed;
}  // namespace wf::catalog

namespace wf::http {

struct ServerConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;  ///< 0 picks a free port
  /// An already listening socket to use instead of binding host:port (socket activation).
  int listen_fd = -1;
  /// One log line per request.
  bool access_log = true;
  /// Every read (pages, files, APIs; not /healthz and /readyz) needs a read-scope token.
  bool private_reads = false;
  /// The upstream indexes whose files pages merge (docs/upstreams.md); null: none.
  handlers::Upstreams* upstreams = nullptr;
  /// With blobs in an object store: how file URLs are answered (docs/storage.md).
  handlers::FileServing file_serving = handlers::FileServing::redirect;
  std::chrono::seconds presign_expiry{300};
  /// The issuers of trusted publishing (docs/publishing.md); null: none configured.
  handlers::OidcIssuers* oidc = nullptr;
  /// The certificates attestations must chain to (docs/publishing.md); null: none configured.
  const crypto::TrustStore* attestation_roots = nullptr;
  /// The certificate (PEM) that signs the provenance of the build runner's wheels; empty when
  /// this server signs none (docs/runner.md, "Provenance").
  std::string build_certificate;
  /// HTTPS: PEM certificate chain and private key. Both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::size_t worker_threads = 2;
  /// With upstreams: threads for the pages that fetch from them and for first downloads of
  /// their files (docs/upstreams.md), apart from the worker threads. As many as the outbound
  /// client's concurrent fetches (FetcherConfig::max_concurrent): they mostly wait on it.
  std::size_t upstream_threads = 16;
  /// Threads that serve connections; 0: one per CPU core.
  std::size_t network_threads = 0;
  /// Connections open at once. At the cap, one is closed to make room for a new one: the
  /// oldest of those that have not sent a whole request yet, else the one idle longest among
  /// the keep-alive ones; with neither, the new one is answered 503 with Retry-After and
  /// closed.
  std::size_t max_connections = 1024;
  /// Connections open at once from one client address (IPv6: one /64); more are answered 503
  /// with Retry-After and closed.
  std::size_t max_connections_per_client = 256;
  /// Load balancers and reverse proxies whose `forwarded_header` names the client
  /// (client_address()). Their connections are not counted per address; each request they
  /// pass on counts, while it is served, against its client's max_connections_per_client
  /// (answered 503 with Retry-After beyond it). The client is also the address of the access
  /// log and of the audit trail. Empty: every peer is the client.
  TrustedProxies trusted_proxies;
  ForwardedHeader forwarded_header = ForwardedHeader::x_forwarded_for;
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_target_bytes = 4 * 1024;
  /// Deadline for receiving a request's headers, and for each chunk of an upload body. A new
  /// connection's first request's headers are due this long after its acceptance.
  std::chrono::seconds read_timeout{30};
  /// A new connection (plain or TLS) that has sent no byte this long after its acceptance is
  /// closed (read_timeout when that is shorter).
  std::chrono::seconds first_byte_timeout{10};
  /// An upload body must arrive at this many bytes/s or more, averaged over each read_timeout
  /// spent waiting for the client (time the server spends writing is not counted); slower
  /// clients get 408 and are disconnected. 0: no minimum.
  std::uint64_t min_upload_rate = 1024;
  /// How long an idle keep-alive connection is kept.
  std::chrono::seconds idle_timeout{60};
  /// Deadline for each write to a client.
  std::chrono::seconds write_timeout{60};
  /// How often the catalog is checked for changes made by other processes.
  std::chrono::milliseconds catalog_poll_interval{500};
  /// A shared catalog's change feed (docs/scale.md), owned by the caller; null (SQLite): the
  /// catalog is polled for its generation instead.
  catalog::ChangeFeed* feed = nullptr;
  /// How long a request naming a catalog position this replica has not applied yet
  /// (X-Wheelforge-Min-Position) waits for it before 503.
  std::chrono::milliseconds position_wait{5000};
  /// How long a graceful stop waits for in-flight requests.
  std::chrono::seconds shutdown_grace{10};
};

/// What the server works with; owned by the caller and outliving the server.
using Services = handlers::Services;

class Server {
 public:
  Server(ServerConfig config, Services services);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  /// Loads the catalog, binds and listens. Returns the bound "host:port".
  /// Fails with io when the address cannot be bound.
  [[nodiscard]] Result<std::string> start();

  /// Runs the network loops (the first on the calling thread) until stop() has drained them.
  void run();

  /// Stops accepting, lets in-flight requests finish within the grace period, then makes
  /// run() return. Safe to call from any thread (including signal-handling threads).
  void stop();

  /// Re-reads the TLS certificate and key (for connections accepted from now on).
  /// Fails with invalid when they cannot be loaded; the previous ones then stay in use.
  [[nodiscard]] Status reload_tls();

  /// Runs `fn` once every network thread has answered (a liveness probe for the watchdog).
  void post(std::function<void()> fn);

  /// Reloads the catalog snapshot now, then calls `done` (on a worker thread) with the result.
  void reload_catalog(std::function<void(Status)> done);

  struct Impl;  ///< implementation detail (Boost.Asio state), defined in server_impl.hpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wf::http
