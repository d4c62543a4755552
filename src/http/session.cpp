#include "session.hpp"

#include <limits>

#include "access_log.hpp"
#include "framing.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

Method method_of(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get:
      return Method::get;
    case bhttp::verb::head:
      return Method::head;
    case bhttp::verb::put:
      return Method::put;
    case bhttp::verb::post:
      return Method::post;
    case bhttp::verb::delete_:
      return Method::del;
    default:
      return Method::other;
  }
}

/// An answer after which the connection closes.
Response closing(Response r) {
  r.close = true;
  return r;
}

}  // namespace

template <class Stream>
Stream Session<Stream>::open_stream(Socket socket, asio::ssl::context* tls) {
  if constexpr (kTls) {
    return Stream(std::move(socket), *tls);
  } else {
    return Stream(std::move(socket));
  }
}

template <class Stream>
Session<Stream>::Session(Server::Impl& srv, Socket socket, std::shared_ptr<asio::ssl::context> tls,
                         Admission admission)
    : srv_(srv),
      home_(srv.here()),
      tls_(std::move(tls)),
      stream_(open_stream(std::move(socket), tls_.get())),
      accepted_(admission.accepted),
      header_timer_(stream_.get_executor()),
      slot_(admission.slot),
      refusal_(std::move(admission.refusal)) {
  home_.sessions.insert(this);
  // Until its first request's head has arrived, it is the first to go at the connection cap.
  if (refusal_.empty()) home_.fresh.push_back(*this, steady_ns(accepted_));
  // The client's address, for the audit trail of the requests that change the catalog.
  beast::error_code ec;
  const auto peer = lowest().socket().remote_endpoint(ec);
  if (!ec) {
    peer_ip_ = ip_bytes(peer.address());
    peer_text_ = ip_to_string(peer_ip_);
    from_proxy_ = srv_.config.trusted_proxies.trusts(peer_ip_);
  }
  req_.peer = peer_text_;
}

template <class Stream>
Session<Stream>::~Session() {
  if (srv_.tearing_down) return;
  home_.sessions.erase(this);
  SessionList::leave(*this);
  home_.connections.fetch_sub(1, std::memory_order_relaxed);
  if (!refusal_.empty()) {
    srv_.refusing.fetch_sub(1);
    return;
  }
  srv_.clients.release(slot_);
  srv_.clients.release(request_slot_);
  srv_.status.open_connections.fetch_sub(1);
  srv_.maybe_finish_stop();
}

// A connection that sends nothing holds a place under the connection cap: its first byte must
// come within first_byte_timeout (read_timeout when that is shorter) of its acceptance. The
// byte is peeked at, not read: it stays in the socket for the TLS handshake or the head's
// parser. (A peek is a read to Asio, tried at once when the byte is already there; a wait for
// readability is not, and could miss a readiness its reactor has already reported.)
template <class Stream>
void Session<Stream>::start() {
  if (!refusal_.empty()) return begin();
  wait_for_header_until(accepted_ + std::min<std::chrono::steady_clock::duration>(
                                        srv_.config.first_byte_timeout, srv_.config.read_timeout));
  lowest().socket().async_receive(
      asio::buffer(&first_byte_, 1), tcp::socket::message_peek,
      [self = self()](beast::error_code ec, std::size_t) { self->on_first_byte(ec); });
}

template <class Stream>
void Session<Stream>::on_first_byte(beast::error_code ec) {
  header_deadline_ = kNoDeadline;
  if (header_timed_out_ || ec) {
    if (header_timed_out_) {
      log::debug("connection from {} closed: no byte within {}s of its acceptance", req_.peer,
                 std::min(srv_.config.first_byte_timeout, srv_.config.read_timeout).count());
    }
    return lowest().close();
  }
  begin();
}

/// The connection has sent a byte (or is a refusal, answered at once).
template <class Stream>
void Session<Stream>::begin() {
  if constexpr (kTls) {
    lowest().expires_after(srv_.config.read_timeout);
    stream_.async_handshake(asio::ssl::stream_base::server, [self = self()](beast::error_code ec) {
      if (ec) {
        log::debug("TLS handshake failed: {}", ec.message());
        return self->lowest().close();
      }
      self->refusal_.empty() ? self->read_header() : self->refuse();
    });
  } else {
    refusal_.empty() ? read_header() : refuse();
  }
}

