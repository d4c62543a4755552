#include "writer.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "file_body.hpp"
#include "session.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::http {

template <class Stream>
void ResponseWriter<Stream>::send(Response r) {
  if (std::holds_alternative<handlers::FileRange>(r.body)) return send_file(std::move(r));
  constexpr bool kTls = Session<Stream>::kTls;
  const bool head = s_.request().method == Method::head;
  const int status = r.status;
  std::string_view bytes;
  std::shared_ptr<const void> keep;
  if (auto* s = std::get_if<std::string>(&r.body)) {
    auto owned = std::make_shared<std::string>(std::move(*s));
    bytes = *owned;
    keep = owned;
  } else if (auto* shared = std::get_if<std::shared_ptr<const std::string>>(&r.body)) {
    bytes = **shared;
    keep = *shared;
    if constexpr (!kTls) {
      if (!head && status == 200) {
        const auto installed = s_.server().installed.load(std::memory_order_relaxed);
        if (auto fd = s_.home().page_file(*shared, installed)) {
          Outgoing out;
          out.fd = std::move(fd);
          out.remain = bytes.size();
          return send_raw(r, bytes.size(), std::move(out));
        }
      }
    }
  }
  if constexpr (!kTls) {
    Outgoing out;
    if (!head && status != 304) {
      out.body = bytes;
      out.keep = std::move(keep);
    }
    return send_raw(r, bytes.size(), std::move(out));
  }
  if (head || status == 304) return send_head(r, status == 304 ? 0 : bytes.size());
  auto res = std::make_shared<bhttp::response<bhttp::span_body<const char>>>();
  fill(*res, r);
  res->body() = bhttp::span_body<const char>::value_type(bytes.data(), bytes.size());
  res->content_length(bytes.size());
  write(res, status, bytes.size(), std::move(keep));
}

template <class Stream>
void ResponseWriter<Stream>::send_file(Response r) {
  const auto& range = std::get<handlers::FileRange>(r.body);
  const bool head = s_.request().method == Method::head;
  auto [fd, small] =
      s_.home().open_blob(range.path, s_.server().installed.load(std::memory_order_relaxed));
  if (!fd->valid()) {
    const int err = errno;
    log::error("req={} cannot open blob {}: {}", s_.id(), range.path, std::strerror(err));
    // A blob that is gone was quarantined by fsck --repair (or lost): the file is damaged
    // (the pages drop it once the catalog says so), not missing by the client's mistake.
    const auto& seg = s_.request().segments;
    if (err == ENOENT && seg.size() == 3) {
      std::string_view name = seg[2];
      if (name.ends_with(".metadata")) name.remove_suffix(std::string_view(".metadata").size());
      return send(error_response(make_error(Errc::unavailable, handlers::damaged_message(name))));
    }
    // A file's provenance (/integrity/<project>/<version>/<filename>/provenance) likewise.
    if (err == ENOENT && seg.size() == 5 && seg[0] == "integrity") {
      return send(error_response(make_error(Errc::unavailable, handlers::damaged_message(seg[3]))));
    }
    return send(error_response(errno_error(err, "open blob")));
  }
  if constexpr (!Session<Stream>::kTls) {
    Outgoing out;
    if (!head && small && range.offset + range.length <= small->size()) {
      out.body = std::string_view(*small).substr(static_cast<std::size_t>(range.offset),
                                                 static_cast<std::size_t>(range.length));
      out.keep = std::move(small);
    } else if (!head) {
      out.fd = std::move(fd);
      out.offset = static_cast<off_t>(range.offset);
      out.remain = range.length;
    }
    return send_raw(r, range.length, std::move(out));
  }
  if (head) return send_head(r, range.length);
  auto res = std::make_shared<bhttp::response<RangeFileBody>>();
  fill(*res, r);
  res->body() = RangeFileBody::value_type{fd, range.offset, range.length};
  res->content_length(range.length);
  write(res, r.status, range.length);
}

// ---- plain HTTP: straight to the socket ------------------------------------------------------

/// Formats the head of `r` (the same fields fill() sets) and starts writing. `length` is the
/// Content-Length (also for HEAD); 304 answers carry none.
template <class Stream>
void ResponseWriter<Stream>::send_raw(const Response& r, std::uint64_t length, Outgoing out) {
  out.status = r.status;
  out.keep_alive = s_.keep_alive() && !r.close;
  out.length = out.fd ? out.remain : out.body.size();
  std::string& h = out.head;
  h = std::move(head_buf_);  // the previous response's buffer, capacity kept
  h.clear();
  h += "HTTP/1.1 ";
  h += std::to_string(r.status);
  h += ' ';
  if (!r.reason.empty()) {
    h += r.reason;
  } else {
    h += bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(r.status)));
  }
  h += "\r\nServer: wheelforge\r\n";
  for (const auto& [k, v] : r.headers) {
    h += k;
    h += ": ";
    h += v;
    h += "\r\n";
  }
  if (r.status != 304) {
    h += "Content-Length: ";
    h += std::to_string(length);
    h += "\r\n";
  }
  if (!out.keep_alive) h += "Connection: close\r\n";
  h += "\r\n";
  out_ = std::move(out);
  if (!non_blocking_) {
    beast::error_code ec;
    s_.lowest().socket().native_non_blocking(true, ec);
    if (ec) return finish_raw(ec);
    non_blocking_ = true;
  }
  pump();
}

