#pragma once
// One connection: read a request's head, look it up in the route table, apply the route's
// credentials and body policy, run its handler (here, or on a worker), write the answer, and
// go on with the next request or close. The parts that do the I/O in between are its members:
// the body reader (small bodies, the upload pump), the response writer, the log follower.
//
// A class template over the stream (TcpStream for HTTP, TlsStream for HTTPS); its members are
// defined in session.cpp and the parts' .cpp files, each instantiated there for both streams.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "body_reader.hpp"
#include "client_counts.hpp"
#include "growing_file.hpp"
#include "log_follower.hpp"
#include "server_impl.hpp"
#include "transport.hpp"
#include "writer.hpp"

namespace wf::http {

/// How a connection was let in: the client-address slot it holds (released when it ends), or
/// the message of a connection refused at the door (503, then closed; it holds no slot).
struct Admission {
  ClientCounts::Slot slot = ClientCounts::kUncounted;
  std::string refusal;
  /// When the listener accepted it: the first-byte and first-head deadlines count from here.
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
};

template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  /// `tls`: the context of a TLS connection (kept alive while it is used); null for TcpStream.
  Session(Server::Impl& srv, Socket socket, std::shared_ptr<asio::ssl::context> tls,
          Admission admission);
  ~Session() override;

  void start();
  void close_if_idle() override;
  void evict() override;

  // ---- for the parts of the connection -------------------------------------------------

  [[nodiscard]] Server::Impl& server() { return srv_; }
  [[nodiscard]] NetThread& home() { return home_; }
  [[nodiscard]] Stream& stream() { return stream_; }
  [[nodiscard]] TcpStream& lowest() { return beast::get_lowest_layer(stream_); }
  [[nodiscard]] beast::flat_buffer& buffer() { return buffer_; }
  [[nodiscard]] RequestParser& parser() { return *parser_; }
  [[nodiscard]] const Request& request() const { return req_; }
  [[nodiscard]] std::uint64_t id() const { return id_; }
  [[nodiscard]] std::shared_ptr<Session> self() { return this->shared_from_this(); }

  /// Whether the connection may serve another request after this one: the client wants it, the
  /// server is not stopping, and the request's body was read to its end.
  [[nodiscard]] bool keep_alive() const;

  /// Answers the current request (through the writer).
  void send(Response r) {
    srv_.note_catalog_age(r);
    writer_.send(std::move(r));
  }
  /// Starts a chunked answer whose body the caller writes (through the writer).
  void write_chunked_head(const Response& meta, std::function<void(beast::error_code)> then) {
    writer_.write_chunked_head(meta, std::move(then));
  }

  /// Starts a 200 answer whose body the caller writes (through the writer).
  void write_stream_head(const Response& meta, std::optional<std::uint64_t> length, bool keep_alive,
                         std::function<void(beast::error_code)> then) {
    writer_.write_stream_head(meta, length, keep_alive, std::move(then));
  }

  /// The answer was written, or failed: counts and logs it, then reads the next request or
  /// closes the connection.
  void responded(int status, std::uint64_t length, beast::error_code ec, bool keep_alive);

  /// The request's body has arrived (the upload's, or a small one in Request::body): runs the
  /// route's handler.
  void body_received(std::unique_ptr<handlers::UploadedBody> upload);

  /// Ends the connection: half-closes, reads away what the client still sends (bounded),
  /// then closes.
  void close();

 private:
  static Stream open_stream(Socket socket, asio::ssl::context* tls);
  void on_first_byte(beast::error_code ec);
  void begin();
  void refuse();
  void leave_idle();
  void read_header();
  void on_header(beast::error_code ec);
  void wait_for_header_until(std::chrono::steady_clock::time_point deadline);
  void arm_header_timer(std::chrono::steady_clock::time_point at);
  void on_header_timer();
  /// The request's client, from the peer or (from a trusted proxy) the proxy's header: into
  /// req_.peer.
  void find_client();
  /// A request passed on by a trusted proxy counts against its client's cap while it is
  /// served: counted on the acceptor's thread (ClientCounts has one writer), then admitted or
  /// answered 503 back on this one.
  void count_client();
  void client_counted(std::optional<ClientCounts::Slot> slot);
  void release_request_slot();
  void admit();
  void refuse_request(const Error& e);
  void run(std::unique_ptr<handlers::UploadedBody> upload);
  /// What a handler run on a worker hands back: its answer, what it asked of the server, and
  /// the snapshot to install before the answer is sent.
  struct Handled {
    Response response;
    std::optional<handlers::LogFollow> follow;
    std::optional<handlers::GrowingFile> growing;
    bool unknown_token = false;
    bool upload = false;
    std::string_view upload_outcome;
    std::string note;
    SnapshotPtr snapshot;
  };
  void handled(Handled done);
  void drain();

  Server::Impl& srv_;
  NetThread& home_;                          // the thread this connection lives on
  std::shared_ptr<asio::ssl::context> tls_;  // kept alive while this connection uses it
  Stream stream_;
  bool tls_closing_ = false;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  Request req_;
  const handlers::Route* route_ = nullptr;  // the route of req_ (null until it is known)
  std::string_view label_ = "other";        // its metrics label
  std::uint64_t id_ = 0;
  std::uint64_t requests_ = 0;
  std::chrono::steady_clock::time_point accepted_;
  std::chrono::steady_clock::time_point started_;
  // The wait for a request's head on a plain connection is timed by one timer per connection
  // that is moved only when it fires early (see wait_for_header_until), rather than by
  // Beast's timer, which is armed and cancelled for every read: two more operations through
  // the io_context per request. TLS connections keep Beast's timer. The same timer bounds
  // the wait for a new connection's first byte (plain and TLS).
  asio::steady_timer header_timer_;
  std::chrono::steady_clock::time_point header_deadline_ = kNoDeadline;  // max: not waiting
  std::chrono::steady_clock::time_point header_timer_at_{};  // when the armed timer fires
  bool header_timer_armed_ = false;
  bool header_timed_out_ = false;
  static constexpr auto kNoDeadline = std::chrono::steady_clock::time_point::max();
  bool keep_alive_ = false;
  bool idle_ = true;
  char first_byte_ = 0;  // where the first byte is peeked at (it stays in the socket)
  ClientCounts::Slot slot_ = ClientCounts::kUncounted;
  // The TCP peer; whether it is a trusted proxy; the slot of the current request's client
  // (requests from a trusted proxy only).
  IpBytes peer_ip_{};
  std::string peer_text_;
  bool from_proxy_ = false;
  IpBytes client_ip_{};
  ClientCounts::Slot request_slot_ = ClientCounts::kUncounted;
  std::string refusal_;           // a connection refused at the door: the 503's message
  bool rechecked_ = false;        // this request's token was looked up in the catalog again
  bool position_waited_ = false;  // this request's X-Wheelforge-Min-Position was looked at
  bool drain_on_close_ = false;   // read what the client still sends before closing
  bool draining_ = false;
  std::uint64_t drained_ = 0;
  std::unique_ptr<std::array<char, 64 * 1024>> drain_buf_;
  BodyReader<Stream> body_{*this};
  ResponseWriter<Stream> writer_{*this};
  LogFollower<Stream> follower_{*this};
  GrowingFileStreamer<Stream> growing_{*this};
};

}  // namespace wf::http
