#pragma once
// A Beast body that sends a byte range of a file from disk in fixed-size chunks, so a
// multi-GB wheel is never held in memory.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cerrno>
#include <memory>
#include <vector>

#include "wheelforge/util/fs.hpp"

namespace wf::http {

struct RangeFileBody {
  struct value_type {
    std::shared_ptr<UniqueFd> fd;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
  };

  static std::uint64_t size(const value_type& v) { return v.length; }

  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>& /*h*/, const value_type& body)
        : body_(body),
          pos_(body.offset),
          remain_(body.length),
          // Small files (METADATA, small wheels) get a buffer of their own size, not 256 KiB.
          buf_(static_cast<std::size_t>(std::min<std::uint64_t>(body.length, kChunk))) {}

    void init(boost::beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      if (remain_ == 0) {
        ec = {};
        return boost::none;
      }
      const std::size_t want =
          remain_ < buf_.size() ? static_cast<std::size_t>(remain_) : buf_.size();
      ssize_t n = 0;
      do {
        n = ::pread(body_.fd->get(), buf_.data(), want, static_cast<off_t>(pos_));
      } while (n < 0 && errno == EINTR);
      if (n <= 0) {
        // A blob shorter than its catalog size means the store was damaged: fail the
        // response rather than send a truncated file with a full Content-Length.
        ec = boost::beast::errc::make_error_code(
            n < 0 ? static_cast<boost::beast::errc::errc_t>(errno) : boost::beast::errc::io_error);
        return boost::none;
      }
      pos_ += static_cast<std::uint64_t>(n);
      remain_ -= static_cast<std::uint64_t>(n);
      ec = {};
      return std::pair<const_buffers_type, bool>(
          const_buffers_type(buf_.data(), static_cast<std::size_t>(n)), remain_ > 0);
    }

   private:
    const value_type& body_;
    std::uint64_t pos_;
    std::uint64_t remain_;
    static constexpr std::uint64_t kChunk = 256 * 1024;
    std::vector<char> buf_;
  };
};

}  // namespace wf::http