template <class Stream>
void ResponseWriter<Stream>::pump() {
  Outgoing& o = *out_;
  const int sock = s_.lowest().socket().native_handle();
  while (o.head_sent < o.head.size() || o.body_sent < o.body.size() || o.remain > 0) {
    ssize_t n = 0;
    if (o.head_sent < o.head.size() || o.body_sent < o.body.size()) {
      iovec iov[2];
      int count = 0;
      if (o.head_sent < o.head.size()) {
        iov[count++] = {o.head.data() + o.head_sent, o.head.size() - o.head_sent};
      }
      if (o.body_sent < o.body.size()) {
        iov[count++] = {const_cast<char*>(o.body.data()) + o.body_sent,
                        o.body.size() - o.body_sent};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(count);
      // A file body follows: keep the head back so that both leave in one segment.
      const int more = o.remain > 0 ? MSG_MORE : 0;
      n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | more);
      if (n >= 0) {
        auto done = static_cast<std::size_t>(n);
        const std::size_t from_head = std::min(done, o.head.size() - o.head_sent);
        o.head_sent += from_head;
        o.body_sent += done - from_head;
        continue;
      }
    } else {
      // Large bodies leave in full segments (as nginx's tcp_nopush): cork the socket while
      // the file streams; the head and small bodies are not held back.
      if (!o.corked && o.remain > kCorkThreshold) {
        const int on = 1;
        (void)::setsockopt(sock, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
        o.corked = true;
      }
      constexpr std::uint64_t kMaxPerCall = 1U << 30U;
      n = ::sendfile(sock, o.fd->get(), &o.offset,
                     static_cast<std::size_t>(std::min(o.remain, kMaxPerCall)));
      if (n > 0) {
        o.remain -= static_cast<std::uint64_t>(n);
        continue;
      }
      if (n == 0) {
        // A blob shorter than its catalog size means the store was damaged: end the
        // response rather than pretend (the client sees a short body).
        return finish_raw(beast::errc::make_error_code(beast::errc::io_error));
      }
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return wait_writable();
    return finish_raw(beast::error_code(errno, beast::system_category()));
  }
  finish_raw({});
}

/// Waits until the socket takes more bytes, at most the write timeout.
template <class Stream>
void ResponseWriter<Stream>::wait_writable() {
  if (!wait_timer_) wait_timer_.emplace(s_.stream().get_executor());
  waiting_ = true;
  wait_timer_->expires_after(s_.server().config.write_timeout);
  // `self` keeps the session, and with it this writer, alive until the callbacks run.
  wait_timer_->async_wait([this, self = s_.self()](beast::error_code ec) {
    if (ec || !waiting_) return;
    timed_out_ = true;
    beast::error_code ignored;
    s_.lowest().socket().cancel(ignored);
  });
  s_.lowest().socket().async_wait(tcp::socket::wait_write,
                                  [this, self = s_.self()](beast::error_code ec) {
                                    waiting_ = false;
                                    wait_timer_->cancel();
                                    if (timed_out_) ec = beast::error::timeout;
                                    if (ec) return finish_raw(ec);
                                    pump();
                                  });
}

template <class Stream>
void ResponseWriter<Stream>::finish_raw(beast::error_code ec) {
  if (out_->corked) {
    const int off = 0;
    (void)::setsockopt(s_.lowest().socket().native_handle(), IPPROTO_TCP, TCP_CORK, &off,
                       sizeof off);
  }
  const int status = out_->status;
  const std::uint64_t length = out_->length;
  const bool keep_alive = out_->keep_alive;
  head_buf_ = std::move(out_->head);
  out_.reset();
  s_.responded(status, length, ec, keep_alive);
}

// ---- TLS: through Beast's serializer ---------------------------------------------------------

template <class Stream>
template <class Body>
void ResponseWriter<Stream>::fill(bhttp::response<Body>& res, const Response& r) {
  res.result(static_cast<unsigned>(r.status));
  if (!r.reason.empty()) res.reason(r.reason);
  res.set(bhttp::field::server, "wheelforge");
  for (const auto& [k, v] : r.headers) res.set(k, v);
  res.keep_alive(s_.keep_alive() && !r.close);
}

template <class Stream>
void ResponseWriter<Stream>::send_head(const Response& r, std::uint64_t length) {
  auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
  fill(*res, r);
  if (r.status != 304) res->set(bhttp::field::content_length, std::to_string(length));
  write(res, r.status, 0);
}

template <class Stream>
template <class Message>
void ResponseWriter<Stream>::write(std::shared_ptr<Message> res, int status, std::uint64_t length,
                                   std::shared_ptr<const void> keep) {
  s_.lowest().expires_after(s_.server().config.write_timeout);
  const bool keep_alive = res->keep_alive();
  bhttp::async_write(
      s_.stream(), *res,
      [self = s_.self(), res, keep = std::move(keep), status, length, keep_alive](
          beast::error_code ec, std::size_t) { self->responded(status, length, ec, keep_alive); });
}

template <class Stream>
void ResponseWriter<Stream>::write_chunked_head(const Response& meta,
                                                std::function<void(beast::error_code)> then) {
  // The answer ends with the job; the connection with it.
  write_stream_head(meta, std::nullopt, /*keep_alive=*/false, std::move(then));
}

template <class Stream>
void ResponseWriter<Stream>::write_stream_head(const Response& meta,
                                               std::optional<std::uint64_t> length, bool keep_alive,
                                               std::function<void(beast::error_code)> then) {
  auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
  fill(*res, meta);
  res->keep_alive(keep_alive);
  if (length) {
    res->content_length(*length);
  } else {
    res->chunked(true);
  }
  auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
  s_.lowest().expires_after(s_.server().config.write_timeout);
  bhttp::async_write_header(
      s_.stream(), *sr,
      [res, sr, then = std::move(then)](beast::error_code ec, std::size_t) { then(ec); });
}

template class ResponseWriter<TcpStream>;
template class ResponseWriter<TlsStream>;

}  // namespace wf::http
