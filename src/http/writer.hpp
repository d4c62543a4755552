#pragma once
// The one writer of a connection's answers. On plain HTTP the head is formatted here into one
// string that leaves with an in-memory body in one sendmsg(2); a file body (a blob, or a large
// cached page copied once into an in-memory file) follows with sendfile(2) from the page cache,
// no copy through user space and no buffer per response. Only when the socket is full does
// the connection wait. On TLS, Beast's serializer writes the same answer through a buffer.

#include <sys/types.h>

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "transport.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::http {

template <class Stream>
class Session;

template <class Stream>
class ResponseWriter {
 public:
  explicit ResponseWriter(Session<Stream>& session) : s_(session) {}

  /// Sends `r` as the answer to the session's current request (HEAD: without the body), then
  /// tells the session (Session::responded).
  void send(Response r);

  /// Writes the head of a chunked answer whose body the caller writes (a followed log); the
  /// connection closes after it. Then `then(ec)`.
  void write_chunked_head(const Response& meta, std::function<void(beast::error_code)> then);

  /// Writes the head of a 200 answer whose body the caller writes: with `length` as its
  /// Content-Length, or chunked when it is not known. Then `then(ec)`.
  void write_stream_head(const Response& meta, std::optional<std::uint64_t> length, bool keep_alive,
                         std::function<void(beast::error_code)> then);

 private:
  /// What is being written on plain HTTP.
  struct Outgoing {
    std::string head;  // status line and header fields
    std::size_t head_sent = 0;
    std::string_view body;             // in-memory body ...
    std::shared_ptr<const void> keep;  // ... and what keeps it alive
    std::size_t body_sent = 0;
    std::shared_ptr<UniqueFd> fd;  // file body
    off_t offset = 0;
    std::uint64_t remain = 0;
    int status = 200;
    std::uint64_t length = 0;
    bool keep_alive = false;
    bool corked = false;  // TCP_CORK set for the file body
  };

  void send_file(Response r);
  void send_raw(const Response& r, std::uint64_t length, Outgoing out);
  void pump();
  void wait_writable();
  void finish_raw(beast::error_code ec);
  void send_head(const Response& r, std::uint64_t length);
  template <class Message>
  void write(std::shared_ptr<Message> res, int status, std::uint64_t length,
             std::shared_ptr<const void> keep = nullptr);
  template <class Body>
  void fill(bhttp::response<Body>& res, const Response& r);

  /// Large bodies leave in full segments: the socket is corked while they stream.
  static constexpr std::uint64_t kCorkThreshold = 1U << 20U;

  Session<Stream>& s_;
  std::optional<Outgoing> out_;
  std::string head_buf_;  // kept between responses for its capacity
  std::optional<asio::steady_timer> wait_timer_;
  bool waiting_ = false;
  bool timed_out_ = false;
  bool non_blocking_ = false;
};

}  // namespace wf::http
