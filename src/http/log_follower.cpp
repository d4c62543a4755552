#include "log_follower.hpp"

#include <boost/asio/write.hpp>
#include <chrono>

#include "session.hpp"

namespace wf::http {
namespace {

struct LogPoll {
  std::string data;
  std::optional<core::JobState> state;  // nullopt: no such job
};

}  // namespace

template <class Stream>
void LogFollower<Stream>::start(handlers::LogFollow follow) {
  job_ = follow.job;
  offset_ = follow.offset;
  Response meta;
  meta.set("Content-Type", "text/plain; charset=utf-8");
  meta.set("Cache-Control", "no-store");
  // `self` keeps the session, and with it this follower, alive until the callbacks run.
  s_.write_chunked_head(meta, [this, self = s_.self()](beast::error_code ec) {
    if (ec) return s_.close();
    poll();
  });
}

template <class Stream>
void LogFollower<Stream>::poll() {
  auto& srv = s_.server();
  srv.offload(
      [runner = srv.env.services.runner, job = job_, offset = offset_]() {
        LogPoll p;
        // The state is read before the log, so that a terminal state means the log is
        // complete when it is read.
        if (auto j = runner->jobs().find_job(job); j && j->has_value()) p.state = (*j)->state;
        p.data = runner->read_log(job, offset, 64U * 1024U);
        return p;
      },
      [this, self = s_.self()](LogPoll p) {
        const auto write_timeout = s_.server().config.write_timeout;
        if (!p.data.empty()) {
          offset_ += p.data.size();
          auto data = std::make_shared<std::string>(std::move(p.data));
          s_.lowest().expires_after(write_timeout);
          return asio::async_write(s_.stream(), bhttp::make_chunk(asio::buffer(*data)),
                                   [this, self, data](beast::error_code ec, std::size_t) {
                                     if (ec) return s_.close();
                                     poll();
                                   });
        }
        if (!p.state || core::is_terminal(*p.state) || s_.server().status.stopping) {
          s_.lowest().expires_after(write_timeout);
          return asio::async_write(s_.stream(), bhttp::make_chunk_last(),
                                   [this, self](beast::error_code, std::size_t) {
                                     s_.responded(200, offset_, {}, false);
                                   });
        }
        if (!timer_) timer_.emplace(s_.stream().get_executor());
        timer_->expires_after(std::chrono::milliseconds(250));
        timer_->async_wait([this, self](beast::error_code ec) {
          if (ec) return s_.close();
          poll();
        });
      });
}

template class LogFollower<TcpStream>;
template class LogFollower<TlsStream>;

}  // namespace wf::http
