// The outbound HTTP client (wheelforge/http/fetcher.hpp). One Exchange is one request and its
// answer, on a keep-alive connection kept by the Pool from an earlier fetch to the same origin
// or on a new one, run by callbacks on the fetcher's one I/O thread; the caller's thread waits for
// its events (the head, each piece of the body, the end) and lets it go on after each, so the body
// is never held whole and the sink runs on the caller's thread. Redirects, credentials and the
// concurrency limit are the caller side's.

#include "wheelforge/http/fetcher.hpp"

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/url.hpp"

#ifndef WF_VERSION
#error "WF_VERSION (the project's version) is defined by src/http/CMakeLists.txt"
#endif

namespace wf::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

/// The most of a body read before the caller gets it.
constexpr std::size_t kChunkBytes = 64 * 1024;
/// The largest answer head accepted.
constexpr std::uint32_t kMaxHeadBytes = 64 * 1024;

std::string duration_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// One connection to an origin, plain or TLS: an exchange's while it runs, then the pool's
/// while it is idle.
struct Connection {
  Connection(asio::io_context& io, ssl::context* context) : socket(io) {
    if (context != nullptr) tls.emplace(io, *context);
  }
  tcp::socket& lowest() { return tls ? tls->next_layer() : socket; }

  tcp::socket socket;  ///< http:// only
  std::optional<ssl::stream<tcp::socket>> tls;
};

/// Idle keep-alive connections by origin ("https://host:port"), for the next fetch to the same
/// origin. The I/O thread's alone: exchanges take and give back connections on it.
class Pool {
 public:
  Pool(asio::io_context& io, std::size_t per_origin, std::chrono::milliseconds idle_timeout)
      : per_origin_(per_origin), idle_timeout_(idle_timeout), timer_(io) {}

  [[nodiscard]] bool enabled() const { return per_origin_ > 0; }

  /// The most recently used idle connection to `origin` that is still open, or null.
  std::unique_ptr<Connection> take(const std::string& origin) {
    const auto it = idle_.find(origin);
    if (it == idle_.end()) return nullptr;
    std::unique_ptr<Connection> found;
    auto& list = it->second;
    while (!list.empty() && !found) {
      Idle last = std::move(list.back());
      list.pop_back();
      if (Clock::now() - last.since < idle_timeout_ && still_open(*last.conn)) {
        found = std::move(last.conn);
      } else {
        close(*last.conn);
      }
    }
    if (list.empty()) idle_.erase(it);
    return found;
  }

  /// Keeps `conn` (its last answer read to the end) for the next fetch to `origin`.
  void give(const std::string& origin, std::unique_ptr<Connection> conn) {
    if (!enabled()) return close(*conn);
    auto& list = idle_[origin];
    if (list.size() >= per_origin_) {
      close(*list.front().conn);
      list.pop_front();
    }
    list.push_back(Idle{std::move(conn), Clock::now()});
    if (!sweeping_) sweep_at(Clock::now() + idle_timeout_);
  }

  static void close(Connection& conn) {
    beast::error_code ignored;
    conn.lowest().close(ignored);  // NOLINT(bugprone-unused-return-value): the error is ignored
  }

 private:
  struct Idle {
    std::unique_ptr<Connection> conn;
    Clock::time_point since;
  };

  /// An idle connection is usable while nothing can be read from it: the server's close (end
  /// of stream, a TLS close_notify) or anything it sent unasked means it is not.
  static bool still_open(Connection& conn) {
    auto& socket = conn.lowest();
    if (!socket.is_open()) return false;
    beast::error_code ec;
    socket.non_blocking(true, ec);
    if (ec) return false;
    char byte = 0;
    // NOLINTNEXTLINE(bugprone-unused-return-value): only the error code tells
    socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
    const bool open = ec == asio::error::would_block;
    beast::error_code ignored;
    socket.non_blocking(false, ignored);  // NOLINT(bugprone-unused-return-value)
    return open;
  }