template <class Stream>
void Session<Stream>::close_if_idle() {
  if (idle_) {
    SessionList::leave(*this);
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
  }
}

template <class Stream>
void Session<Stream>::evict() {
  leave_idle();
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().close();
}

/// Answers a connection refused at the door (a connection cap) without reading its request,
/// then closes it: 503 with Retry-After.
template <class Stream>
void Session<Stream>::refuse() {
  idle_ = false;
  Response r;
  r.status = 503;
  r.set("Content-Type", "text/plain; charset=utf-8");
  r.set("Retry-After", "1");
  r.body = refusal_ + "\n";
  r.close = true;
  // A request may be on its way: read it away before closing, so that the client is not
  // reset before it has read the answer.
  drain_on_close_ = true;
  send(std::move(r));
}

/// Off the eviction lists: a request is being served (or the connection is ending).
template <class Stream>
void Session<Stream>::leave_idle() {
  idle_ = false;
  SessionList::leave(*this);
}

template <class Stream>
void Session<Stream>::read_header() {
  idle_ = true;
  // An idle keep-alive connection: at the cap, closed after those that never sent a request.
  if (requests_ > 0) home_.idle.push_back(*this, steady_ns(std::chrono::steady_clock::now()));
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(srv_.config.max_header_bytes));
  // No body limit while the head is parsed: a declared length above the upload limit must
  // reach the upload's head check, which answers 413 before any body byte is read. The body
  // policy sets the limit (it then bounds chunked bodies too).
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  const auto timeout = requests_ == 0 ? srv_.config.read_timeout : srv_.config.idle_timeout;
  if constexpr (kTls) {
    lowest().expires_after(timeout);
  } else {
    // A body read or a drain before may have left Beast's timer set: it is not used here.
    lowest().expires_never();
    // The first head is due read_timeout after the acceptance, its first byte included.
    wait_for_header_until((requests_ == 0 ? accepted_ : std::chrono::steady_clock::now()) +
                          timeout);
  }
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = self()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

/// The head must have arrived by `deadline`. The timer is armed again only when it would fire
/// after the deadline (or is not armed); when it fires before the deadline that is now in
/// force, it is armed for that one (on_header_timer).
template <class Stream>
void Session<Stream>::wait_for_header_until(std::chrono::steady_clock::time_point deadline) {
  header_deadline_ = deadline;
  if (!header_timer_armed_ || deadline < header_timer_at_) arm_header_timer(deadline);
}

template <class Stream>
void Session<Stream>::arm_header_timer(std::chrono::steady_clock::time_point at) {
  header_timer_armed_ = true;
  header_timer_at_ = at;
  header_timer_.expires_at(at);  // a wait still pending ends with operation_aborted
  // The timer does not keep the connection alive: it is cancelled when the session ends.
  header_timer_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
    if (ec) return;  // armed again, or the session ended
    if (auto self = weak.lock()) self->on_header_timer();
  });
}

/// As Beast's timeout does: the socket is closed, and the read fails (reported as a timeout).
template <class Stream>
void Session<Stream>::on_header_timer() {
  header_timer_armed_ = false;
  if (header_deadline_ == kNoDeadline) return;  // not waiting for a head now
  if (std::chrono::steady_clock::now() < header_deadline_) {
    return arm_header_timer(header_deadline_);
  }
  header_timed_out_ = true;
  lowest().close();
}

