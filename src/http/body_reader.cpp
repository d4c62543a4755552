#include "body_reader.hpp"

#include "session.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

// Beast sizes each socket read by the free capacity of the session's buffer (512 bytes when
// empty): uploads get room for a whole chunk per read.
constexpr std::size_t kUploadReadSize = 256 * 1024;

/// The client ended its side of the connection before the body's end.
bool body_cut_short(beast::error_code ec) {
  return ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream ||
         ec == asio::error::eof || ec == beast::error::timeout;
}

/// An answer after which the connection closes: what is left of the body is never read.
Response closing(const Error& e) {
  Response r = error_response(e);
  r.close = true;
  return r;
}

}  // namespace

// ---- small bodies ----------------------------------------------------------------------------

template <class Stream>
void BodyReader<Stream>::read_small(std::string& body, std::size_t limit) {
  s_.parser().body_limit(limit);
  body.clear();
  small_buf_.resize(16 * 1024);
  read_small_chunk(body, limit);
}

template <class Stream>
void BodyReader<Stream>::read_small_chunk(std::string& body, std::size_t limit) {
  if (s_.parser().is_done()) return s_.body_received(nullptr);
  auto& buffers = s_.parser().get().body();
  buffers.data = small_buf_.data();
  buffers.size = small_buf_.size();
  arm_deadline();
  // `self` keeps the session, and with it this reader and `body`, alive until the read ends.
  bhttp::async_read_some(
      s_.stream(), s_.buffer(), s_.parser(),
      [this, self = s_.self(), &body, limit](beast::error_code ec, std::size_t) {
        const bool stalled = disarm_deadline();
        if (ec == bhttp::error::need_buffer) ec = {};
        if (ec && (stalled || body_cut_short(ec))) {
          return s_.send(closing(cut_short("request body", stalled)));
        }
        if (ec) {
          return s_.send(closing(
              ec == bhttp::error::body_limit
                  ? handlers::body_too_large("request body", std::nullopt, limit)
                  : make_error(Errc::invalid, "cannot read the request body: " + ec.message())));
        }
        body.append(small_buf_.data(), small_buf_.size() - s_.parser().get().body().size);
        read_small_chunk(body, limit);
      });
}

// ---- uploads ---------------------------------------------------------------------------------

template <class Stream>
void BodyReader<Stream>::read_upload(std::unique_ptr<handlers::UploadedBody> upload,
                                     std::uint64_t limit) {
  state_ = std::make_shared<State>();
  state_->upload = std::move(upload);
  window_wait_ = {};
  window_bytes_ = 0;
  s_.parser().body_limit(limit);
  if (!iequals(s_.parser().get()[bhttp::field::expect], "100-continue")) return pump();
  auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
  s_.lowest().expires_after(s_.server().config.write_timeout);
  bhttp::async_write(s_.stream(), *cont,
                     [this, self = s_.self(), cont](beast::error_code ec, std::size_t) {
                       if (ec) return abort("client went away");
                       pump();
                     });
}

template <class Stream>
void BodyReader<Stream>::upload_refused(const Error& e, bool close) {
  if (handlers::status_for(e.code) >= 500) {
    log::error("req={} upload of {} failed: {}", s_.id(), sanitize_for_log(name_), e.message);
  } else {
    log::info("req={} upload of {} rejected: {}", s_.id(), sanitize_for_log(name_),
              sanitize_for_log(e.message, 500));
  }
  Response r = error_response(e);
  r.close = close;
  s_.send(std::move(r));
}

// The body is received and stored at the same time: while a worker stores one chunk, the
// network thread receives the next (pump decides what happens next after each step).

template <class Stream>
void BodyReader<Stream>::read_chunk() {
  if (s_.buffer().capacity() < kUploadReadSize) s_.buffer().reserve(kUploadReadSize);
  auto& buffers = s_.parser().get().body();
  buffers.data = state_->buffer.data();
  buffers.size = state_->buffer.size();
  arm_deadline();
  read_started_ = std::chrono::steady_clock::now();
  receiving_ = true;
  bhttp::async_read_some(
      s_.stream(), s_.buffer(), s_.parser(),
      [this, self = s_.self()](beast::error_code ec, std::size_t) { on_chunk(ec); });
}

template <class Stream>
void BodyReader<Stream>::on_chunk(beast::error_code ec) {
  receiving_ = false;
  const bool stalled = disarm_deadline();
  if (store_error_ && storing_ == 0) {
    // Storing the previous chunk failed while this read was under way (it was cancelled).
    return fail(*std::exchange(store_error_, std::nullopt));
  }
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec == bhttp::error::body_limit) {
    drop();
    return s_.send(
        closing(handlers::body_too_large("upload", std::nullopt, s_.server().max_file_size())));
  }
  if (ec) {
    if (stalled || body_cut_short(ec)) {
      // Answered where the client can still read it: it stopped sending (half-closed, or
      // stalled past the read deadline) but may still be listening.
      s_.server().status.metrics.upload("aborted");
      const Error e = cut_short("upload", stalled);
      log::info("req={} upload of {} aborted: {}", s_.id(), sanitize_for_log(name_), e.message);
      drop();
      return s_.send(closing(e));
    }
    if (ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return abort("client went away");
    }
    drop();
    return s_.send(closing(make_error(Errc::invalid, "malformed upload body: " + ec.message())));
  }
  const std::size_t got = state_->buffer.size() - s_.parser().get().body().size;
  if (auto slow = check_rate(got)) {
    s_.server().status.metrics.upload("aborted");
    return fail(*slow);
  }
  received_ = got;
  pump();
}

