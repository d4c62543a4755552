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

/// Closes one idle keep-alive connection of this thread; false when it has none.
bool evict_idle_session(NetThread& thread) {
  for (SessionBase* s : thread.sessions) {
    if (s->evict_if_idle()) return true;
  }
  return false;
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
                          admit(target, std::move(socket), tls);
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
// first, then the server's. At the server's cap an idle keep-alive connection, on whichever
// thread has one, is closed to make room; with none, the new connection is refused with 503.
void Server::Impl::admit(NetThread& target, Socket socket,
                         const std::shared_ptr<asio::ssl::context>& tls_now) {
  const auto limit = static_cast<std::uint32_t>(
      std::min<std::size_t>(config.max_connections_per_client, UINT32_MAX));
  const auto slot = clients.acquire(client_key(accept_peer.address()), limit);
  if (!slot) {
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(limit) + " per client reached by " +
                      accept_peer.address().to_string(),
                  "too many connections from your address: the limit is " + std::to_string(limit) +
                      " connections per client; retry later");
  }
  if (status.open_connections.load() < config.max_connections) {
    status.open_connections.fetch_add(1);
    return open(target, std::move(socket), tls_now, *slot);
  }
  NetThread* idle = nullptr;
  for (std::size_t i = 0; i < threads.size() && idle == nullptr; ++i) {
    NetThread& t = *threads[(next_thread + i) % threads.size()];
    if (t.idle_keep_alive.load(std::memory_order_relaxed) > 0) idle = &t;
  }
  ++next_thread;
  if (idle == nullptr) {
    clients.release(*slot);
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(config.max_connections) + " reached",
                  "the server is at its connection limit; retry later");
  }
  // Counted now, so that the connections accepted meanwhile see the cap.
  status.open_connections.fetch_add(1);
  asio::post(idle->ioc, [this, idle, &target, socket = std::move(socket), tls = tls_now,
                         slot = *slot]() mutable {
    if (evict_idle_session(*idle)) return open(target, std::move(socket), std::move(tls), slot);
    // That connection got busy meanwhile.
    status.open_connections.fetch_sub(1);
    clients.release(slot);
    refuse(target, std::move(socket), std::move(tls),
           "connection limit of " + std::to_string(config.max_connections) + " reached",
           "the server is at its connection limit; retry later");
    maybe_finish_stop();
  });
}

void Server::Impl::open(NetThread& target, Socket socket,
                        std::shared_ptr<asio::ssl::context> tls_now, ClientCounts::Slot slot) {
  asio::post(target.ioc, [this, tls_now = std::move(tls_now), socket = std::move(socket),
                          slot]() mutable {
    if (tls_now) {
      std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(tls_now),
                                           Admission{slot, {}})
          ->start();
    } else {
      std::make_shared<Session<TcpStream>>(*this, std::move(socket), nullptr, Admission{slot, {}})
          ->start();
    }
  });
}

void Server::Impl::refuse(NetThread& target, Socket socket,
                          std::shared_ptr<asio::ssl::context> tls_now, std::string why,
                          std::string message) {
  const auto total = status.refused_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  // One line a second at most: a flood of connections must not become a flood of lines.
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  auto logged = refusal_logged_ms.load(std::memory_order_relaxed);
  if (now - logged >= 1000 && refusal_logged_ms.compare_exchange_strong(logged, now)) {
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
