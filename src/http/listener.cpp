// The listener: connections are accepted by the first network thread, which applies the
// connection caps before handing each to a thread (chosen as spread.hpp says).

#include <algorithm>
#include <array>
#include <ctime>
#include <span>
#include <vector>

#include "server_impl.hpp"
#include "session.hpp"
#include "spread.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::http {
namespace {

/// How long the listener's look at a thread's CPU clock counts before it looks again.
constexpr std::chrono::milliseconds kBusyWindow{10};

/// Whether `t` was on the CPU more than three quarters of the time since the listener last
/// looked (at least kBusyWindow ago; the last answer is kept in between).
bool busy_lately(NetThread& t, std::chrono::steady_clock::time_point now) {
  if (!t.has_cpu_clock.load(std::memory_order_acquire)) return false;
  if (t.seen_at != std::chrono::steady_clock::time_point{} && now - t.seen_at < kBusyWindow) {
    return t.seen_busy;
  }
  timespec ts{};
  if (::clock_gettime(t.cpu_clock, &ts) != 0) return false;
  const std::int64_t cpu_ns = static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  if (t.seen_at != std::chrono::steady_clock::time_point{}) {
    const auto wall_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - t.seen_at).count();
    t.seen_busy = (cpu_ns - t.seen_cpu_ns) * 4 > wall_ns * 3;
  }
  t.seen_cpu_ns = cpu_ns;
  t.seen_at = now;
  return t.seen_busy;
}

}  // namespace

NetThread& Server::Impl::pick_thread() {
  const auto now = std::chrono::steady_clock::now();
  constexpr std::size_t kOnStack = 64;
  std::array<ThreadLoad, kOnStack> on_stack{};
  std::vector<ThreadLoad> on_heap;
  std::span<ThreadLoad> loads(on_stack.data(), std::min(threads.size(), kOnStack));
  if (threads.size() > kOnStack) {
    on_heap.resize(threads.size());
    loads = on_heap;
  }
  for (std::size_t i = 0; i < threads.size(); ++i) {
    loads[i].connections = threads[i]->connections.load(std::memory_order_relaxed);
    // The clock is read only for threads that the choice can fall on before a later one.
    loads[i].busy = loads[i].connections < kPackedConnections && busy_lately(*threads[i], now);
    if (loads[i].connections < kPackedConnections && !loads[i].busy) {
      loads = loads.first(i + 1);
      break;
    }
  }
  return *threads[choose_thread(loads)];
}

void Server::Impl::accept() {
  // The thread is chosen before the connection arrives (the socket is made on its
  // io_context), from the counts as they are now; the connection lives on that thread.
  NetThread& target = pick_thread();
  acceptor.async_accept(target.ioc, accept_peer,
                        [this, &target](beast::error_code ec, Socket socket) {
                          if (ec) {
                            if (status.stopping || ec == asio::error::operation_aborted) return;
                            log::warn("accept failed: {}", ec.message());
                            return accept();
                          }
                          // Until its session ends (~Session), or below where none starts.
                          target.connections.fetch_add(1, std::memory_order_relaxed);
                          socket.set_option(tcp::no_delay(true), ec);
                          status.metrics.connection_opened();
                          admit(target, std::move(socket), tls, std::chrono::steady_clock::now());
                          accept();
                        });
}

namespace {

ClientCounts::Key client_key(const asio::ip::address& address) {
  if (address.is_v4()) return ClientCounts::ipv4(address.to_v4().to_bytes());
  return ClientCounts::ipv6(address.to_v6().to_bytes());
}

}  // namespace

// The caps are decided here, on the first thread, as connections arrive: per client address
// first, then the server's. At the server's cap a connection is closed to make room: the one
// accepted first among those that have not sent a whole request yet (idle sockets, a slow
// start), else the one idle longest among the keep-alive ones, on whichever thread has it;
// with neither, the new connection is refused with 503. Connections that never send a byte
// cannot hold the server for longer than it takes new clients to come.
void Server::Impl::admit(NetThread& target, Socket socket,
                         const std::shared_ptr<asio::ssl::context>& tls_now,
                         std::chrono::steady_clock::time_point accepted) {
  const auto limit = static_cast<std::uint32_t>(
      std::min<std::size_t>(config.max_connections_per_client, UINT32_MAX));
  // A trusted proxy's connections carry many clients: each of its requests is counted against
  // its own client instead (Session::count_client).
  const bool proxy = !config.trusted_proxies.empty() &&
                     config.trusted_proxies.trusts(ip_bytes(accept_peer.address()));
  const auto slot = proxy ? std::optional<ClientCounts::Slot>(ClientCounts::kUncounted)
                          : clients.acquire(client_key(accept_peer.address()), limit);
  if (!slot) {
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(limit) + " per client reached by " +
                      accept_peer.address().to_string(),
                  "too many connections from your address: the limit is " + std::to_string(limit) +
                      " connections per client; retry later");
  }
  if (status.open_connections.load() < config.max_connections) {
    status.open_connections.fetch_add(1);
    return open(target, std::move(socket), tls_now, *slot, accepted);
  }
  NetThread* victim = claim_room();
  if (victim == nullptr) {
    clients.release(*slot);
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(config.max_connections) + " reached",
                  "the server is at its connection limit; retry later");
  }
  // Counted now, so that the connections accepted meanwhile see the cap.
  status.open_connections.fetch_add(1);
  make_room(*victim, target, std::move(socket), tls_now, *slot, accepted, 1);
}

