#pragma once
// Reading request bodies once the route's body policy is known: a small body whole into the
// request; an upload's through a double-buffered pump into its sink (the temp file of a PUT,
// or the multipart form of a twine upload). While workers store one chunk (a PUT's is
// written and hashed by two at once), the network thread receives the next; it reads no
// further until that chunk is stored, so no upload is ever held in memory.
//
// Every body read has a deadline (read_timeout) of its own, and uploads a minimum rate: a
// client that stalls or trickles is answered 408 and disconnected, one that ends its side
// before the body's end too. The sink of an abandoned upload is dropped on a worker.

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "transport.hpp"
#include "wheelforge/handlers/context.hpp"

namespace wf::http {

template <class Stream>
class Session;

template <class Stream>
class BodyReader {
 public:
  explicit BodyReader(Session<Stream>& session) : s_(session) {}

  /// Reads the request's body into `body` (the parser limits it to `limit` bytes), then calls
  /// Session::body_received(nullptr); answers 408/413/400 itself when it cannot.
  void read_small(std::string& body, std::size_t limit);

  /// Streams the request's body into `upload` (its file or its form), inviting it first when
  /// the client asked to be (Expect: 100-continue); then Session::body_received(upload).
  /// `limit` bounds the body.
  void read_upload(std::unique_ptr<handlers::UploadedBody> upload, std::uint64_t limit);

  /// Names the upload in the log lines about it (its file name, or what stands for it).
  void name_upload(std::string name) { name_ = std::move(name); }

  /// Logs and answers an upload refused (before its body was read, or when storing it
  /// failed); `close`: the connection closes after the answer.
  void upload_refused(const Error& e, bool close = false);

 private:
  /// One upload in flight: the network thread receives into `buffer` while workers store the
  /// previous chunk from `stored`; the two swap when both are done.
  struct State {
    static constexpr std::size_t kChunk = 256 * 1024;
    std::unique_ptr<handlers::UploadedBody> upload;
    std::vector<char> buffer = std::vector<char>(kChunk);  // network thread: being received
    std::vector<char> stored;                              // worker: being stored
  };

  void read_small_chunk(std::string& body, std::size_t limit);
  void read_chunk();
  void on_chunk(beast::error_code ec);
  void pump();
  template <class Step>
  void store_on_worker(Step step);
  void on_stored(std::uint64_t seq, const Status& st);
  void finish();
  void fail(const Error& e);
  void drop();
  void abort(const char* why);

  void arm_deadline();
  bool disarm_deadline();
  [[nodiscard]] Error cut_short(std::string_view what, bool stalled);
  [[nodiscard]] std::optional<Error> check_rate(std::size_t got);

  Session<Stream>& s_;
  std::vector<char> small_buf_;
  std::shared_ptr<State> state_;
  std::string name_;          // the upload's file name, for logs
  std::uint64_t seq_ = 0;     // moves whenever an upload ends, so late steps are ignored
  bool receiving_ = false;    // a body read is under way
  int storing_ = 0;           // worker tasks storing a chunk
  std::size_t received_ = 0;  // bytes in state_->buffer waiting to be stored
  std::optional<Error> store_error_;
  std::optional<asio::steady_timer> timer_;  // the deadline of a body read
  std::uint64_t reads_ = 0;                  // moves when a body read returns
  bool stalled_ = false;                     // the deadline passed first
  // Minimum upload rate: when the current body read started, and the waiting time and bytes
  // of the current averaging window.
  std::chrono::steady_clock::time_point read_started_;
  std::chrono::steady_clock::duration window_wait_{};
  std::uint64_t window_bytes_ = 0;
};

}  // namespace wf::http