  /// Closes the connections idle for idle_timeout, at `when` and then as long as any is kept.
  void sweep_at(Clock::time_point when) {
    sweeping_ = true;
    timer_.expires_at(when);
    timer_.async_wait([this](const beast::error_code& ec) {
      sweeping_ = false;
      if (ec) return;
      const auto now = Clock::now();
      std::optional<Clock::time_point> next;
      for (auto it = idle_.begin(); it != idle_.end();) {
        auto& list = it->second;
        while (!list.empty() && now - list.front().since >= idle_timeout_) {
          close(*list.front().conn);
          list.pop_front();
        }
        if (list.empty()) {
          it = idle_.erase(it);
          continue;
        }
        const auto due = list.front().since + idle_timeout_;
        if (!next || due < *next) next = due;
        ++it;
      }
      if (next) sweep_at(*next);
    });
  }

  const std::size_t per_origin_;
  const std::chrono::milliseconds idle_timeout_;
  std::map<std::string, std::deque<Idle>> idle_;
  asio::steady_timer timer_;
  bool sweeping_ = false;
};

/// What the I/O side has for the caller.
enum class Event { none, head, chunk, done };

/// What an exchange shares with the fetcher that runs it.
struct Shared {
  asio::io_context& io;
  ssl::context& tls;
  const FetcherConfig& config;
  Pool& pool;
  std::atomic<std::uint64_t>& opened;
};

