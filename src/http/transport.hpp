#pragma once
// The types the parts of the transport share: streams bound to their thread's io_context, the
// request parser, and what the server needs of every connection.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>

#include "wheelforge/handlers/message.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// Streams bound to their thread's io_context by type (no type-erased executor per operation).
using Executor = asio::io_context::executor_type;
using Socket = tcp::socket::rebind_executor<Executor>::other;
using TcpStream = beast::basic_stream<tcp, Executor>;
using TlsStream = beast::ssl_stream<TcpStream>;
using RequestParser = bhttp::request_parser<bhttp::buffer_body>;

using SnapshotPtr = std::shared_ptr<const snapshot::Snapshot>;
using handlers::error_response;
using handlers::Method;
using handlers::Request;
using handlers::Response;

/// What the server needs of every connection, whatever its transport.
class SessionBase {
 public:
  SessionBase() = default;
  SessionBase(const SessionBase&) = delete;
  SessionBase& operator=(const SessionBase&) = delete;
  virtual ~SessionBase() = default;
  /// Closes the connection if it is waiting for a new request (graceful stop).
  virtual void close_if_idle() = 0;
  /// Closes the connection if it is an idle keep-alive one (served a request, nothing of the
  /// next one received), to make room at the connection cap. True when it did.
  virtual bool evict_if_idle() = 0;
};

}  // namespace wf::http
