#include "growing_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>

#include "session.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::http {
namespace {

constexpr std::size_t kPiece = 256 * 1024;

}  // namespace

template <class Stream>
GrowingFileStreamer<Stream>::~GrowingFileStreamer() {
  if (file_ && ticket_ != 0) file_->download->cancel(ticket_);
}

template <class Stream>
void GrowingFileStreamer<Stream>::start(handlers::GrowingFile file) {
  file_ = std::move(file);
  head_sent_ = false;
  sent_ = 0;
  length_.reset();
  // An HTTP/1.0 client takes no chunked answer: without a known size it gets the stored file.
  if (s_.parser().get().version() < 11 && !file_->download->progress().length) {
    file_->wait_for_end = true;
  }
  step();
}

template <class Stream>
void GrowingFileStreamer<Stream>::step() {
  ticket_ = 0;
  const handlers::FileDownload& d = *file_->download;
  const handlers::FileDownload::Progress p = d.progress();
  using State = handlers::FileDownload::State;
  if (!head_sent_) {
    if (p.state != State::running) {
      // Ended before the answer began: answered as any stored file, or the download's error.
      auto r = handlers::growing_file_answer(s_.request(), *file_);
      file_.reset();
      return s_.send(std::move(r));
    }
    // The head once there is a byte to send after it (the last one written stays back): a
    // download that fails before that gets its error as the answer.
    if (!p.answered || p.written < 2 || file_->wait_for_end) return wait(p.version);
    return write_head(p.length);
  }
  if (p.state == State::failed) return end(false, d.error().message);
  std::uint64_t upto = p.written;
  if (length_) {
    if (p.written > *length_ || (p.state == State::committed && p.written != *length_)) {
      return end(false, "the upstream sent " + std::to_string(p.written) + " bytes, not " +
                            std::to_string(*length_));
    }
  }
  // The last byte written stays back until the file is stored: a client never holds a whole
  // file that is then refused (not even one that takes a closed connection for the end).
  if (p.state != State::committed && upto > 0) --upto;
  if (sent_ < upto) return write_bytes(upto);
  if (p.state == State::committed) return end(true, {});
  wait(p.version);
}

template <class Stream>
void GrowingFileStreamer<Stream>::wait(std::uint64_t version) {
  // The wake-up comes from the download's thread: it only posts to this connection's thread.
  // The session stays alive while it waits (a download always ends).
  ticket_ = file_->download->wait(version, [this, self = s_.self()] {
    asio::post(s_.stream().get_executor(), [this, self] { step(); });
  });
  if (ticket_ == 0) {
    asio::post(s_.stream().get_executor(), [this, self = s_.self()] { step(); });
  }
}

template <class Stream>
void GrowingFileStreamer<Stream>::write_head(std::optional<std::uint64_t> length) {
  Response meta;
  meta.set("Content-Type", file_->content_type);
  meta.set("ETag", file_->etag);
  meta.set("Cache-Control", "public, max-age=31536000, immutable");
  length_ = length;
  chunked_ = !length;
  keep_alive_ = s_.keep_alive();
  head_sent_ = true;
  if (buf_.empty()) buf_.resize(kPiece);
  s_.write_stream_head(meta, length, keep_alive_, [this, self = s_.self()](beast::error_code ec) {
    if (ec) return end(false, ec.message());
    s_.lowest().expires_never();
    step();
  });
}

template <class Stream>
void GrowingFileStreamer<Stream>::write_bytes(std::uint64_t upto) {
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(upto - sent_, kPiece));
  ssize_t n = 0;
  do {
    n = ::pread(file_->download->reader()->get(), buf_.data(), want, static_cast<off_t>(sent_));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    return end(false, std::string("cannot read the file being downloaded: ") +
                          (n < 0 ? std::strerror(errno) : "it is shorter than written"));
  }
  const auto got = static_cast<std::size_t>(n);
  const auto done = [this, self = s_.self(), got](beast::error_code ec, std::size_t) {
    if (ec) return end(false, ec.message());
    s_.lowest().expires_never();
    sent_ += got;
    step();
  };
  s_.lowest().expires_after(s_.server().config.write_timeout);
  if (chunked_) {
    asio::async_write(s_.stream(), bhttp::make_chunk(asio::buffer(buf_.data(), got)), done);
  } else {
    asio::async_write(s_.stream(), asio::buffer(buf_.data(), got), done);
  }
}

/// The answer is complete (the file is stored and every byte sent), or it is cut short: the
/// connection closes before its end, so the client sees an incomplete answer.
template <class Stream>
void GrowingFileStreamer<Stream>::end(bool complete, const std::string& why) {
  const std::string shown = file_->download->shown();
  file_.reset();
  if (!complete) {
    log::warn("req={} {}: answer cut short after {} bytes: {}", s_.id(), shown, sent_, why);
    return s_.responded(200, sent_, beast::errc::make_error_code(beast::errc::io_error), false);
  }
  if (!chunked_) return s_.responded(200, sent_, {}, keep_alive_);
  s_.lowest().expires_after(s_.server().config.write_timeout);
  asio::async_write(s_.stream(), bhttp::make_chunk_last(),
                    [this, self = s_.self()](beast::error_code ec, std::size_t) {
                      s_.responded(200, sent_, ec, keep_alive_);
                    });
}

template class GrowingFileStreamer<TcpStream>;
template class GrowingFileStreamer<TlsStream>;

}  // namespace wf::http