template <class Stream>
void Session<Stream>::on_header(beast::error_code ec) {
  header_deadline_ = kNoDeadline;
  // Also when the head arrived just as the timer fired: the socket is closed by now.
  if (header_timed_out_) ec = beast::error::timeout;
  leave_idle();
  id_ = srv_.next_request_id.fetch_add(1, std::memory_order_relaxed);
  started_ = std::chrono::steady_clock::now();
  route_ = nullptr;
  label_ = "other";
  if (from_proxy_) req_.peer = peer_text_;  // until this request's header names its client
  if (ec) {
    // The client went away (or never finished its head): nothing to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      return close();
    }
    // Malformed framing (two lengths, Content-Length with chunked, bad chunk sizes, header
    // too large): answer 400/431 and close, never guess.
    return send(closing(
        error_response(ec == bhttp::error::header_limit
                           ? make_error(Errc::header_too_large,
                                        "request header fields too large: the limit is " +
                                            std::to_string(srv_.config.max_header_bytes) + " bytes")
                           : make_error(Errc::invalid, "malformed request: " + ec.message()))));
  }
  ++requests_;
  const auto& msg = parser_->get();
  auto header_strings = std::move(req_.headers);  // reused below
  std::string body = std::move(req_.body);
  std::string peer = std::move(req_.peer);
  req_ = Request{};
  req_.peer = std::move(peer);
  req_.headers = std::move(header_strings);
  req_.body = std::move(body);
  req_.body.clear();
  req_.id = id_;
  req_.method = method_of(msg.method());
  req_.target = std::string(msg.target());
  req_.tls = kTls;
  keep_alive_ = msg.keep_alive();
  rechecked_ = false;
  position_waited_ = false;
  // The previous request's strings are reused (assign keeps their capacity).
  std::size_t fields = 0;
  HeadFraming framing;
  framing.version = msg.version();
  for (const auto& field : msg) {
    if (fields == req_.headers.size()) req_.headers.emplace_back();
    auto& [name, value] = req_.headers[fields++];
    name.assign(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    value.assign(field.value());
    if (field.name() == bhttp::field::transfer_encoding) {
      if (framing.transfer_encodings++ == 0) framing.transfer_encoding = field.value();
    } else if (field.name() == bhttp::field::host) {
      if (framing.hosts++ == 0) framing.host = field.value();
    }
  }
  req_.headers.resize(fields);
  if (from_proxy_) find_client();
  if (auto bad = check_head(framing)) {
    // Where this body ends (if it has one) is unknown: never read on, answer and close.
    drain_on_close_ = true;
    return send(closing(error_response(*bad)));
  }
  if (req_.target.size() > srv_.config.max_target_bytes) {
    return send(closing(error_response(make_error(
        Errc::uri_too_long, "request target too long: the limit is " +
                                std::to_string(srv_.config.max_target_bytes) + " bytes"))));
  }
  auto parsed = handlers::parse_target(req_.target);
  if (!parsed) return send(error_response(parsed.error()));
  req_.segments = std::move(parsed->first);
  req_.query = std::move(parsed->second);
  const handlers::RouteMatch match = handlers::find_route(req_.method, req_.segments);
  label_ = match.label;
  if (match.route == nullptr) {
    return send(handlers::wrong_method(match, req_.method));
  }
  route_ = match.route;
  if (from_proxy_) return count_client();
  admit();
}

template <class Stream>
void Session<Stream>::body_received(std::unique_ptr<handlers::UploadedBody> upload) {
  run(std::move(upload));
}

template <class Stream>
void Session<Stream>::run(std::unique_ptr<handlers::UploadedBody> upload) {
  // Read your writes: a request naming a catalog position waits (without holding this thread)
  // until this replica has applied it, at most ServerConfig::position_wait.
  if (!position_waited_ && upload == nullptr) {
    position_waited_ = true;
    auto wanted = handlers::requested_position(req_);
    if (!wanted) return send(error_response(wanted.error()));
    if (*wanted && srv_.applied_position() < **wanted) {
      return srv_.wait_for_position(**wanted, [self = self(), want = **wanted](bool reached) {
        if (reached) return self->run(nullptr);
        self->send(handlers::position_lag_response(self->srv_.applied_position(), want));
      });
    }
  }
  if (route_->thread == handlers::Thread::network) {
    handlers::Context ctx(*srv_.snapshot(), srv_.env);
    auto response = route_->handler(req_, ctx);
    // A page that needs an upstream index fetched is answered from the upstream pool.
    if (!ctx.needs_worker) return send(std::move(response));
  }
  srv_.offload(
      [&srv = srv_, route = route_, req = req_, upload = std::move(upload),
       snap = srv_.snapshot()]() mutable {
        handlers::Context ctx(*snap, srv.env);
        ctx.on_worker = true;
        ctx.upload = upload.get();
        Handled done;
        done.response = route->handler(req, ctx);
        done.snapshot = srv.reload_after(*route, ctx, done.response.status);
        // Read your writes: the position this change reached, for X-Wheelforge-Min-Position.
        if (route->changes_catalog && (done.response.status < 300 || done.response.status == 303)) {
          if (auto pos = srv.env.services.catalog->position()) {
            done.response.set(handlers::kPositionHeader, std::to_string(*pos));
          }
        }
        done.follow = ctx.follow;
        done.growing = std::move(ctx.growing);
        // The download a growing answer streams: on a thread of its own, not this one, so
        // that the answer starts now; of the upstream pool, so that uploads keep the workers.
        if (ctx.after_answer) {
          asio::post(srv.upstream_workers ? *srv.upstream_workers : srv.workers,
                     std::move(ctx.after_answer));
        }
        done.unknown_token = ctx.unknown_token;
        done.upload = upload != nullptr;
        done.upload_outcome = ctx.upload_outcome;
        done.note = std::move(ctx.note);
        return done;
      },
      [self = self()](Handled done) { self->handled(std::move(done)); },
      /*upstream=*/route_->thread == handlers::Thread::network);
}

