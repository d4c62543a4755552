#include "store/s3_http.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>

#include "wheelforge/util/strings.hpp"

namespace wf::store::s3http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kChunk = 256 * 1024;     // file bytes read and sent at a time
constexpr std::size_t kReadChunk = 64 * 1024;  // answer bytes handed to a sink at a time
constexpr std::uint32_t kMaxHeadBytes = 64 * 1024;
constexpr std::size_t kMaxIdle = 16;

std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

/// A file opened for the body's slice, closed on every path.
class Fd {
 public:
  explicit Fd(const std::filesystem::path& p) : fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

struct Client::Connection {
  asio::io_context io;  // declared first: outlives the streams
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

  template <typename Fn>
  auto with_stream(Fn&& fn) {
    if (tls) return fn(*tls);
    return fn(*plain);
  }

  /// Starts one asynchronous operation with `limit` on the socket and runs it to its end.
  template <typename Start>
  beast::error_code run(std::chrono::milliseconds limit, Start&& start) {
    beast::error_code result = asio::error::in_progress;
    lowest().expires_after(limit);
    start([&result](const beast::error_code& ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result;
  }
};

struct Client::Impl {
  Endpoint endpoint;
  Timeouts timeouts;
  std::string authority;  // host:port, for messages
  std::optional<ssl::context> tls;
  std::string tls_problem;
  std::mutex mutex;
  std::vector<std::unique_ptr<Connection>> idle;

  struct Failure {
    Error error;
    bool before_answer = false;  // nothing of an answer arrived: a request sent again is safe
  };

  Result<std::unique_ptr<Connection>> connect() {
    auto c = std::make_unique<Connection>();
    // Resolving has no socket to time: the io_context runs for the connect limit at most.
    tcp::resolver resolver(c->io);
    beast::error_code ec = asio::error::in_progress;
    tcp::resolver::results_type results;
    resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                           [&](const beast::error_code& e, tcp::resolver::results_type r) {
                             ec = e;
                             results = std::move(r);
                           });
    c->io.restart();
    c->io.run_for(timeouts.connect);
    if (ec == asio::error::in_progress) {
      resolver.cancel();
      c->io.restart();
      c->io.run();
      return make_error(Errc::unavailable, "timed out resolving " + endpoint.host + " (" +
                                               seconds_text(timeouts.connect) + ")");
    }
    if (ec) {
      return make_error(Errc::unavailable,
                        "cannot resolve host name " + endpoint.host + ": " + ec.message());
    }
    if (tls) {
      c->tls.emplace(c->io, *tls);
    } else {
      c->plain.emplace(c->io);
    }
    ec = c->run(timeouts.connect,
                [&](auto handler) { c->lowest().async_connect(results, std::move(handler)); });
    if (ec == beast::error::timeout) {
      return make_error(Errc::unavailable, "timed out connecting to " + authority + " (" +
                                               seconds_text(timeouts.connect) + ")");
    }
    if (ec) {
      return make_error(Errc::unavailable, "cannot connect to " + authority + ": " + ec.message());
    }
    if (!c->tls) return c;
    // SNI (not for address literals, RFC 6066) through OpenSSL's own call on the native
    // handle (declared by Asio's SSL headers), and the name the certificate must carry.
    beast::error_code address_ec;
    asio::ip::make_address(endpoint.host, address_ec);
    if (address_ec &&
        SSL_ctrl(c->tls->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(endpoint.host.c_str())) != 1) {
      return make_error(Errc::unavailable, "cannot set up TLS for host " + endpoint.host);
    }
    c->tls->set_verify_mode(ssl::verify_peer);
    c->tls->set_verify_callback(ssl::host_name_verification(endpoint.host));
    ec = c->run(timeouts.connect, [&](auto handler) {
      c->tls->async_handshake(ssl::stream_base::client, std::move(handler));
    });
    if (ec) {
      const long verify = SSL_get_verify_result(c->tls->native_handle());
      if (verify != X509_V_OK) {
        return make_error(Errc::unavailable,
                          "TLS certificate of " + endpoint.host +
                              " not accepted: " + X509_verify_cert_error_string(verify));
      }
      return make_error(Errc::unavailable,
                        "TLS handshake with " + authority + " failed: " + ec.message());
    }
    return c;
  }

  Error wire(const beast::error_code& ec, std::string_view what) const {
    if (ec == beast::error::timeout) {
      return make_error(Errc::unavailable, "timed out " + std::string(what) + " " + authority +
                                               " (" + seconds_text(timeouts.io) + ")");
    }
    return make_error(Errc::unavailable, "connection to " + authority + " failed " +
                                             std::string(what) + ": " + ec.message());
  }

  std::optional<Failure> send_body(Connection& c, const Body& body) {
    if (body.file == nullptr) {
      if (body.bytes.empty()) return std::nullopt;
      const auto ec = c.run(timeouts.io, [&](auto handler) {
        c.with_stream([&](auto& stream) {
          asio::async_write(stream, asio::buffer(body.bytes.data(), body.bytes.size()),
                            std::move(handler));
        });
      });
      if (ec) return Failure{wire(ec, "sending to"), true};
      return std::nullopt;
    }
    const Fd fd(*body.file);
    if (fd.get() < 0) {
      return Failure{
          make_error(Errc::io, "cannot open " + body.file->string() + ": " + std::strerror(errno)),
          false};
    }
    std::string chunk(static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, body.length)), '\0');
    std::uint64_t sent = 0;
    while (sent < body.length) {
      const auto want =
          static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), body.length - sent));
      const ssize_t n =
          ::pread(fd.get(), chunk.data(), want, static_cast<off_t>(body.offset + sent));
      if (n <= 0) {
        return Failure{make_error(Errc::io, "cannot read " + body.file->string() + ": " +
                                                (n == 0 ? std::string("shorter than expected")
                                                        : std::string(std::strerror(errno)))),
                       false};
      }
      const auto ec = c.run(timeouts.io, [&](auto handler) {
        c.with_stream([&](auto& stream) {
          asio::async_write(stream, asio::buffer(chunk.data(), static_cast<std::size_t>(n)),
                            std::move(handler));
        });
      });
      if (ec) return Failure{wire(ec, "sending to"), true};
      sent += static_cast<std::uint64_t>(n);
    }
    return std::nullopt;
  }

  /// One exchange on `c`; the response, or why it failed. `keep` says whether `c` may serve
  /// another request.
  Result<Response> once(Connection& c, std::string_view method, std::string_view target,
                        const std::vector<std::pair<std::string, std::string>>& headers,
                        const Body& body, const Sink* sink, std::size_t max_body, bool& keep,
                        bool& before_answer) {
    keep = false;
    before_answer = true;
    bhttp::request<bhttp::empty_body> request;
    request.method(bhttp::string_to_verb(method));
    request.target(target);
    request.version(11);
    for (const auto& [name, value] : headers) request.set(name, value);
    if (method == "PUT" || method == "POST") {
      request.set(bhttp::field::content_length, std::to_string(body.size()));
    }
    request.set(bhttp::field::user_agent, "wheelforge");
    bhttp::request_serializer<bhttp::empty_body> serializer(request);
    auto ec = c.run(timeouts.io, [&](auto handler) {
      c.with_stream(
          [&](auto& stream) { bhttp::async_write_header(stream, serializer, std::move(handler)); });
    });
    if (ec) return wire(ec, "sending to");
    if (auto failed = send_body(c, body)) {
      before_answer = failed->before_answer;
      return failed->error;
    }

    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.header_limit(kMaxHeadBytes);
    // No limit here (the kept body is bounded below). Not boost::none: Beast 1.74 compares
    // a Content-Length with the empty optional and fails every body.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (method == "HEAD") parser.skip(true);
    ec = c.run(timeouts.io, [&](auto handler) {
      c.with_stream([&](auto& stream) {
        bhttp::async_read_header(stream, c.buffer, parser, std::move(handler));
      });
    });
    if (ec) return wire(ec, "waiting for the answer of");
    before_answer = false;
    Response response;
    response.status = parser.get().result_int();
    for (const auto& field : parser.get()) {
      response.headers.emplace_back(to_lower(field.name_string()), std::string(field.value()));
    }
    const bool to_sink = sink != nullptr && response.status / 100 == 2;
    std::string chunk(kReadChunk, '\0');
    while (!parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      ec = c.run(timeouts.io, [&](auto handler) {
        c.with_stream(
            [&](auto& stream) { bhttp::async_read(stream, c.buffer, parser, std::move(handler)); });
      });
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) return wire(ec, "reading the answer of");
      const std::size_t n = chunk.size() - parser.get().body().size;
      if (n == 0) continue;
      if (to_sink) {
        if (auto sunk = (*sink)(std::string_view(chunk.data(), n)); !sunk) return sunk.error();
      } else if (response.body.size() + n > max_body) {
        return make_error(Errc::internal, "the answer of " + authority + " is larger than " +
                                              std::to_string(max_body) + " bytes");
      } else {
        response.body.append(chunk.data(), n);
      }
    }
    keep = parser.get().keep_alive();
    return response;
  }
};