/// One request and its answer, on a kept connection to its origin or a new one.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  /// `deadline`: when the whole fetch must have ended (`deadline_text` says how long it had),
  /// or nullopt.
  Exchange(const Shared& shared, Url url, const Headers& headers, std::uint64_t max_bytes,
           std::optional<Clock::time_point> deadline, std::string deadline_text)
      : io_(shared.io),
        shared_(shared),
        config_(shared.config),
        url_(std::move(url)),
        where_("upstream " + url_.redacted()),
        origin_(url_.scheme + "://" + url_.host + ":" + std::to_string(url_.port)),
        deadline_(deadline),
        deadline_text_(std::move(deadline_text)),
        max_bytes_(max_bytes),
        resolver_(shared.io),
        timer_(shared.io),
        deadline_timer_(shared.io) {
    request_.method(bhttp::verb::get);
    request_.target(url_.target());
    request_.version(11);
    request_.set(bhttp::field::host, url_.authority());
    request_.set(bhttp::field::user_agent,
                 config_.user_agent.empty() ? default_user_agent() : config_.user_agent);
    // HTTP/1.1 keeps the connection by default; without a pool it is one per fetch.
    if (!shared.pool.enabled()) request_.set(bhttp::field::connection, "close");
    // The body as stored upstream (the bytes its hash is over): RFC 9110 reads a request
    // without Accept-Encoding as accepting any coding, so identity is asked for by name.
    request_.set(bhttp::field::accept_encoding, "identity");
    for (const auto& [name, value] : headers) request_.insert(name, value);
    new_parser();
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  Exchange(Exchange&&) = delete;
  Exchange& operator=(Exchange&&) = delete;
  ~Exchange() = default;

  // --- The caller's side (any thread). ---

  void start() {
    asio::post(io_, [self = shared_from_this()] { self->begin(); });
  }

  /// Waits for the next event. After head and chunk, the I/O side waits for resume() or
  /// abort(); done comes last.
  Event wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return pending_ != Event::none || done_; });
    if (pending_ != Event::none) return std::exchange(pending_, Event::none);
    return Event::done;
  }

  /// Reads on after head or chunk.
  void resume() {
    {
      const std::lock_guard lock(mutex_);
      if (done_) return;
    }
    asio::post(io_, [self = shared_from_this()] { self->read_on(); });
  }

  /// Stops the exchange and closes its connection.
  void abort() {
    asio::post(io_, [self = shared_from_this()] {
      self->finish(make_error(Errc::unavailable, self->where_ + ": fetch stopped"));
    });
  }

  // Valid after head (the I/O side is paused until resume()).
  [[nodiscard]] int status() const { return static_cast<int>(parser_->get().result_int()); }
  [[nodiscard]] Headers headers() const {
    Headers out;
    for (const auto& field : parser_->get()) {
      out.emplace_back(to_lower(field.name_string()), std::string(field.value()));
    }
    return out;
  }
  [[nodiscard]] std::string_view location() const { return parser_->get()[bhttp::field::location]; }
  // Valid after chunk.
  [[nodiscard]] std::string_view chunk() const { return {chunk_.data(), chunk_bytes_}; }
  // Valid after done: the failure, if any.
  [[nodiscard]] std::optional<Error> failure() const {
    const std::lock_guard lock(mutex_);
    return failure_;
  }

 private:
  // --- The I/O side (the fetcher's thread). ---

  void new_parser() {
    parser_.emplace();
    parser_->header_limit(kMaxHeadBytes);
    parser_->body_limit(max_bytes_);
  }

  template <typename Fn>
  void with_stream(Fn&& fn) {
    if (conn_->tls) {
      fn(*conn_->tls);
    } else {
      fn(conn_->socket);
    }
  }

  /// Fails the exchange with "timed out `what`" unless disarm() or the next arm() comes first.
  void arm(std::chrono::milliseconds limit, std::string what) {
    const auto generation = ++timer_generation_;
    timer_.expires_after(limit);
    timer_.async_wait([self = shared_from_this(), generation, limit,
                       what = std::move(what)](const beast::error_code& ec) {
      if (ec || generation != self->timer_generation_ || self->finished_) return;
      self->finish(make_error(Errc::unavailable, self->where_ + ": timed out " + what + " (" +
                                                     duration_text(limit) + ")"));
    });
  }
  void disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void fail(const std::string& cause) {
    finish(make_error(Errc::unavailable, where_ + ": " + cause));
  }

  void begin() {
    if (finished_) return;
    if (deadline_) {
      deadline_timer_.expires_at(*deadline_);
      deadline_timer_.async_wait([self = shared_from_this()](const beast::error_code& ec) {
        if (ec || self->finished_) return;
        self->fail("deadline passed: the fetch did not end within " + self->deadline_text_);
      });
    }
    if (auto kept = shared_.pool.take(origin_)) {
      conn_ = std::move(kept);
      reused_ = true;
      return write();
    }
    connect();
  }

  /// A new connection: resolve, connect and (https) the TLS handshake.
  void connect() {
    conn_ = std::make_unique<Connection>(io_, url_.https() ? &shared_.tls : nullptr);
    reused_ = false;
    shared_.opened.fetch_add(1, std::memory_order_relaxed);
    // One deadline for resolving, connecting and the TLS handshake.
    arm(config_.connect_timeout, "connecting to " + url_.authority());
    resolver_.async_resolve(url_.host, std::to_string(url_.port),
                            [self = shared_from_this()](const beast::error_code& ec,
                                                        const tcp::resolver::results_type& r) {
                              self->on_resolve(ec, r);
                            });
  }

  /// A kept connection failed before any byte of an answer (the server had closed it, or
  /// closed it as the request came): the request again, once, on a new connection. Every
  /// fetch is a GET, which may be sent again.
  bool retry_on_new_connection() {
    if (!reused_) return false;
    Pool::close(*conn_);
    buffer_.clear();
    new_parser();
    connect();
    return true;
  }

  void on_resolve(const beast::error_code& ec, const tcp::resolver::results_type& results) {
    if (finished_) return;
    if (ec) return fail("cannot resolve host name " + url_.host + ": " + ec.message());
    asio::async_connect(conn_->lowest(), results,
                        [self = shared_from_this()](const beast::error_code& e,
                                                    const tcp::endpoint&) { self->on_connect(e); });
  }

  void on_connect(const beast::error_code& ec) {
    if (finished_) return;
    if (ec) return fail("cannot connect to " + url_.authority() + ": " + ec.message());
    if (!conn_->tls) return write();
    // Asio's SSL layer has no call for these: OpenSSL's own, on the stream's native handle
    // (declared by Asio's SSL headers; OpenSSL's are crypto's alone). SNI (not for address
    // literals, RFC 6066) and the name the certificate must carry.
    SSL* ssl = conn_->tls->native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    bool named = false;
    if (url_.host_is_ip()) {
      named = X509_VERIFY_PARAM_set1_ip_asc(param, url_.host.c_str()) == 1;
    } else {
      // SSL_set_tlsext_host_name() without its macro's C cast.
      named = SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                       const_cast<char*>(url_.host.c_str())) == 1 &&
              X509_VERIFY_PARAM_set1_host(param, url_.host.c_str(), url_.host.size()) == 1;
    }
    if (!named) return fail("cannot set up TLS for host " + url_.host);
    conn_->tls->set_verify_mode(ssl::verify_peer);
    conn_->tls->async_handshake(
        ssl::stream_base::client,
        [self = shared_from_this()](const beast::error_code& e) { self->on_handshake(e); });
  }

  void on_handshake(const beast::error_code& ec) {
    if (finished_) return;
    if (ec) {
      const long verify = SSL_get_verify_result(conn_->tls->native_handle());
      if (verify != X509_V_OK) {
        return fail(
            "TLS certificate of " + url_.host +
            " not accepted: certificate verify failed: " + X509_verify_cert_error_string(verify));
      }
      return fail("TLS handshake with " + url_.authority() + " failed: " + ec.message());
    }
    write();
  }

  void write() {
    arm(config_.read_timeout, "sending the request");
    with_stream([this](auto& stream) {
      bhttp::async_write(stream, request_,
                         [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                           self->on_write(ec);
                         });
    });
  }

  void on_write(const beast::error_code& ec) {
    if (finished_) return;
    if (ec) {
      if (retry_on_new_connection()) return;
      return fail("sending the request failed: " + ec.message());
    }
    arm(config_.read_timeout, "waiting for an answer");
    with_stream([this](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_,
                               [self = shared_from_this()](const beast::error_code& e,
                                                           std::size_t) { self->on_head(e); });
    });
  }

  void on_head(const beast::error_code& ec) {
    if (finished_) return;
    disarm();
    if (ec) {
      if (!parser_->got_some() && buffer_.size() == 0 && retry_on_new_connection()) return;
      return fail_reading(ec, "reading the answer's head");
    }
    publish(Event::head);
  }

  /// After head and after each chunk: the rest of the body, or the end.
  void read_on() {
    if (finished_) return;
    if (parser_->is_done()) return finish(std::nullopt);
    auto& body = parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    arm(config_.read_timeout, "waiting for the body");
    read_started_ = Clock::now();
    with_stream([this](auto& stream) {
      bhttp::async_read_some(stream, buffer_, *parser_,
                             [self = shared_from_this()](const beast::error_code& e, std::size_t) {
                               self->on_body(e);
                             });
    });
  }

  void on_body(beast::error_code ec) {
    if (finished_) return;
    disarm();
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return fail_reading(ec, "reading the body");
    chunk_bytes_ = chunk_.size() - parser_->get().body().size;
    if (too_slow()) return;
    if (chunk_bytes_ > 0) return publish(Event::chunk);
    read_on();
  }

  /// Counts the last read against the minimum transfer rate; true when the window it closes
  /// fell below it (the exchange has failed then).
  bool too_slow() {
    window_waited_ += Clock::now() - read_started_;
    window_bytes_ += chunk_bytes_;
    if (config_.min_rate == 0 || window_waited_ < config_.rate_window) return false;
    const double seconds = std::chrono::duration<double>(window_waited_).count();
    const auto rate = static_cast<std::uint64_t>(static_cast<double>(window_bytes_) / seconds);
    window_waited_ = {};
    window_bytes_ = 0;
    if (rate >= config_.min_rate) return false;
    fail("the body came at " + std::to_string(rate) + " bytes/s, below the minimum of " +
         std::to_string(config_.min_rate) + " bytes/s (over " + duration_text(config_.rate_window) +
         " of waiting for it)");
    return true;
  }

  void fail_reading(const beast::error_code& ec, const std::string& what) {
    if (ec == bhttp::error::body_limit) {
      return finish(make_error(Errc::too_large, where_ + ": the answer is larger than " +
                                                    std::to_string(max_bytes_) + " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return fail("the answer's head is larger than " + std::to_string(kMaxHeadBytes) + " bytes");
    }
    if (ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream ||
        ec == ssl::error::stream_truncated) {
      return fail("the connection closed while " + what);
    }
    fail(what + " failed: " + ec.message());
  }

  void publish(Event event) {
    const std::lock_guard lock(mutex_);
    pending_ = event;
    cv_.notify_all();
  }

  void finish(std::optional<Error> failure) {
    if (finished_) return;
    finished_ = true;
    disarm();
    deadline_timer_.cancel();
    resolver_.cancel();
    if (conn_) {
      // Kept for the next fetch only with its answer read to the end and nothing after it.
      if (!failure && parser_->is_done() && parser_->keep_alive() && buffer_.size() == 0) {
        shared_.pool.give(origin_, std::move(conn_));
      } else {
        Pool::close(*conn_);
      }
    }
    const std::lock_guard lock(mutex_);
    failure_ = std::move(failure);
    done_ = true;
    cv_.notify_all();
  }

  asio::io_context& io_;
  const Shared& shared_;
  const FetcherConfig& config_;
  const Url url_;
  const std::string where_;   ///< "upstream https://host/path" (no credentials, no query)
  const std::string origin_;  ///< the pool's key: "https://host:443"
  const std::optional<Clock::time_point> deadline_;
  const std::string deadline_text_;
  const std::uint64_t max_bytes_;

  // The I/O thread's alone.
  tcp::resolver resolver_;
  std::unique_ptr<Connection> conn_;
  bool reused_ = false;  ///< conn_ came from the pool
  asio::steady_timer timer_;
  asio::steady_timer deadline_timer_;
  std::uint64_t timer_generation_ = 0;
  bhttp::request<bhttp::empty_body> request_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  bool finished_ = false;
  Clock::time_point read_started_;
  Clock::duration window_waited_{};  ///< waiting for the body since the rate window began
  std::uint64_t window_bytes_ = 0;   ///< body bytes since then
  // Written by the I/O thread before it publishes head or chunk, read by the caller after.
  std::array<char, kChunkBytes> chunk_{};
  std::size_t chunk_bytes_ = 0;

  // Shared.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  Event pending_ = Event::none;
  bool done_ = false;
  std::optional<Error> failure_;
};

class BeastFetcher final : public handlers::Fetcher {
 public:
  BeastFetcher(FetcherConfig config, std::unique_ptr<ssl::context> tls)
      : config_(std::move(config)),
        tls_(std::move(tls)),
        work_(asio::make_work_guard(io_)),
        pool_(io_, config_.idle_per_origin, config_.idle_timeout),
        shared_{io_, *tls_, config_, pool_, opened_} {
    thread_ = std::thread([this] { run_io(); });
  }
  BeastFetcher(const BeastFetcher&) = delete;
  BeastFetcher& operator=(const BeastFetcher&) = delete;
  BeastFetcher(BeastFetcher&&) = delete;
  BeastFetcher& operator=(BeastFetcher&&) = delete;
  ~BeastFetcher() override {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Result<handlers::FetchResponse> fetch(const handlers::FetchRequest& req) override {
    const auto started = Clock::now();
    auto url = parse_url(req.url);
    if (!url) {
      log::warn("upstream fetch refused: {}", url.error().message);
      return make_error(Errc::invalid, "upstream URL: " + url.error().message);
    }
    for (const auto& [name, value] : req.headers) {
      if (name.empty() ||
          (name + value).find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
        return make_error(Errc::invalid, "upstream request header '" + sanitize_for_log(name, 40) +
                                             "': empty, or a line break or NUL in it");
      }
      if (const auto lower = to_lower(name);
          lower == "authorization" || lower == "proxy-authorization") {
        return make_error(Errc::invalid, "upstream request header '" + sanitize_for_log(name, 40) +
                                             "': credentials go in FetchRequest::credentials");
      }
    }
    auto credentials = credentials_of(req, *url);
    if (!credentials) return credentials.error();
    Result<handlers::FetchResponse> result = make_error(Errc::internal, "");
    if (auto slot = acquire(url->redacted()); slot.ok()) {
      std::optional<Clock::time_point> deadline;
      if (req.deadline.count() > 0) deadline = started + req.deadline;
      result = fetch_from(*url, req, *credentials, deadline);
      release();
    } else {
      result = slot.error();
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    if (result.ok()) {
      const auto& r = result.value();
      log::debug("upstream GET {} -> {} bytes={} ms={}{}", url->redacted(), r.status, r.body_bytes,
                 ms, r.url == url->str() ? "" : " answered-by=" + redacted(r.url));
    } else {
      log::warn("upstream GET {} failed ms={}: {}", url->redacted(), ms, result.error().message);
    }
    return result;
  }

  [[nodiscard]] std::uint64_t connections_opened() const override {
    return opened_.load(std::memory_order_relaxed);
  }

 private:
  static std::string redacted(const std::string& url) {
    auto parsed = parse_url(url);
    return parsed ? parsed->redacted() : std::string("?");
  }

  void run_io() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        log::error("upstream fetcher: unexpected exception on the I/O thread: {}", e.what());
      }
    }
  }

  /// Waits for one of the max_concurrent places.
  Status acquire(const std::string& what) {
    std::unique_lock lock(slots_mutex_);
    const bool got = slots_cv_.wait_for(lock, config_.queue_timeout,
                                        [this] { return in_use_ < config_.max_concurrent; });
    if (!got) {
      return make_error(Errc::unavailable, "upstream " + what + ": too many upstream fetches (" +
                                               std::to_string(config_.max_concurrent) +
                                               " in progress); none finished within " +
                                               duration_text(config_.queue_timeout));
    }
    ++in_use_;
    return ok_status();
  }
  void release() {
    {
      const std::lock_guard lock(slots_mutex_);
      --in_use_;
    }
    slots_cv_.notify_one();
  }

  /// Basic credentials and the origin they may be sent to.
  struct Credentials {
    Url origin;
    std::string authorization;  ///< "Basic ..."
  };

  /// The credentials of `req`: FetchRequest::credentials, else the userinfo of its URL `url`
  /// (for the origin of `url`); nullopt without either. Fails with invalid when the
  /// credentials' origin is not an http(s) URL.
  static Result<std::optional<Credentials>> credentials_of(const handlers::FetchRequest& req,
                                                           const Url& url) {
    if (req.credentials) {
      auto origin = parse_url(req.credentials->origin);
      if (!origin) {
        return make_error(Errc::invalid,
                          "the origin of the upstream credentials: " + origin.error().message);
      }
      return std::optional<Credentials>(Credentials{
          std::move(*origin),
          "Basic " + base64_encode(req.credentials->username + ":" + req.credentials->password)});
    }
    if (const auto creds = url.credentials()) {
      return std::optional<Credentials>(
          Credentials{url, "Basic " + base64_encode(creds->first + ":" + creds->second)});
    }
    return std::optional<Credentials>();
  }

  /// The headers sent to `url`: the caller's (less those that are the fetcher's), and the
  /// credentials when `url` has their origin's scheme, host and port, and only then. The one
  /// place that decides where credentials go: the first request and every redirect alike, so
  /// a page's link or a redirect to another host (or to https on the same host) never gets
  /// them, and a redirect back to their origin gets them again.
  static Headers headers_for(const Url& url, const Headers& given,
                             const std::optional<Credentials>& credentials) {
    Headers out;
    for (const auto& [name, value] : given) {
      const auto lower = to_lower(name);
      if (lower == "host" || lower == "user-agent" || lower == "connection" ||
          lower == "accept-encoding" || lower == "content-length" || lower == "transfer-encoding" ||
          lower == "te" || lower == "upgrade") {
        continue;
      }
      out.emplace_back(name, value);
    }
    if (credentials && credentials->origin.same_origin(url)) {
      out.emplace_back("Authorization", credentials->authorization);
    }
    return out;
  }

  /// `deadline`: when the whole fetch must have ended (req.deadline after it began), if ever.
  Result<handlers::FetchResponse> fetch_from(Url url, const handlers::FetchRequest& req,
                                             const std::optional<Credentials>& credentials,
                                             std::optional<Clock::time_point> deadline) {
    std::set<std::string> seen{url.str()};
    for (int redirects = 0;; ++redirects) {
      auto exchange =
          std::make_shared<Exchange>(shared_, url, headers_for(url, req.headers, credentials),
                                     req.max_bytes, deadline, duration_text(req.deadline));
      exchange->start();
      if (exchange->wait() == Event::done) {
        auto failure = exchange->failure();
        return failure ? std::move(*failure) : make_error(Errc::internal, "no answer");
      }
      const int status = exchange->status();
      const auto location = exchange->location();
      if (is_redirect(status) && !location.empty()) {
        auto next = resolve_url(url, location);
        exchange->abort();
        const std::string where = "upstream " + url.redacted();
        if (!next) {
          return make_error(Errc::unavailable,
                            where + ": redirect to an invalid URL: " + next.error().message);
        }
        if (redirects >= config_.max_redirects) {
          return make_error(Errc::unavailable, where + ": too many redirects (more than " +
                                                   std::to_string(config_.max_redirects) + ")");
        }
        if (url.https() && !next->https()) {
          return make_error(Errc::unavailable, where + ": redirect from https to http refused (" +
                                                   next->redacted() + ")");
        }
        if (!seen.insert(next->str()).second) {
          return make_error(Errc::unavailable,
                            where + ": redirect loop (back to " + next->redacted() + ")");
        }
        url = std::move(*next);
        continue;
      }
      handlers::FetchResponse out;
      out.status = status;
      out.headers = exchange->headers();
      out.url = url.str();
      if (req.on_head) {
        if (auto st = req.on_head(out.status, out.headers); !st) {
          exchange->abort();
          return st.error();
        }
      }
      for (;;) {
        exchange->resume();
        const auto event = exchange->wait();
        if (event == Event::done) {
          if (auto failure = exchange->failure()) return std::move(*failure);
          return out;
        }
        const auto chunk = exchange->chunk();
        out.body_bytes += chunk.size();
        if (req.sink) {
          auto sunk = req.sink(chunk);
          if (!sunk) {
            exchange->abort();
            return sunk.error();
          }
        } else {
          out.body.append(chunk);
        }
      }
    }
  }

  FetcherConfig config_;
  std::unique_ptr<ssl::context> tls_;  // outlives io_ and the exchanges in its queue
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  Pool pool_;  // closed before io_ goes
  std::atomic<std::uint64_t> opened_{0};
  Shared shared_;
  std::thread thread_;

  std::mutex slots_mutex_;
  std::condition_variable slots_cv_;
  std::size_t in_use_ = 0;
};

}  // namespace