void Server::Impl::make_room(NetThread& victim, NetThread& target, Socket socket,
                             std::shared_ptr<asio::ssl::context> tls_now, ClientCounts::Slot slot,
                             std::chrono::steady_clock::time_point accepted, std::size_t looks) {
  asio::post(victim.ioc, [this, &victim, &target, socket = std::move(socket),
                          tls = std::move(tls_now), slot, accepted, looks]() mutable {
    victim.claimed.fetch_sub(1, std::memory_order_relaxed);
    if (const auto what = victim.evict_one(); what != NetThread::Evicted::none) {
      evicted(what);
      return open(target, std::move(socket), std::move(tls), slot, accepted);
    }
    // Those connections got busy, went, or made room for another new one meanwhile.
    if (looks <= threads.size()) {
      if (NetThread* other = claim_room(); other != nullptr) {
        return make_room(*other, target, std::move(socket), std::move(tls), slot, accepted,
                         looks + 1);
      }
    }
    status.open_connections.fetch_sub(1);
    clients.release(slot);
    refuse(target, std::move(socket), std::move(tls),
           "connection limit of " + std::to_string(config.max_connections) + " reached",
           "the server is at its connection limit; retry later");
    maybe_finish_stop();
  });
}

NetThread* Server::Impl::claim_room() {
  // What a thread can close and has not been asked to yet; a look at its atomics.
  const auto unclaimed = [](const NetThread& t, bool with_idle) {
    return static_cast<std::int64_t>(t.fresh.size()) +
           std::max<std::int64_t>(0, t.arriving.load(std::memory_order_acquire)) +
           (with_idle ? static_cast<std::int64_t>(t.idle.size()) : 0) -
           t.claimed.load(std::memory_order_relaxed);
  };
  // New connections not yet on their thread's list (it has not run them yet) count as the
  // newest of those that have sent nothing.
  const auto oldest = [&](SessionList NetThread::*list, bool with_idle) {
    NetThread* found = nullptr;
    std::int64_t since = 0;
    for (const auto& t : threads) {
      const std::int64_t its = ((*t).*list).oldest();
      if (unclaimed(*t, with_idle) > 0 && (found == nullptr || its < since)) {
        found = t.get();
        since = its;
      }
    }
    return found;
  };
  NetThread* found = oldest(&NetThread::fresh, false);
  if (found == nullptr) found = oldest(&NetThread::idle, true);
  if (found != nullptr) found->claimed.fetch_add(1, std::memory_order_relaxed);
  return found;
}

namespace {

// True for at most one caller a second per clock (milliseconds of the steady clock when a line
// was last logged): a flood of connections must not become a flood of log lines.
bool once_a_second(std::atomic<std::int64_t>& logged_ms) {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  auto logged = logged_ms.load(std::memory_order_relaxed);
  return now - logged >= 1000 && logged_ms.compare_exchange_strong(logged, now);
}

}  // namespace

void Server::Impl::evicted(NetThread::Evicted what) {
  const auto total = status.evicted_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  if (once_a_second(eviction_logged_ms)) {
    log::warn("connection limit of {} reached; closed {} to make room ({} closed so far)",
              config.max_connections,
              what == NetThread::Evicted::fresh ? "a connection that had sent no request yet"
                                                : "an idle keep-alive connection",
              total);
  }
}

void Server::Impl::open(NetThread& target, Socket socket,
                        std::shared_ptr<asio::ssl::context> tls_now, ClientCounts::Slot slot,
                        std::chrono::steady_clock::time_point accepted) {
  asio::post(target.ioc, [this, &target, tls_now = std::move(tls_now), socket = std::move(socket),
                          slot, accepted]() mutable {
    target.arriving.fetch_sub(1, std::memory_order_relaxed);
    if (tls_now) {
      std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(tls_now),
                                           Admission{slot, {}, accepted})
          ->start();
    } else {
      std::make_shared<Session<TcpStream>>(*this, std::move(socket), nullptr,
                                           Admission{slot, {}, accepted})
          ->start();
    }
  });
  // After the hand-over is queued: whoever sees the count queues after it (claim_room()).
  target.arriving.fetch_add(1, std::memory_order_release);
}

void Server::Impl::refuse(NetThread& target, Socket socket,
                          std::shared_ptr<asio::ssl::context> tls_now, std::string why,
                          std::string message) {
  const auto total = status.refused_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  if (once_a_second(refusal_logged_ms)) {
    log::warn("{}; refusing connections with 503 ({} refused so far)", why, total);
  }
  // Refusals are answered by sessions of their own, a bounded number at once; beyond that
  // the connection is closed without an answer.
  if (refusing.fetch_add(1) >= kMaxRefusing) {
    refusing.fetch_sub(1);
    target.connections.fetch_sub(1, std::memory_order_relaxed);
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  asio::post(target.ioc, [this, tls_now = std::move(tls_now), socket = std::move(socket),
                          message = std::move(message)]() mutable {
    Admission refusal{ClientCounts::kUncounted, std::move(message)};
    if (tls_now) {
      std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(tls_now),
                                           std::move(refusal))
          ->start();
    } else {
      std::make_shared<Session<TcpStream>>(*this, std::move(socket), nullptr, std::move(refusal))
          ->start();
    }
  });
}

}  // namespace wf::http
