#pragma once
// Following a build log (`?follow=1`): a chunked answer that grows with the log until its job
// ends, polled on a worker every 250 ms; the connection closes with it.

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <optional>

#include "transport.hpp"
#include "wheelforge/handlers/context.hpp"

namespace wf::http {

template <class Stream>
class Session;

template <class Stream>
class LogFollower {
 public:
  explicit LogFollower(Session<Stream>& session) : s_(session) {}

  /// Answers the session's current request with the log of `follow.job` from its offset.
  void start(handlers::LogFollow follow);

 private:
  void poll();

  Session<Stream>& s_;
  std::int64_t job_ = 0;
  std::uint64_t offset_ = 0;
  std::optional<asio::steady_timer> timer_;
};

}  // namespace wf::http