Client::Client(Endpoint endpoint, Timeouts timeouts) : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = std::move(endpoint);
  impl_->timeouts = timeouts;
  const bool v6 = impl_->endpoint.host.find(':') != std::string::npos;
  impl_->authority = (v6 ? "[" + impl_->endpoint.host + "]" : impl_->endpoint.host) + ":" +
                     std::to_string(impl_->endpoint.port);
  if (!impl_->endpoint.https) return;
  impl_->tls.emplace(ssl::context::tls_client);
  impl_->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                          ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                          ssl::context::no_tlsv1_1);
  beast::error_code ec;
  impl_->tls->set_default_verify_paths(ec);
  if (ec) impl_->tls_problem = "cannot load the system's trusted certificates: " + ec.message();
  impl_->tls->set_verify_mode(ssl::verify_peer);
}

Client::~Client() = default;

Status Client::ready() const {
  if (!impl_->tls_problem.empty()) return make_error(Errc::invalid, impl_->tls_problem);
  return ok_status();
}

Result<Response> Client::exchange(std::string_view method, std::string_view target,
                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                  const Body& body, const Sink* sink, std::size_t max_body) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> c;
    {
      const std::lock_guard lock(impl_->mutex);
      if (!impl_->idle.empty()) {
        c = std::move(impl_->idle.back());
        impl_->idle.pop_back();
      }
    }
    const bool reused = c != nullptr;
    if (!reused) {
      auto fresh = impl_->connect();
      if (!fresh) return fresh.error();
      c = std::move(fresh.value());
    }
    bool keep = false;
    bool before_answer = false;
    auto response =
        impl_->once(*c, method, target, headers, body, sink, max_body, keep, before_answer);
    if (response.ok()) {
      if (keep) {
        c->buffer.clear();
        const std::lock_guard lock(impl_->mutex);
        if (impl_->idle.size() < kMaxIdle) impl_->idle.push_back(std::move(c));
      }
      return response;
    }
    // A kept connection the store had closed fails before any answer: once more on a new one.
    if (reused && before_answer && attempt == 0 && response.error().code == Errc::unavailable) {
      continue;
    }
    return response;
  }
}

}  // namespace wf::store::s3http
