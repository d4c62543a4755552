#pragma once
// A small HTTP(S) server on 127.0.0.1 for the fetcher's tests: each connection runs a handler
// on a thread of its own, with blocking reads and writes of raw bytes, so that a test can
// answer anything (a chunked body, a redirect, nothing at all) exactly as it wants.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "wheelforge/util/strings.hpp"

namespace wf::http::test {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

/// One accepted connection, plain or TLS.
class Conn {
 public:
  Conn(tcp::socket socket, ssl::context* tls) {
    if (tls) {
      tls_.emplace(std::move(socket), *tls);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  /// The TLS handshake (nothing for plain connections); false when the client gave up.
  bool handshake() {
    if (!tls_) return true;
    boost::system::error_code ec;
    tls_->handshake(ssl::stream_base::server, ec);
    return !ec;
  }

  /// The next request's head (request line and headers), or "" when the client closed.
  std::string read_head() {
    boost::system::error_code ec;
    std::size_t n = 0;
    if (tls_) {
      n = asio::read_until(*tls_, asio::dynamic_buffer(pending_), "\r\n\r\n", ec);
    } else {
      n = asio::read_until(*plain_, asio::dynamic_buffer(pending_), "\r\n\r\n", ec);
    }
    if (ec) return {};
    std::string head = pending_.substr(0, n);
    pending_.erase(0, n);
    return head;
  }

  /// Writes all of `bytes`; false when the client is gone.
  bool write(std::string_view bytes) {
    boost::system::error_code ec;
    if (tls_) {
      asio::write(*tls_, asio::buffer(bytes), ec);
    } else {
      asio::write(*plain_, asio::buffer(bytes), ec);
    }
    return !ec;
  }

  /// Closes the connection (a server with keep-alive serves no more requests on it).
  void close() {
    boost::system::error_code ec;
    if (tls_) {
      tls_->next_layer().close(ec);
    } else {
      plain_->close(ec);
    }
    closed_ = true;
  }
  [[nodiscard]] bool closed() const { return closed_; }

  /// True once the client has closed the connection (reads until then).
  bool wait_closed() {
    boost::system::error_code ec;
    std::array<char, 4096> sink{};
    for (;;) {
      const std::size_t n = tls_ ? tls_->read_some(asio::buffer(sink), ec)
                                 : plain_->read_some(asio::buffer(sink), ec);
      if (ec) return true;
      if (n == 0) return true;
    }
  }

 private:
  std::optional<tcp::socket> plain_;
  std::optional<ssl::stream<tcp::socket>> tls_;
  std::string pending_;
  bool closed_ = false;
};

/// The path of a request head's request line ("GET /a/b?c HTTP/1.1" -> "/a/b?c").
inline std::string path_of(std::string_view head) {
  const auto sp = head.find(' ');
  const auto sp2 = head.find(' ', sp + 1);
  return std::string(head.substr(sp + 1, sp2 - sp - 1));
}

/// The value of a request head's header (any case), or nullopt.
inline std::optional<std::string> header_of(std::string_view head, std::string_view name) {
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const auto end = head.find("\r\n", pos + 2);
    const auto line = head.substr(pos + 2, end - pos - 2);
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && iequals(line.substr(0, colon), name)) {
      return std::string(trim(line.substr(colon + 1)));
    }
    pos = end;
  }
  return std::nullopt;
}

/// "HTTP/1.1 <status>" with Content-Length, `extra` header lines ("Name: value\r\n") and body.
inline std::string response(int status, std::string_view body, std::string_view extra = {}) {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra) +
         "\r\n" + std::string(body);
}

class LoopbackServer {
 public:
  using Handler = std::function<void(Conn&, const std::string& head)>;

  /// Serves one request per connection with `handler` (given the request's head); TLS with
  /// `tls` when set. With `keep_alive`, each connection serves requests until the client
  /// closes it or the handler calls Conn::close().
  explicit LoopbackServer(Handler handler, ssl::context* tls = nullptr, bool keep_alive = false)
      : handler_(std::move(handler)), tls_(tls), keep_alive_(keep_alive), acceptor_(io_) {
    const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  ~LoopbackServer() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    // Wakes the blocking accept.
    boost::system::error_code ec;
    tcp::socket poke(io_);
    poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    accept_thread_.join();
    for (auto& t : conn_threads_) t.join();
  }

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string url(std::string_view path) const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) +
           std::string(path);
  }
  /// Request heads received so far.
  [[nodiscard]] int requests() const { return requests_.load(); }
  /// Connections accepted so far (with TLS: those whose handshake succeeded).
  [[nodiscard]] int connections() const { return connections_.load(); }

  /// For handlers that hold their connection open: returns when the server stops.
  void wait_until_stopped() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return stopping_; });
  }

 private:
  void accept_loop() {
    for (;;) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      {
        const std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      if (ec) continue;
      conn_threads_.emplace_back([this, s = std::move(socket)]() mutable {
        Conn conn(std::move(s), tls_);
        if (!conn.handshake()) return;
        ++connections_;
        do {
          const auto head = conn.read_head();
          if (head.empty()) return;
          ++requests_;
          handler_(conn, head);
        } while (keep_alive_ && !conn.closed());
      });
    }
  }

  Handler handler_;
  ssl::context* tls_;
  bool keep_alive_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::thread accept_thread_;
  std::vector<std::thread> conn_threads_;
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace wf::http::test