/// The next step of an upload: store what was received once the workers are free, receive
/// more once the receive buffer is free, and finish once everything is received and stored.
template <class Stream>
void BodyReader<Stream>::pump() {
  if (storing_ == 0 && received_ > 0) {
    std::swap(state_->buffer, state_->stored);
    if (state_->buffer.size() < State::kChunk) state_->buffer.resize(State::kChunk);
    const std::size_t size = std::exchange(received_, 0);
    if (state_->upload->form) {
      store_on_worker([size](State& u) {
        return u.upload->form->feed(std::string_view(u.stored.data(), size));
      });
    } else {
      store_on_worker(
          [size](State& u) { return u.upload->file->write_unhashed(u.stored.data(), size); });
      store_on_worker([size](State& u) {
        u.upload->file->hash(u.stored.data(), size);
        return ok_status();
      });
    }
  }
  if (receiving_ || received_ > 0) return;
  if (!s_.parser().is_done()) return read_chunk();
  if (storing_ == 0) finish();
}

template <class Stream>
template <class Step>
void BodyReader<Stream>::store_on_worker(Step step) {
  ++storing_;
  s_.server().offload([state = state_, step = std::move(step)] { return step(*state); },
                      [this, self = s_.self(), seq = seq_](Status st) { on_stored(seq, st); });
}

template <class Stream>
void BodyReader<Stream>::on_stored(std::uint64_t seq, const Status& st) {
  if (seq != seq_) return;  // the upload was given up meanwhile
  --storing_;
  if (!st && !store_error_) store_error_ = st.error();
  if (storing_ > 0) return;
  if (store_error_) {
    if (receiving_) {
      // Answer once the read under way returns (at once, as it is cancelled).
      beast::error_code ignored;
      s_.lowest().socket().cancel(ignored);
      return;
    }
    return fail(*std::exchange(store_error_, std::nullopt));
  }
  pump();
}

template <class Stream>
void BodyReader<Stream>::finish() {
  ++seq_;
  auto state = std::move(state_);
  s_.body_received(std::move(state->upload));
}

/// Gives the upload up with an answer; the connection closes after it.
template <class Stream>
void BodyReader<Stream>::fail(const Error& e) {
  drop();
  upload_refused(e, true);
}

/// Removes the sink of an abandoned upload (on a worker: unlink blocks).
template <class Stream>
void BodyReader<Stream>::drop() {
  ++seq_;
  storing_ = 0;
  received_ = 0;
  store_error_.reset();
  if (!state_) return;
  asio::post(s_.server().workers, [state = std::move(state_)]() mutable { state.reset(); });
}

template <class Stream>
void BodyReader<Stream>::abort(const char* why) {
  s_.server().status.metrics.upload("aborted");
  log::info("req={} upload of {} aborted: {}", s_.id(), sanitize_for_log(name_), why);
  drop();
  s_.close();
}

// ---- deadlines and rates ---------------------------------------------------------------------

/// Body reads have a deadline of their own rather than the stream's, which closes the socket
/// when it passes: a client that stalls mid-body is owed an answer (408).
template <class Stream>
void BodyReader<Stream>::arm_deadline() {
  s_.lowest().expires_never();
  if (!timer_) timer_.emplace(s_.stream().get_executor());
  stalled_ = false;
  timer_->expires_after(s_.server().config.read_timeout);
  timer_->async_wait([this, self = s_.self(), read = ++reads_](beast::error_code ec) {
    if (ec || read != reads_) return;
    stalled_ = true;
    beast::error_code ignored;
    s_.lowest().socket().cancel(ignored);
  });
}

/// The body read returned; true when it was cut off by its deadline.
template <class Stream>
bool BodyReader<Stream>::disarm_deadline() {
  ++reads_;
  timer_->cancel();
  return std::exchange(stalled_, false);
}

/// The 408 for a body that stopped arriving (`what`: "upload", "request body").
template <class Stream>
Error BodyReader<Stream>::cut_short(std::string_view what, bool stalled) {
  std::string got;
  const auto length = s_.parser().content_length();
  const auto remaining = s_.parser().content_length_remaining();
  if (length && remaining) {
    got = std::to_string(*length - *remaining) + " of " + std::to_string(*length) + " bytes";
  }
  if (stalled) {
    return make_error(Errc::too_slow, std::string(what) + " too slow: no data for " +
                                          std::to_string(s_.server().config.read_timeout.count()) +
                                          " s" + (got.empty() ? "" : " (received " + got + ")"));
  }
  return make_error(Errc::too_slow, std::string(what) + " incomplete: the client stopped sending " +
                                        (got.empty() ? "before its end" : "after " + got));
}

/// Counts a body read against the minimum upload rate: the bytes a client delivers while
/// the server waits for it, averaged over each read_timeout of waiting. Time spent storing
/// what arrived is not the client's and is not counted. The error when it is too slow.
template <class Stream>
std::optional<Error> BodyReader<Stream>::check_rate(std::size_t got) {
  const auto& config = s_.server().config;
  const auto minimum = config.min_upload_rate;
  if (minimum == 0) return std::nullopt;
  window_wait_ += std::chrono::steady_clock::now() - read_started_;
  window_bytes_ += got;
  const auto window =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(config.read_timeout);
  if (window_wait_ < window) return std::nullopt;
  const double waited = std::chrono::duration<double>(window_wait_).count();
  const auto rate = static_cast<std::uint64_t>(static_cast<double>(window_bytes_) / waited);
  window_wait_ = {};
  window_bytes_ = 0;
  if (rate >= minimum) return std::nullopt;
  return make_error(Errc::too_slow,
                    "upload too slow: " + std::to_string(rate) + " bytes/s over the last " +
                        std::to_string(static_cast<long long>(waited)) +
                        " s, below the minimum of " + std::to_string(minimum) + " bytes/s");
}

template class BodyReader<TcpStream>;
template class BodyReader<TlsStream>;

}  // namespace wf::http