std::string default_user_agent() {
  return std::string("wheelforge/") + WF_VERSION;
}

Result<std::unique_ptr<handlers::Fetcher>> make_fetcher(const FetcherConfig& config) {
  if (config.max_concurrent == 0) {
    return make_error(Errc::invalid, "upstream fetches at once: must be at least 1");
  }
  if (config.connect_timeout.count() <= 0 || config.read_timeout.count() <= 0) {
    return make_error(Errc::invalid, "upstream timeouts must be longer than 0");
  }
  if (config.max_redirects < 0) {
    return make_error(Errc::invalid, "upstream redirects: must be 0 or more");
  }
  if ((config.min_rate > 0 && config.rate_window.count() <= 0) ||
      (config.idle_per_origin > 0 && config.idle_timeout.count() <= 0)) {
    return make_error(Errc::invalid, "upstream rate window and idle timeout must be longer than 0");
  }
  auto tls = std::make_unique<ssl::context>(ssl::context::tls_client);
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  beast::error_code ec;
  tls->set_default_verify_paths(ec);
  if (ec) log::warn("upstream fetcher: the system's certificate store: {}", ec.message());
  if (!config.ca_file.empty()) {
    std::error_code fs_ec;
    if (!std::filesystem::is_regular_file(config.ca_file, fs_ec)) {
      return make_error(Errc::invalid, "CA file " + config.ca_file + ": not a readable file");
    }
    tls->load_verify_file(config.ca_file, ec);
    if (ec) {
      return make_error(Errc::invalid, "CA file " + config.ca_file +
                                           ": no PEM certificate in it (" + ec.message() + ")");
    }
  }
  tls->set_verify_mode(ssl::verify_peer);
  return std::unique_ptr<handlers::Fetcher>(std::make_unique<BeastFetcher>(config, std::move(tls)));
}

}  // namespace wf::http
