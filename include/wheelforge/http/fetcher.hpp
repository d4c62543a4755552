#pragma once
// Outbound HTTP: the Boost.Beast client behind handlers::Fetcher. It runs its I/O on an
// io_context and thread of its own (never the server's network threads): a caller's fetch()
// waits on a condition variable, and the body's chunks are handed over to the caller's thread
// one at a time, so a slow sink (a disk, a client) holds back its own upstream connection and
// nothing else. docs/upstreams.md, "Outbound HTTP", says what it sends and what it refuses.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "wheelforge/handlers/fetcher.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::http {

struct FetcherConfig {
  /// Deadline for resolving the host, connecting and the TLS handshake, together.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  /// Deadline for each read and write once connected: sending the request, the answer's head,
  /// and each piece of its body (an idle limit, so that a large file may take as long as it
  /// keeps arriving).
  std::chrono::milliseconds read_timeout{std::chrono::seconds(30)};
  /// Fetches in progress at once; a caller beyond it waits for a free one up to queue_timeout,
  /// then fails with unavailable ("too many upstream fetches").
  std::size_t max_concurrent = 16;
  std::chrono::milliseconds queue_timeout{std::chrono::seconds(10)};
  /// Redirects (301, 302, 303, 307, 308 with a Location) followed for one fetch.
  int max_redirects = 5;
  /// A PEM file of certificate authorities trusted besides the system's store (a private
  /// upstream's CA). Empty: the system's store alone.
  std::string ca_file;
  /// Empty: "wheelforge/<version>".
  std::string user_agent;
  /// The slowest body accepted, in bytes per second, measured over each rate_window of time
  /// spent waiting for the upstream (not for the caller's sink): a body that arrives more
  /// slowly fails the fetch. It bounds fetches without a deadline (files) against an upstream
  /// that trickles a byte now and then, which no idle limit catches. 0: no floor.
  std::uint64_t min_rate = 1024;
  std::chrono::milliseconds rate_window{std::chrono::seconds(60)};
  /// Idle keep-alive connections kept per origin (scheme, host and port; the CA settings are
  /// the fetcher's) for the next fetch, and how long one may stay idle. 0: a connection of its
  /// own for each fetch (Connection: close).
  std::size_t idle_per_origin = 4;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};
};

/// The User-Agent sent by default: "wheelforge/<version>".
[[nodiscard]] std::string default_user_agent();

/// A fetcher with its I/O thread started. Fails with invalid when ca_file cannot be read as PEM
/// certificates, or a limit is zero. Destroy it only when no fetch() is in progress any more.
[[nodiscard]] Result<std::unique_ptr<handlers::Fetcher>> make_fetcher(const FetcherConfig& config);

}  // namespace wf::http
