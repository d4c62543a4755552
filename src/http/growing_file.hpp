#pragma once
// An upstream file on its first download (handlers::GrowingFile), streamed to the client while
// it is written: the answer's head once the upstream has answered 200 and sent the first bytes
// (Content-Length when the size is known, else chunked), then the bytes written so far, read
// from the file being written (pread), and more as the download reports them (a wake-up posted
// to this connection's thread; nothing waits on a network thread). The last byte written stays
// back while the download runs, and the last byte and the last chunk leave only once the file
// is stored and verified: a download that fails ends the connection before them, so the client
// sees an incomplete answer. A download that fails before the head was sent gets the normal
// error answer (a 502 naming the problem).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "transport.hpp"
#include "wheelforge/handlers/context.hpp"

namespace wf::http {

template <class Stream>
class Session;

template <class Stream>
class GrowingFileStreamer {
 public:
  explicit GrowingFileStreamer(Session<Stream>& session) : s_(session) {}
  GrowingFileStreamer(const GrowingFileStreamer&) = delete;
  GrowingFileStreamer& operator=(const GrowingFileStreamer&) = delete;
  ~GrowingFileStreamer();

  /// Answers the session's current request with `file`.
  void start(handlers::GrowingFile file);

 private:
  void step();
  void wait(std::uint64_t version);
  void write_head(std::optional<std::uint64_t> length);
  void write_bytes(std::uint64_t upto);
  void end(bool complete, const std::string& why);

  Session<Stream>& s_;
  std::optional<handlers::GrowingFile> file_;
  bool head_sent_ = false;
  bool chunked_ = false;
  bool keep_alive_ = false;
  std::optional<std::uint64_t> length_;  // the Content-Length sent
  std::uint64_t sent_ = 0;               // body bytes sent
  std::uint64_t ticket_ = 0;             // a wait registered with the download
  std::vector<char> buf_;
};

}  // namespace wf::http