template <class Stream>
void Session<Stream>::handled(Handled done) {
  srv_.install(std::move(done.snapshot));
  // A token just created elsewhere, in an Authorization header or the login form: once.
  if (done.response.status == 401 && !done.upload && !rechecked_ &&
      (done.unknown_token || handlers::has_unknown_token(req_, *srv_.snapshot()))) {
    rechecked_ = true;
    return srv_.recheck_tokens([self = self()] { self->run(nullptr); });
  }
  if (!done.upload_outcome.empty()) srv_.status.metrics.upload(done.upload_outcome);
  if (!done.note.empty()) {
    if (done.response.status >= 500) {
      log::error("req={} {}", id_, done.note);
    } else {
      log::info("req={} {}", id_, done.note);
    }
  }
  if (route_->access == handlers::Access::admin) {
    log::info("req={} admin {} -> {}", id_, sanitize_for_log(req_.target, 300),
              done.response.status);
  }
  if (done.follow && srv_.env.services.runner != nullptr) {
    keep_alive_ = false;  // the answer ends with the job; the connection with it
    return follower_.start(*done.follow);
  }
  if (done.growing) return growing_.start(std::move(*done.growing));
  send(std::move(done.response));
}

template <class Stream>
bool Session<Stream>::keep_alive() const {
  return keep_alive_ && !srv_.status.stopping && parser_ && parser_->is_done();
}

template <class Stream>
void Session<Stream>::responded(int status, std::uint64_t length, beast::error_code ec,
                                bool keep_alive) {
  if (refusal_.empty()) {  // no request was read from a refused one; Impl::refuse logs those
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started_)
                        .count();
    release_request_slot();
    srv_.status.metrics.request(label_, status, static_cast<double>(us) / 1e6, length);
    if (srv_.config.access_log || ec) {
      thread_local std::string line;
      line.clear();
      append_access_line(line, id_, req_.peer, handlers::method_name(req_.method), req_.target,
                         status, length, static_cast<std::uint64_t>(us),
                         ec ? ec.message() : std::string());
      // Logged as it is: the line needs no formatting.
      log::write(log::Level::info, line);
    }
  }
  if (ec || !keep_alive) return close();
  read_header();
}

template <class Stream>
void Session<Stream>::close() {
  if constexpr (kTls) {
    // close_notify first, so TLS clients see a clean end of the stream.
    if (!tls_closing_) {
      tls_closing_ = true;
      lowest().expires_after(std::chrono::seconds(2));
      return stream_.async_shutdown([self = self()](beast::error_code) { self->close(); });
    }
  }
  beast::error_code ec;
  // Half-close first: the client reads our last response before it sees the socket end,
  // even when we stop reading an unwanted body.
  lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!draining_ && (drain_on_close_ || (parser_ && !parser_->is_done()))) return drain();
  lowest().close();
}

/// Reads and discards what the client still sends (bounded in time and bytes) so that
/// closing does not reset the connection before the client has read our answer.
template <class Stream>
void Session<Stream>::drain() {
  draining_ = true;
  lowest().expires_after(std::chrono::seconds(2));
  if (!drain_buf_) drain_buf_ = std::make_unique<std::array<char, 64 * 1024>>();
  stream_.async_read_some(asio::buffer(*drain_buf_),
                          [self = self()](beast::error_code ec, std::size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > (64U << 20U)) return self->lowest().close();
                            self->drain();
                          });
}

template class Session<TcpStream>;
template class Session<TlsStream>;

}  // namespace wf::http
