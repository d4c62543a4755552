// The outbound HTTP client (wheelforge/http/fetcher.hpp). One Exchange is one request and its
// answer on a connection of its own (Connection: close), run by callbacks on the fetcher's one
// I/O thread; the caller's thread waits for its events (the head, each piece of the body, the
// end) and lets it go on after each, so the body is never held whole and the sink runs on the
// caller's thread. Redirects, credentials and the concurrency limit are the caller side's.

#include "wheelforge/http/fetcher.hpp"

#include <array>
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
#include <filesystem>
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

/// What the I/O side has for the caller.
enum class Event { none, head, chunk, done };

/// One request and its answer, on a connection of its own.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::io_context& io, ssl::context& tls, const FetcherConfig& config, Url url,
           const Headers& headers, std::uint64_t max_bytes)
      : io_(io),
        config_(config),
        url_(std::move(url)),
        where_("upstream " + url_.redacted()),
        resolver_(io),
        socket_(io),
        timer_(io) {
    if (url_.https()) tls_.emplace(io, tls);
    request_.method(bhttp::verb::get);
    request_.target(url_.target());
    request_.version(11);
    request_.set(bhttp::field::host, url_.authority());
    request_.set(bhttp::field::user_agent,
                 config_.user_agent.empty() ? default_user_agent() : config_.user_agent);
    request_.set(bhttp::field::connection, "close");
    // The body as stored upstream (the bytes its hash is over): RFC 9110 reads a request
    // without Accept-Encoding as accepting any coding, so identity is asked for by name.
    request_.set(bhttp::field::accept_encoding, "identity");
    for (const auto& [name, value] : headers) request_.insert(name, value);
    parser_.header_limit(kMaxHeadBytes);
    parser_.body_limit(max_bytes);
    max_bytes_ = max_bytes;
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  Exchange(Exchange&&) = delete;
  Exchange& operator=(Exchange&&) = delete;
  ~Exchange() = default;

  // --- The caller's side (any thread). ---

  void start() {
    asio::post(io_, [self = shared_from_this()] { self->resolve(); });
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
  [[nodiscard]] int status() const { return static_cast<int>(parser_.get().result_int()); }
  [[nodiscard]] Headers headers() const {
    Headers out;
    for (const auto& field : parser_.get()) {
      out.emplace_back(to_lower(field.name_string()), std::string(field.value()));
    }
    return out;
  }
  [[nodiscard]] std::string_view location() const { return parser_.get()[bhttp::field::location]; }
  // Valid after chunk.
  [[nodiscard]] std::string_view chunk() const { return {chunk_.data(), chunk_bytes_}; }
  // Valid after done: the failure, if any.
  [[nodiscard]] std::optional<Error> failure() const {
    const std::lock_guard lock(mutex_);
    return failure_;
  }

 private:
  // --- The I/O side (the fetcher's thread). ---

  template <typename Fn>
  void with_stream(Fn&& fn) {
    if (tls_) {
      fn(*tls_);
    } else {
      fn(socket_);
    }
  }

  tcp::socket& lowest() { return tls_ ? tls_->next_layer() : socket_; }

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

  void resolve() {
    if (finished_) return;
    // One deadline for resolving, connecting and the TLS handshake.
    arm(config_.connect_timeout, "connecting to " + url_.authority());
    resolver_.async_resolve(url_.host, std::to_string(url_.port),
                            [self = shared_from_this()](const beast::error_code& ec,
                                                        const tcp::resolver::results_type& r) {
                              self->on_resolve(ec, r);
                            });
  }

  void on_resolve(const beast::error_code& ec, const tcp::resolver::results_type& results) {
    if (finished_) return;
    if (ec) return fail("cannot resolve host name " + url_.host + ": " + ec.message());
    asio::async_connect(lowest(), results,
                        [self = shared_from_this()](const beast::error_code& e,
                                                    const tcp::endpoint&) { self->on_connect(e); });
  }

  void on_connect(const beast::error_code& ec) {
    if (finished_) return;
    if (ec) return fail("cannot connect to " + url_.authority() + ": " + ec.message());
    if (!tls_) return write();
    // Asio's SSL layer has no call for these: OpenSSL's own, on the stream's native handle
    // (declared by Asio's SSL headers; OpenSSL's are crypto's alone). SNI (not for address
    // literals, RFC 6066) and the name the certificate must carry.
    SSL* ssl = tls_->native_handle();
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
    tls_->set_verify_mode(ssl::verify_peer);
    tls_->async_handshake(
        ssl::stream_base::client,
        [self = shared_from_this()](const beast::error_code& e) { self->on_handshake(e); });
  }

  void on_handshake(const beast::error_code& ec) {
    if (finished_) return;
    if (ec) {
      const long verify = SSL_get_verify_result(tls_->native_handle());
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
    if (ec) return fail("sending the request failed: " + ec.message());
    arm(config_.read_timeout, "waiting for an answer");
    with_stream([this](auto& stream) {
      bhttp::async_read_header(stream, buffer_, parser_,
                               [self = shared_from_this()](const beast::error_code& e,
                                                           std::size_t) { self->on_head(e); });
    });
  }

  void on_head(const beast::error_code& ec) {
    if (finished_) return;
    disarm();
    if (ec) return fail_reading(ec, "reading the answer's head");
    publish(Event::head);
  }

  /// After head and after each chunk: the rest of the body, or the end.
  void read_on() {
    if (finished_) return;
    if (parser_.is_done()) return finish(std::nullopt);
    auto& body = parser_.get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    arm(config_.read_timeout, "waiting for the body");
    with_stream([this](auto& stream) {
      bhttp::async_read_some(stream, buffer_, parser_,
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
    chunk_bytes_ = chunk_.size() - parser_.get().body().size;
    if (chunk_bytes_ > 0) return publish(Event::chunk);
    read_on();
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
    resolver_.cancel();
    beast::error_code ignored;
    lowest().close(ignored);  // NOLINT(bugprone-unused-return-value): the error is ignored
    const std::lock_guard lock(mutex_);
    failure_ = std::move(failure);
    done_ = true;
    cv_.notify_all();
  }

  asio::io_context& io_;
  const FetcherConfig& config_;
  const Url url_;
  const std::string where_;  ///< "upstream https://host/path" (no credentials, no query)
  std::uint64_t max_bytes_ = 0;

  // The I/O thread's alone.
  tcp::resolver resolver_;
  tcp::socket socket_;  ///< http:// only
  std::optional<ssl::stream<tcp::socket>> tls_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  bhttp::request<bhttp::empty_body> request_;
  beast::flat_buffer buffer_;
  bhttp::response_parser<bhttp::buffer_body> parser_;
  bool finished_ = false;
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
      : config_(std::move(config)), tls_(std::move(tls)), work_(asio::make_work_guard(io_)) {
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
    }
    Result<handlers::FetchResponse> result = make_error(Errc::internal, "");
    if (auto slot = acquire(url->redacted()); slot.ok()) {
      result = fetch_from(*url, req);
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

  /// The headers sent to `url`: the caller's (less those that are the fetcher's) and Basic
  /// credentials from the userinfo when the caller sent no Authorization.
  static Headers headers_for(const Url& url, const Headers& given, bool caller_auth) {
    Headers out;
    bool has_auth = false;
    for (const auto& [name, value] : given) {
      const auto lower = to_lower(name);
      if (lower == "host" || lower == "user-agent" || lower == "connection" ||
          lower == "accept-encoding" || lower == "content-length" || lower == "transfer-encoding" ||
          lower == "te" || lower == "upgrade") {
        continue;
      }
      if (lower == "authorization" || lower == "proxy-authorization") {
        if (!caller_auth) continue;
        has_auth = true;
      }
      out.emplace_back(name, value);
    }
    if (!has_auth) {
      if (const auto creds = url.credentials()) {
        out.emplace_back("Authorization",
                         "Basic " + base64_encode(creds->first + ":" + creds->second));
      }
    }
    return out;
  }

  /// Credentials go on to the redirect's target only on the same origin, or from http to https
  /// on the same host and default ports.
  static bool keeps_credentials(const Url& from, const Url& to) {
    if (from.same_origin(to)) return true;
    return from.host == to.host && from.scheme == "http" && from.port == 80 && to.https() &&
           to.port == 443;
  }

  Result<handlers::FetchResponse> fetch_from(Url url, const handlers::FetchRequest& req) {
    std::set<std::string> seen{url.str()};
    bool caller_auth = true;
    for (int redirects = 0;; ++redirects) {
      auto exchange = std::make_shared<Exchange>(
          io_, *tls_, config_, url, headers_for(url, req.headers, caller_auth), req.max_bytes);
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
        if (!keeps_credentials(url, *next)) caller_auth = false;
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
