#pragma once
// The types the parts of the transport share: streams bound to their thread's io_context, the
// request parser, and what the server needs of every connection.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <memory>

#include "wheelforge/handlers/message.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// Streams bound to their thread's io_context by type (no type-erased executor per operation).
using Executor = asio::io_context::executor_type;
using Socket = tcp::socket::rebind_executor<Executor>::other;
using TcpStream = beast::basic_stream<tcp, Executor>;
using TlsStream = beast::ssl_stream<TcpStream>;
using RequestParser = bhttp::request_parser<bhttp::buffer_body>;

using SnapshotPtr = std::shared_ptr<const snapshot::Snapshot>;
using handlers::error_response;
using handlers::Method;
using handlers::Request;
using handlers::Response;

class SessionList;

/// What the server needs of every connection, whatever its transport.
class SessionBase {
 public:
  SessionBase() = default;
  SessionBase(const SessionBase&) = delete;
  SessionBase& operator=(const SessionBase&) = delete;
  virtual ~SessionBase() = default;
  /// Closes the connection if it is waiting for a new request (graceful stop).
  virtual void close_if_idle() = 0;
  /// Closes the connection to make room at the connection cap. Called only for a connection
  /// on one of its thread's eviction lists (NetThread::fresh, NetThread::idle), which it
  /// leaves.
  virtual void evict() = 0;

 private:
  friend class SessionList;
  // The hook of the one SessionList it is on (none: list_ is null).
  SessionList* list_ = nullptr;
  SessionBase* prev_ = nullptr;
  SessionBase* next_ = nullptr;
  std::int64_t listed_at_ = 0;  // steady clock, ns: when it joined the list
};

/// Connections of one network thread in the order they joined: an intrusive list, so that
/// joining, leaving and finding the oldest are O(1) and allocate nothing. Changed only on its
/// thread; its size and when its oldest joined are published (atomics) for the acceptor,
/// which picks the thread to make room on without touching the list.
class SessionList {
 public:
  static constexpr std::int64_t kEmpty = INT64_MAX;

  SessionList() = default;
  SessionList(const SessionList&) = delete;
  SessionList& operator=(const SessionList&) = delete;

  /// Adds `s` at the end, taking it off whatever list it was on. `since` (steady clock ns) is
  /// its age as oldest() tells it once it is first; the list keeps the order of joining.
  void push_back(SessionBase& s, std::int64_t since) {
    if (s.list_ != nullptr) s.list_->remove(s);
    s.list_ = this;
    s.prev_ = tail_;
    s.next_ = nullptr;
    s.listed_at_ = since;
    (tail_ != nullptr ? tail_->next_ : head_) = &s;
    tail_ = &s;
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (head_ == &s) oldest_.store(since, std::memory_order_relaxed);
  }

  /// Takes `s` off its list, if it is on one (any list: a no-op otherwise).
  static void leave(SessionBase& s) {
    if (s.list_ != nullptr) s.list_->remove(s);
  }

  /// The connection that joined first; null when empty.
  [[nodiscard]] SessionBase* front() const { return head_; }

  /// For the acceptor (any thread): how many, and when the oldest joined (kEmpty: none).
  [[nodiscard]] std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t oldest() const { return oldest_.load(std::memory_order_relaxed); }

 private:
  void remove(SessionBase& s) {
    (s.prev_ != nullptr ? s.prev_->next_ : head_) = s.next_;
    (s.next_ != nullptr ? s.next_->prev_ : tail_) = s.prev_;
    s.list_ = nullptr;
    s.prev_ = s.next_ = nullptr;
    size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    oldest_.store(head_ != nullptr ? head_->listed_at_ : kEmpty, std::memory_order_relaxed);
  }

  SessionBase* head_ = nullptr;
  SessionBase* tail_ = nullptr;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::int64_t> oldest_{kEmpty};
};

/// The steady clock in ns, as SessionList keeps it.
inline std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace wf::http
