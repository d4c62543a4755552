#include "wheelforge/http/server.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "admin_handlers.hpp"
#include "client_counts.hpp"
#include "file_body.hpp"
#include "framing.hpp"
#include "legacy_upload.hpp"
#include "message.hpp"
#include "metrics.hpp"
#include "read_handlers.hpp"
#include "ui_handlers.hpp"
#include "upload_handler.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/snapshot/snapshot.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SnapshotPtr = std::shared_ptr<const snapshot::Snapshot>;
// Streams bound to their thread's io_context by type (no type-erased executor per operation).
using Executor = asio::io_context::executor_type;
using Socket = tcp::socket::rebind_executor<Executor>::other;

class SessionBase;

/// One network thread: its own io_context (no locking inside Asio), the connections it serves,
/// and descriptors of recently sent blobs and large pages.
struct NetThread {
  asio::io_context ioc{1};
  std::unordered_set<SessionBase*> sessions;  // touched only on this thread
  // How many of them are idle keep-alive connections (written by this thread only, read by
  // the acceptor's to find one to close at the connection cap).
  std::atomic<std::size_t> idle_keep_alive{0};
  void idle_changed(bool more) {
    const auto n = idle_keep_alive.load(std::memory_order_relaxed);
    idle_keep_alive.store(more ? n + 1 : n - 1, std::memory_order_relaxed);
  }
  // Keeps run() going while the thread has no connection; released when the server stops.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;

  /// A blob (immutable, content-addressed) ready to send: an open descriptor, and for small
  /// blobs (METADATA files, small wheels) their bytes, so that they go out with the head in a
  /// single write. From a small cache that is emptied whenever a new snapshot is installed
  /// (so deleted blobs are let go).
  struct Blob {
    std::shared_ptr<UniqueFd> fd;
    std::shared_ptr<const std::string> bytes;  // null for large blobs
  };
  Blob open_blob(const std::string& path, std::uint64_t installed) {
    forget_if_reinstalled(installed);
    if (const auto it = blobs.find(path); it != blobs.end()) return it->second;
    Blob blob{std::make_shared<UniqueFd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), nullptr};
    if (!blob.fd->valid()) return blob;
    struct stat st {};
    if (::fstat(blob.fd->get(), &st) == 0 && st.st_size <= static_cast<off_t>(kSmallBlob)) {
      auto bytes = std::make_shared<std::string>(static_cast<std::size_t>(st.st_size), '\0');
      if (::pread(blob.fd->get(), bytes->data(), bytes->size(), 0) ==
          static_cast<ssize_t>(bytes->size())) {
        blob.bytes = std::move(bytes);
      }
    }
    if (blobs.size() >= kMaxCachedBlobs) blobs.clear();
    blobs.emplace(path, blob);
    return blob;
  }

  /// A large cached page (at least kFilePage bytes) copied once into an in-memory file, so
  /// that it is sent with sendfile(2) like a blob: no copy of the page per response. Null for
  /// smaller pages, or when the file cannot be made (the page is then sent from memory).
  std::shared_ptr<UniqueFd> page_file(const std::shared_ptr<const std::string>& page,
                                      std::uint64_t installed) {
    if (page->size() < kFilePage) return nullptr;
    forget_if_reinstalled(installed);
    if (const auto it = pages.find(page.get()); it != pages.end()) return it->second.fd;
    auto fd = std::make_shared<UniqueFd>(::memfd_create("wheelforge-page", MFD_CLOEXEC));
    if (!fd->valid() || !write_all(fd->get(), page->data(), page->size())) return nullptr;
    if (pages.size() >= kMaxCachedPages) pages.clear();
    // The entry holds the page, so that its address is not reused while it is a key.
    pages.emplace(page.get(), PageFile{page, fd});
    return fd;
  }

 private:
  /// Both caches are emptied whenever a new snapshot is installed.
  void forget_if_reinstalled(std::uint64_t installed) {
    if (cached_installed == installed) return;
    blobs.clear();
    pages.clear();
    cached_installed = installed;
  }

  static constexpr std::size_t kMaxCachedBlobs = 64;
  static constexpr std::size_t kSmallBlob = 16 * 1024;
  static constexpr std::size_t kFilePage = 16 * 1024;
  static constexpr std::size_t kMaxCachedPages = 256;
  std::uint64_t cached_installed = 0;  // the install the caches below belong to
  std::unordered_map<std::string, Blob> blobs;
  struct PageFile {
    std::shared_ptr<const std::string> page;
    std::shared_ptr<UniqueFd> fd;
  };
  std::unordered_map<const std::string*, PageFile> pages;
};

namespace {

// The network thread the calling code runs on (null elsewhere).
thread_local NetThread* t_net_thread = nullptr;

// Every snapshot installation in the process gets a distinct number, so that a thread's
// cached copy can tell whether it is still the current one with a single atomic load.
std::atomic<std::uint64_t> g_installs{0};

struct LocalSnapshot {
  const void* owner = nullptr;
  std::uint64_t installed = 0;
  SnapshotPtr snapshot;
};
thread_local LocalSnapshot t_snapshot;

std::size_t network_threads_for(std::size_t configured) {
  if (configured > 0) return configured;
  return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

}  // namespace

struct Server::Impl {
  Impl(ServerConfig c, Services s)
      : config(std::move(c)),
        services(s),
        workers(std::max<std::size_t>(1, config.worker_threads)),
        threads(make_threads(network_threads_for(config.network_threads))),
        ioc(threads.front()->ioc),
        acceptor(ioc),
        poll_timer(ioc),
        grace_timer(ioc),
        token_timer(ioc),
        clients(config.max_connections) {}

  static std::vector<std::unique_ptr<NetThread>> make_threads(std::size_t n) {
    std::vector<std::unique_ptr<NetThread>> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(std::make_unique<NetThread>());
    return v;
  }

  ServerConfig config;
  Services services;
  // Set when the server is destroyed: handlers still queued in the io_contexts are destroyed
  // with them, and the sessions they own must then not touch the server's other members.
  // Declared before the threads so that it outlives them.
  bool tearing_down = false;
  asio::thread_pool workers;
  // The network threads; the first one runs on the thread that calls run() and also owns the
  // acceptor and the timers below.
  std::vector<std::unique_ptr<NetThread>> threads;
  asio::io_context& ioc;
  tcp::acceptor acceptor;
  asio::steady_timer poll_timer;
  asio::steady_timer grace_timer;
  std::size_t next_thread = 0;  // round-robin for accepted connections (first thread only)

  // Tokens another process has just created (first thread only): see recheck_tokens().
  struct TokenWaiter {
    asio::io_context* home;
    std::function<void()> then;
    asio::executor_work_guard<asio::io_context::executor_type> guard;
  };
  static constexpr std::chrono::milliseconds kTokenRecheckInterval{100};
  asio::steady_timer token_timer;
  bool token_timer_armed = false;
  bool token_check_running = false;
  std::chrono::steady_clock::time_point token_check_started{};
  std::vector<TokenWaiter> token_waiters;  // for the next check to start

  // The connection caps: open connections per client address, the peer of the connection
  // being accepted (first thread only), connections being refused, and refusals so far.
  ClientCounts clients;
  tcp::endpoint accept_peer;
  std::atomic<std::size_t> refusing{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::int64_t> refusal_logged_ms{-1000000};
  static constexpr std::size_t kMaxRefusing = 128;

  std::atomic<std::uint64_t> next_request_id{1};
  std::atomic<std::size_t> open_sessions{0};
  // First thread only: the TLS context new connections use (replaced on reload); null for
  // plain HTTP.
  std::shared_ptr<asio::ssl::context> tls;
  std::atomic<bool> stopping{false};
  Metrics metrics;
  // Web UI login sessions (thread-safe: used by the UI handlers on workers).
  UiSessions ui_sessions;
  // The current snapshot; network threads read it through their own copy (snapshot()).
  mutable std::mutex snapshot_mu;
  SnapshotPtr snapshot_;
  std::atomic<std::uint64_t> installed{0};  // g_installs value of snapshot_
  // Read by workers to skip needless reloads.
  std::atomic<std::uint64_t> generation{0};

  void accept();
  void admit(NetThread& target, Socket socket, const std::shared_ptr<asio::ssl::context>& tls);
  void open(NetThread& target, Socket socket, std::shared_ptr<asio::ssl::context> tls,
            ClientCounts::Slot slot);
  void refuse(NetThread& target, Socket socket, std::shared_ptr<asio::ssl::context> tls,
              std::string why, std::string message);
  void recheck_tokens(std::function<void()> then);
  void run_token_check();
  SnapshotPtr load_if_changed();
  void schedule_poll();
  void begin_stop();
  void maybe_finish_stop();

  /// The network thread the caller runs on (the first one when called from elsewhere).
  NetThread& here() const { return t_net_thread != nullptr ? *t_net_thread : *threads.front(); }

  /// The current snapshot, as this thread's cached copy: one atomic load per call unless a
  /// new snapshot was installed since the thread last looked.
  const SnapshotPtr& snapshot() const {
    if (t_snapshot.owner != this ||
        t_snapshot.installed != installed.load(std::memory_order_acquire)) {
      std::lock_guard lock(snapshot_mu);
      t_snapshot.owner = this;
      t_snapshot.installed = installed.load(std::memory_order_relaxed);
      t_snapshot.snapshot = snapshot_;
    }
    return t_snapshot.snapshot;
  }

  /// Installs a snapshot if it is newer than the current one (any thread).
  void install(SnapshotPtr s) {
    SnapshotPtr old;
    {
      std::lock_guard lock(snapshot_mu);
      if (!s || (snapshot_ && s->generation() <= snapshot_->generation())) return;
      old = std::exchange(snapshot_, std::move(s));
      generation.store(snapshot_->generation());
      installed.store(g_installs.fetch_add(1) + 1, std::memory_order_release);
    }
    // Every network thread lets go of the old snapshot now rather than at its next request;
    // whichever reference is the last, the old snapshot is freed on a worker and the memory
    // handed back to the system there.
    release_on_worker(std::move(old));
    for (auto& t : threads) {
      asio::post(t->ioc, [this] {
        if (t_snapshot.owner != this) return;
        SnapshotPtr mine = std::move(t_snapshot.snapshot);
        t_snapshot.owner = nullptr;
        (void)snapshot();
        release_on_worker(std::move(mine));
      });
    }
  }

  void release_on_worker(SnapshotPtr old) {
    if (!old) return;
    asio::post(workers, [old = std::move(old)]() mutable {
      if (old.use_count() > 1) return;  // still in use elsewhere: that holder frees it
      old.reset();
      ::malloc_trim(0);
    });
  }

  /// Loads a fresh snapshot (worker thread; blocks on SQLite).
  Result<SnapshotPtr> load_snapshot() const {
    auto contents = services.catalog->load();
    if (!contents) return contents.error();
    return snapshot::Snapshot::build(std::move(*contents));
  }

  /// The snapshot after this process changed one project (worker thread): only that project
  /// is read again and the others are shared with the current snapshot, when nothing else
  /// changed since (the catalog's generation moved by exactly `changes`); a full load otherwise.
  Result<SnapshotPtr> load_snapshot_after(const std::string& project, std::uint64_t changes) const {
    SnapshotPtr current;
    {
      std::lock_guard lock(snapshot_mu);
      current = snapshot_;
    }
    auto contents = services.catalog->load_project(project);
    if (!contents) return contents.error();
    if (current && contents->generation == current->generation() + changes) {
      return snapshot::Snapshot::update(*current, project, std::move(*contents));
    }
    return load_snapshot();
  }

  /// Runs `work` on the worker pool, then `then(result)` back on the calling network thread.
  /// The work guard keeps that thread's run() alive while the worker is busy.
  template <class Work, class Then>
  void offload(Work work, Then then) {
    asio::io_context& home = here().ioc;
    asio::post(workers, [&home, work = std::move(work), then = std::move(then),
                         guard = asio::make_work_guard(home)]() mutable {
      auto result = work();
      asio::post(home, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }
};

namespace {

Method method_of(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get:
      return Method::get;
    case bhttp::verb::head:
      return Method::head;
    case bhttp::verb::put:
      return Method::put;
    case bhttp::verb::post:
      return Method::post;
    case bhttp::verb::delete_:
      return Method::del;
    default:
      return Method::other;
  }
}

const char* method_name(Method m) {
  switch (m) {
    case Method::get:
      return "GET";
    case Method::head:
      return "HEAD";
    case Method::put:
      return "PUT";
    case Method::post:
      return "POST";
    case Method::del:
      return "DELETE";
    case Method::other:
      return "OTHER";
  }
  return "OTHER";
}

// One upload in flight. The network thread receives into `buffer` while workers store the
// previous chunk from `stored`; the two swap when both are done. A PUT's chunk is written and
// hashed by two workers at once; a form's chunk is fed to its parser by one. Chunks are
// stored in the order received.
struct UploadState {
  static constexpr std::size_t kChunk = 256 * 1024;
  explicit UploadState(store::TempFile t) : temp(std::move(t)) {}
  UploadState(const std::string& boundary, store::TempFile t)
      : form(std::make_unique<LegacyUpload>(boundary, std::move(t))) {}
  std::optional<store::TempFile> temp;  // PUT /upload/: the body is the file
  std::unique_ptr<LegacyUpload> form;   // POST /legacy/: the body is a multipart form
  std::vector<char> buffer = std::vector<char>(kChunk);  // network thread: being received
  std::vector<char> stored;                              // worker: being stored
};

}  // namespace

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

namespace {

/// Closes one idle keep-alive connection of this thread; false when it has none.
bool evict_idle_session(NetThread& thread) {
  for (SessionBase* s : thread.sessions) {
    if (s->evict_if_idle()) return true;
  }
  return false;
}

}  // namespace

using TcpStream = beast::basic_stream<tcp, Executor>;
using TlsStream = beast::ssl_stream<TcpStream>;

/// How a connection was let in: the client-address slot it holds (released when it ends), or
/// the message of a connection refused at the door (503, then closed; it holds no slot).
struct Admission {
  ClientCounts::Slot slot = ClientCounts::kUncounted;
  std::string refusal;
};

/// One connection. Stream is TcpStream (HTTP) or TlsStream (HTTPS); everything but
/// the handshake and the closing is the same for both.
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  Session(Server::Impl& srv, Socket socket, Admission admission) requires(!kTls)
      : srv_(srv),
        home_(srv.here()),
        stream_(std::move(socket)),
        slot_(admission.slot),
        refusal_(std::move(admission.refusal)) {
    home_.sessions.insert(this);
  }
  Session(Server::Impl& srv, Socket socket, std::shared_ptr<asio::ssl::context> tls,
          Admission admission) requires kTls : srv_(srv),
                                               home_(srv.here()),
                                               tls_(std::move(tls)),
                                               stream_(std::move(socket), *tls_),
                                               slot_(admission.slot),
                                               refusal_(std::move(admission.refusal)) {
    home_.sessions.insert(this);
  }
  ~Session() override {
    if (srv_.tearing_down) return;
    home_.sessions.erase(this);
    if (counted_idle_) home_.idle_changed(false);
    if (!refusal_.empty()) {
      srv_.refusing.fetch_sub(1);
      return;
    }
    srv_.clients.release(slot_);
    srv_.open_sessions.fetch_sub(1);
    srv_.maybe_finish_stop();
  }

  void start() {
    if constexpr (kTls) {
      lowest().expires_after(srv_.config.read_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) {
                                  spdlog::debug("TLS handshake failed: {}", ec.message());
                                  return self->lowest().close();
                                }
                                self->refusal_.empty() ? self->read_header() : self->refuse();
                              });
    } else {
      refusal_.empty() ? read_header() : refuse();
    }
  }

  void close_if_idle() override {
    if (idle_) {
      beast::error_code ec;
      lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
      lowest().close();
    }
  }

  bool evict_if_idle() override {
    if (!idle_ || requests_ == 0 || buffer_.size() != 0) return false;
    leave_idle();
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
    return true;
  }

 private:
  TcpStream& lowest() { return beast::get_lowest_layer(stream_); }

  /// Answers a connection refused at the door (a connection cap) without reading its
  /// request, then closes it: 503 with Retry-After.
  void refuse() {
    idle_ = false;
    Response r;
    r.status = 503;
    r.set("Content-Type", "text/plain; charset=utf-8");
    r.set("Retry-After", "1");
    r.body = refusal_ + "\n";
    r.close = true;
    // A request may be on its way: read it away before closing, so that the client is not
    // reset before it has read the answer.
    drain_on_close_ = true;
    send(std::move(r));
  }

  void leave_idle() {
    idle_ = false;
    if (counted_idle_) {
      counted_idle_ = false;
      home_.idle_changed(false);
    }
  }

  void read_header() {
    idle_ = true;
    if (requests_ > 0 && !counted_idle_) {
      counted_idle_ = true;
      home_.idle_changed(true);
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.config.max_header_bytes));
    // No body limit while the head is parsed: a declared length above the upload limit must
    // reach plan_upload, which answers 413 before any body byte is read. The limit is set once
    // the request is known to be an upload (it then bounds chunked bodies too).
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    lowest().expires_after(requests_ == 0 ? srv_.config.read_timeout : srv_.config.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                               self->on_header(ec);
                             });
  }

  void on_header(beast::error_code ec) {
    leave_idle();
    if (ec) {
      // The client went away (or never finished its head): nothing to answer.
      if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
          ec == beast::error::timeout || ec == asio::error::operation_aborted ||
          ec == asio::error::connection_reset || ec == asio::error::eof) {
        return close();
      }
      // Malformed framing (two lengths, Content-Length with chunked, bad chunk sizes, header
      // too large): answer 400/431 and close, never guess.
      Response r = error_response(
          ec == bhttp::error::header_limit
              ? make_error(Errc::header_too_large,
                           "request header fields too large: the limit is " +
                               std::to_string(srv_.config.max_header_bytes) + " bytes")
              : make_error(Errc::invalid, "malformed request: " + ec.message()));
      r.close = true;
      started_ = std::chrono::steady_clock::now();
      id_ = srv_.next_request_id.fetch_add(1, std::memory_order_relaxed);
      return send(std::move(r));
    }
    ++requests_;
    id_ = srv_.next_request_id.fetch_add(1, std::memory_order_relaxed);
    started_ = std::chrono::steady_clock::now();
    const auto& msg = parser_->get();
    auto header_strings = std::move(req_.headers);  // reused below
    req_ = Request{};
    req_.headers = std::move(header_strings);
    req_.method = method_of(msg.method());
    req_.target = std::string(msg.target());
    req_.tls = kTls;
    ui_body_ = false;
    keep_alive_ = msg.keep_alive();
    tokens_rechecked_ = false;
    // The previous request's strings are reused (assign keeps their capacity).
    std::size_t fields = 0;
    HeadFraming framing;
    framing.version = msg.version();
    for (const auto& field : msg) {
      if (fields == req_.headers.size()) req_.headers.emplace_back();
      auto& [name, value] = req_.headers[fields++];
      name.assign(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      value.assign(field.value());
      if (field.name() == bhttp::field::transfer_encoding) {
        if (framing.transfer_encodings++ == 0) framing.transfer_encoding = field.value();
      } else if (field.name() == bhttp::field::host) {
        if (framing.hosts++ == 0) framing.host = field.value();
      }
    }
    req_.headers.resize(fields);
    if (auto bad = check_head(framing)) {
      // Where this body ends (if it has one) is unknown: never read on, answer and close.
      Response r = error_response(*bad);
      r.close = true;
      drain_on_close_ = true;
      return send(std::move(r));
    }
    if (req_.target.size() > srv_.config.max_target_bytes) {
      Response r = error_response(make_error(
          Errc::uri_too_long, "request target too long: the limit is " +
                                  std::to_string(srv_.config.max_target_bytes) + " bytes"));
      r.close = true;
      return send(std::move(r));
    }
    auto parsed = parse_target(req_.target);
    if (!parsed) {
      Response r = error_response(parsed.error());
      r.close = !parser_->is_done();
      return send(std::move(r));
    }
    req_.segments = std::move(parsed->first);
    req_.query = std::move(parsed->second);
    route();
  }

  /// Answers the request whose head was just read (again, after a token recheck).
  void route() {
    const auto& seg = req_.segments;
    if (!seg.empty() && seg[0] == "legacy" &&
        (seg.size() == 1 || (seg.size() == 2 && seg[1].empty()))) {
      // twine, poetry and pdm never follow redirects: /legacy and /legacy/ are both answered.
      if (req_.method != Method::post) return send(method_not_allowed("POST"));
      return begin_legacy();
    }
    const bool is_upload = !req_.segments.empty() && req_.segments[0] == "upload";
    if (is_upload) {
      if (req_.method != Method::put) return send(method_not_allowed("PUT"));
      return begin_upload();
    }
    if (is_admin_route(req_)) return begin_admin();
    if (is_ui_route(req_)) return begin_ui();
    if (!parser_->is_done()) {
      // Reads carry no body; refuse one rather than read it.
      Response r = error_response(make_error(Errc::invalid, "this request takes no body"));
      r.close = true;
      return send(std::move(r));
    }
    if (req_.method != Method::get && req_.method != Method::head) {
      return send(method_not_allowed("GET, HEAD"));
    }
    if (seg.size() == 1 && seg[0] == "readyz") {
      Response r;
      r.status = srv_.stopping ? 503 : 200;
      r.set("Content-Type", "text/plain; charset=utf-8");
      r.body = std::string(srv_.stopping ? "stopping\n" : "ready\n");
      return send(std::move(r));
    }
    // Private mode: every read but the liveness probes needs a read (or higher) token. The 401
    // carries WWW-Authenticate, which is what makes pip try .netrc, keyring or a prompt.
    if (srv_.config.private_reads && !(seg.size() == 1 && seg[0] == "healthz")) {
      if (auto allowed = authorize_token(catalog::Scope::read); !allowed) {
        if (recheck_token(allowed.error())) return;
        return send(error_response(allowed.error()));
      }
    }
    if (seg.size() == 1 && seg[0] == "metrics") return send(metrics_response());
    send(handle_read(req_, *srv_.snapshot(), *srv_.services.store));
  }

  Response metrics_response() const {
    const auto cache = snapshot::cache_stats();
    const auto& snap = srv_.snapshot();
    std::map<std::string, double> gauges{
        {"wheelforge_connections_open", static_cast<double>(srv_.open_sessions.load())},
        {"wheelforge_connections_refused", static_cast<double>(srv_.refused.load())},
        {"wheelforge_catalog_generation", static_cast<double>(snap->generation())},
        {"wheelforge_projects", static_cast<double>(snap->project_count())},
        {"wheelforge_files", static_cast<double>(snap->file_count())},
        {"wheelforge_page_cache_hits", static_cast<double>(cache.hits)},
        {"wheelforge_page_cache_misses", static_cast<double>(cache.misses)},
    };
    Response r;
    r.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    r.body = srv_.metrics.render(gauges);
    return r;
  }

  // ---- admin API -------------------------------------------------------------------------

  static constexpr std::size_t kMaxAdminBody = 64 * 1024;

  /// Checks the request's credentials against a scope; remembers the token for later checks.
  Status authorize_token(catalog::Scope scope) {
    auto token = auth::token_from_authorization(req_.header("authorization"));
    if (!token) return token.error();
    auto granted = auth::authorize(srv_.snapshot()->tokens(), *token, scope);
    if (!granted) return granted.error();
    token_ = token->value_or("");
    return ok_status();
  }

  /// A token this server does not know may have just been created by another process
  /// (`wheelforge token create`): before `e` (a 401) is answered, the catalog is looked at
  /// once (Impl::recheck_tokens) and the request routed again. True when that is under way.
  bool recheck_token(const Error& e) {
    if (e.code != Errc::unauthorized || tokens_rechecked_ || !has_unknown_token()) return false;
    tokens_rechecked_ = true;
    srv_.recheck_tokens([self = this->shared_from_this()] { self->route(); });
    return true;
  }

  bool has_unknown_token() const {
    const auto token = auth::token_from_authorization(req_.header("authorization"));
    return token && *token && srv_.snapshot()->tokens().find(**token) == nullptr;
  }

  void begin_admin() {
    const Status allowed = authorize_token(catalog::Scope::admin);
    if (!allowed) {
      if (recheck_token(allowed.error())) return;
      Response r = error_response(allowed.error());
      r.close = !parser_->is_done();
      return send(std::move(r));
    }
    const auto length = parser_->content_length();
    if (length && *length > kMaxAdminBody) {
      Response r = error_response(body_too_large("request body", *length, kMaxAdminBody));
      r.close = true;
      return send(std::move(r));
    }
    if (const auto job = log_follow_request(req_); job && srv_.services.runner != nullptr) {
      return start_log_stream(*job, parse_u64(req_.query_param("offset")).value_or(0));
    }
    parser_->body_limit(kMaxAdminBody);
    admin_body_.clear();
    small_body_buf_.resize(16 * 1024);
    read_admin_body();
  }

  // ---- following a build log: a chunked response that grows with the log ------------------

  struct LogPoll {
    std::string data;
    std::optional<core::JobState> state;  // nullopt: no such job
  };

  void start_log_stream(std::int64_t job, std::uint64_t offset) {
    log_job_ = job;
    log_offset_ = offset;
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    Response meta;
    meta.set("Content-Type", "text/plain; charset=utf-8");
    meta.set("Cache-Control", "no-store");
    keep_alive_ = false;  // the stream ends with the job; the connection with it
    fill(*res, meta);
    res->chunked(true);
    auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
    lowest().expires_after(srv_.config.write_timeout);
    bhttp::async_write_header(
        stream_, *sr,
        [self = this->shared_from_this(), res, sr](beast::error_code ec, std::size_t) {
          if (ec) return self->close();
          self->poll_log();
        });
  }

  void poll_log() {
    srv_.offload(
        [runner = srv_.services.runner, job = log_job_, offset = log_offset_]() {
          LogPoll p;
          // The state is read before the log, so that a terminal state means the log is
          // complete when it is read.
          if (auto j = runner->jobs().find_job(job); j && j->has_value()) p.state = (*j)->state;
          p.data = runner->read_log(job, offset, 64U * 1024U);
          return p;
        },
        [self = this->shared_from_this()](LogPoll p) {
          if (!p.data.empty()) {
            self->log_offset_ += p.data.size();
            auto data = std::make_shared<std::string>(std::move(p.data));
            self->lowest().expires_after(self->srv_.config.write_timeout);
            return boost::asio::async_write(self->stream_, bhttp::make_chunk(asio::buffer(*data)),
                                            [self, data](beast::error_code ec, std::size_t) {
                                              if (ec) return self->close();
                                              self->poll_log();
                                            });
          }
          if (!p.state || core::is_terminal(*p.state) || self->srv_.stopping) {
            self->lowest().expires_after(self->srv_.config.write_timeout);
            return boost::asio::async_write(self->stream_, bhttp::make_chunk_last(),
                                            [self](beast::error_code, std::size_t) {
                                              self->log(200, self->log_offset_, {});
                                              self->close();
                                            });
          }
          if (!self->log_timer_) self->log_timer_.emplace(self->stream_.get_executor());
          self->log_timer_->expires_after(std::chrono::milliseconds(250));
          self->log_timer_->async_wait([self](beast::error_code ec) {
            if (ec) return self->close();
            self->poll_log();
          });
        });
  }

  // ---- web UI: pages and small form POSTs, answered on a worker --------------------------

  void begin_ui() {
    if (req_.method == Method::post) {
      if (const auto length = parser_->content_length(); length && *length > kMaxAdminBody) {
        Response r = error_response(body_too_large("request body", *length, kMaxAdminBody));
        r.close = true;
        return send(std::move(r));
      }
      parser_->body_limit(kMaxAdminBody);
      admin_body_.clear();
      small_body_buf_.resize(16 * 1024);
      ui_body_ = true;
      return read_admin_body();
    }
    if (!parser_->is_done()) {
      Response r = error_response(make_error(Errc::invalid, "this request takes no body"));
      r.close = true;
      return send(std::move(r));
    }
    run_ui();
  }

  void run_ui() {
    srv_.offload(
        [&srv = srv_, req = req_, body = admin_body_, snap = srv_.snapshot()]() {
          return handle_ui(
              req, body,
              UiContext{snap, srv.services.runner, &srv.ui_sessions, srv.config.private_reads});
        },
        [self = this->shared_from_this()](UiResult result) {
          // A token just created elsewhere, in an Authorization header or the login form.
          const bool login = self->req_.method == Method::post && self->req_.segments.size() == 1 &&
                             self->req_.segments[0] == "login";
          if (result.response.status == 401 && !self->tokens_rechecked_ &&
              (login || self->has_unknown_token())) {
            self->tokens_rechecked_ = true;
            return self->srv_.recheck_tokens([self] { self->run_ui(); });
          }
          if (!result.note.empty()) spdlog::info("req={} ui: {}", self->id_, result.note);
          if (result.follow_job && self->srv_.services.runner != nullptr) {
            return self->start_log_stream(*result.follow_job, result.follow_offset);
          }
          self->send(std::move(result.response));
        });
  }

  void read_admin_body() {
    if (parser_->is_done()) return ui_body_ ? run_ui() : run_admin();
    auto& body = parser_->get().body();
    body.data = small_body_buf_.data();
    body.size = small_body_buf_.size();
    arm_body_deadline();
    bhttp::async_read_some(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
          const bool stalled = self->disarm_body_deadline();
          if (ec == bhttp::error::need_buffer) ec = {};
          if (ec && (stalled || body_cut_short(ec))) {
            Response r = error_response(self->cut_short("request body", stalled));
            r.close = true;
            return self->send(std::move(r));
          }
          if (ec) {
            Response r = error_response(
                ec == bhttp::error::body_limit
                    ? body_too_large("request body", std::nullopt, kMaxAdminBody)
                    : make_error(Errc::invalid, "cannot read the request body: " + ec.message()));
            r.close = true;
            return self->send(std::move(r));
          }
          const std::size_t got = self->small_body_buf_.size() - self->parser_->get().body().size;
          self->admin_body_.append(self->small_body_buf_.data(), got);
          self->read_admin_body();
        });
  }

  void run_admin() {
    srv_.offload(
        [&srv = srv_, req = req_,
         body = std::move(admin_body_)]() -> std::pair<Response, SnapshotPtr> {
          Response r = handle_admin(req, body, *srv.services.catalog, srv.services.runner);
          SnapshotPtr snap;
          // Yank, unyank and delete change what the pages show; claims what uploads may do.
          const bool changes_pages = req.segments.size() >= 2 &&
                                     (req.segments[1] == "yank" || req.segments[1] == "unyank" ||
                                      req.segments[1] == "files" || req.segments[1] == "projects");
          if (r.status < 300 && changes_pages) {
            if (auto loaded = srv.load_snapshot()) snap = *loaded;
          }
          return {std::move(r), std::move(snap)};
        },
        [self = this->shared_from_this()](std::pair<Response, SnapshotPtr> done) {
          self->srv_.install(std::move(done.second));
          spdlog::info("req={} admin {} -> {}", self->id_, sanitize_for_log(self->req_.target, 300),
                       done.first.status);
          self->send(std::move(done.first));
        });
  }

  // ---- uploads ---------------------------------------------------------------------------

  void begin_upload() {
    const auto& msg = parser_->get();
    std::optional<std::uint64_t> length;
    if (const auto cl = parser_->content_length()) length = *cl;
    auto plan =
        plan_upload(req_, length, srv_.services.ingestor->limits().max_file_size, *srv_.snapshot());
    if (!plan) {
      if (recheck_token(plan.error())) return;
      Response r = error_response(plan.error());
      r.close = !parser_->is_done();  // the body was not read: the connection is unusable
      return send(std::move(r));
    }
    filename_ = plan->filename;
    uploader_ = plan->uploader;
    parser_->body_limit(srv_.services.ingestor->limits().max_file_size);
    const bool expect_continue = iequals(msg[bhttp::field::expect], "100-continue");
    srv_.offload([&srv = srv_] { return srv.services.store->create_temp(); },
                 [self = this->shared_from_this(), expect_continue](Result<store::TempFile> temp) {
                   if (!temp) return self->send(self->upload_failed(temp.error()));
                   self->upload_ = std::make_shared<UploadState>(std::move(*temp));
                   self->start_body(expect_continue);
                 });
  }

  static constexpr std::size_t kUploadReadSize = 256 * 1024;

  // The form overhead a twine upload adds around the file (metadata fields, descriptions).
  static constexpr std::uint64_t kFormOverhead = 4U << 20U;

  void begin_legacy() {
    const Status allowed = authorize_token(catalog::Scope::upload);
    if (!allowed && recheck_token(allowed.error())) return;
    auto boundary = allowed ? boundary_from_content_type(req_.header("content-type"))
                            : Result<std::string>(allowed.error());
    const std::uint64_t limit = srv_.services.ingestor->limits().max_file_size + kFormOverhead;
    if (boundary) {
      if (const auto cl = parser_->content_length(); cl && *cl > limit) {
        boundary = body_too_large("upload", *cl, srv_.services.ingestor->limits().max_file_size);
      }
    }
    if (!boundary) {
      Response r = upload_failed(boundary.error());
      r.close = !parser_->is_done();
      return send(std::move(r));
    }
    filename_ = "(form upload)";
    parser_->body_limit(limit);
    const bool expect_continue = iequals(parser_->get()[bhttp::field::expect], "100-continue");
    srv_.offload([&srv = srv_] { return srv.services.store->create_temp(); },
                 [self = this->shared_from_this(), expect_continue,
                  boundary = std::move(*boundary)](Result<store::TempFile> temp) mutable {
                   if (!temp) return self->send(self->upload_failed(temp.error()));
                   self->upload_ =
                       std::make_shared<UploadState>(std::move(boundary), std::move(*temp));
                   self->start_body(expect_continue);
                 });
  }

  /// Invites the body if the client waits for it, then reads it.
  void start_body(bool expect_continue) {
    rate_window_wait_ = {};
    rate_window_bytes_ = 0;
    if (!expect_continue) return upload_pump();
    auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
    lowest().expires_after(srv_.config.write_timeout);
    bhttp::async_write(stream_, *cont,
                       [self = this->shared_from_this(), cont](beast::error_code ec, std::size_t) {
                         if (ec) return self->abort_upload("client went away");
                         self->upload_pump();
                       });
  }

  // The body is received and stored at the same time: while a worker stores one chunk, the
  // network thread receives the next (upload_pump decides what happens next after each step).

  void read_body() {
    // Beast sizes each socket read by the free capacity of the session's buffer (512 bytes when
    // empty): give uploads room for a whole chunk per read.
    if (buffer_.capacity() < kUploadReadSize) buffer_.reserve(kUploadReadSize);
    auto& body = parser_->get().body();
    body.data = upload_->buffer.data();
    body.size = upload_->buffer.size();
    arm_body_deadline();
    read_started_ = std::chrono::steady_clock::now();
    receiving_ = true;
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                             self->on_body(ec);
                           });
  }

  void on_body(beast::error_code ec) {
    receiving_ = false;
    const bool stalled = disarm_body_deadline();
    if (store_error_ && storing_ == 0) {
      // Storing the previous chunk failed while this read was under way (it was cancelled).
      const Error e = *std::exchange(store_error_, std::nullopt);
      drop_upload();
      Response r = upload_failed(e);
      r.close = true;
      return send(std::move(r));
    }
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec == bhttp::error::body_limit) {
      drop_upload();
      Response r = error_response(
          body_too_large("upload", std::nullopt, srv_.services.ingestor->limits().max_file_size));
      r.close = true;
      return send(std::move(r));
    }
    if (ec) {
      if (stalled || body_cut_short(ec)) {
        // Answered where the client can still read it: it stopped sending (half-closed, or
        // stalled past the read deadline) but may still be listening.
        srv_.metrics.upload("aborted");
        const Error e = cut_short("upload", stalled);
        spdlog::info("req={} upload of {} aborted: {}", id_, sanitize_for_log(filename_),
                     e.message);
        drop_upload();
        Response r = error_response(e);
        r.close = true;
        return send(std::move(r));
      }
      if (ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
        return abort_upload("client went away");
      }
      drop_upload();
      Response r =
          error_response(make_error(Errc::invalid, "malformed upload body: " + ec.message()));
      r.close = true;
      return send(std::move(r));
    }
    const std::size_t got = upload_->buffer.size() - parser_->get().body().size;
    if (auto slow = check_upload_rate(got)) {
      srv_.metrics.upload("aborted");
      drop_upload();
      Response r = upload_failed(*slow);
      r.close = true;
      return send(std::move(r));
    }
    received_ = got;
    upload_pump();
  }

  /// The next step of an upload: store what was received once the worker is free, receive
  /// more once the receive buffer is free, and finish once everything is received and stored.
  void upload_pump() {
    if (storing_ == 0 && received_ > 0) {
      std::swap(upload_->buffer, upload_->stored);
      if (upload_->buffer.size() < UploadState::kChunk) upload_->buffer.resize(UploadState::kChunk);
      const std::size_t size = std::exchange(received_, 0);
      if (upload_->form) {
        store_on_worker([size](UploadState& u) {
          return u.form->feed(std::string_view(u.stored.data(), size));
        });
      } else {
        store_on_worker(
            [size](UploadState& u) { return u.temp->write_unhashed(u.stored.data(), size); });
        store_on_worker([size](UploadState& u) {
          u.temp->hash(u.stored.data(), size);
          return ok_status();
        });
      }
    }
    if (receiving_ || received_ > 0) return;
    if (!parser_->is_done()) return read_body();
    if (storing_ == 0) finish_upload();
  }

  template <class Step>
  void store_on_worker(Step step) {
    ++storing_;
    srv_.offload([state = upload_, step = std::move(step)] { return step(*state); },
                 [self = this->shared_from_this(), seq = upload_seq_](Status st) {
                   self->on_stored(seq, std::move(st));
                 });
  }

  void on_stored(std::uint64_t seq, const Status& st) {
    if (seq != upload_seq_) return;  // the upload was given up meanwhile
    --storing_;
    if (!st && !store_error_) store_error_ = st.error();
    if (storing_ > 0) return;
    if (store_error_) {
      if (receiving_) {
        // Answer once the read under way returns (at once, as it is cancelled).
        beast::error_code ignored;
        lowest().socket().cancel(ignored);
        return;
      }
      const Error e = *std::exchange(store_error_, std::nullopt);
      drop_upload();
      Response r = upload_failed(e);
      r.close = true;
      return send(std::move(r));
    }
    upload_pump();
  }

  /// Body reads have a deadline of their own rather than the stream's, which closes the socket
  /// when it passes: a client that stalls mid-body is owed an answer (408).
  void arm_body_deadline() {
    lowest().expires_never();
    if (!body_timer_) body_timer_.emplace(stream_.get_executor());
    body_stalled_ = false;
    body_timer_->expires_after(srv_.config.read_timeout);
    body_timer_->async_wait(
        [self = this->shared_from_this(), read = ++body_reads_](beast::error_code ec) {
          if (ec || read != self->body_reads_) return;
          self->body_stalled_ = true;
          beast::error_code ignored;
          self->lowest().socket().cancel(ignored);
        });
  }

  /// The body read returned; true when it was cut off by its deadline.
  bool disarm_body_deadline() {
    ++body_reads_;
    body_timer_->cancel();
    return std::exchange(body_stalled_, false);
  }

  /// The client ended its side of the connection before the body's end.
  static bool body_cut_short(beast::error_code ec) {
    return ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream ||
           ec == asio::error::eof || ec == beast::error::timeout;
  }

  /// The 408 for a body that stopped arriving (`what`: "upload", "request body").
  Error cut_short(std::string_view what, bool stalled) const {
    std::string got;
    const auto length = parser_->content_length();
    const auto remaining = parser_->content_length_remaining();
    if (length && remaining) {
      got = std::to_string(*length - *remaining) + " of " + std::to_string(*length) + " bytes";
    }
    if (stalled) {
      return make_error(Errc::too_slow, std::string(what) + " too slow: no data for " +
                                            std::to_string(srv_.config.read_timeout.count()) +
                                            " s" + (got.empty() ? "" : " (received " + got + ")"));
    }
    return make_error(Errc::too_slow, std::string(what) +
                                          " incomplete: the client stopped sending " +
                                          (got.empty() ? "before its end" : "after " + got));
  }

  /// Counts a body read against the minimum upload rate: the bytes a client delivers while
  /// the server waits for it, averaged over each read_timeout of waiting. Time spent storing
  /// what arrived is not the client's and is not counted. The error when it is too slow.
  std::optional<Error> check_upload_rate(std::size_t got) {
    const auto minimum = srv_.config.min_upload_rate;
    if (minimum == 0) return std::nullopt;
    rate_window_wait_ += std::chrono::steady_clock::now() - read_started_;
    rate_window_bytes_ += got;
    const auto window =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(srv_.config.read_timeout);
    if (rate_window_wait_ < window) return std::nullopt;
    const double waited = std::chrono::duration<double>(rate_window_wait_).count();
    const auto rate = static_cast<std::uint64_t>(static_cast<double>(rate_window_bytes_) / waited);
    rate_window_wait_ = {};
    rate_window_bytes_ = 0;
    if (rate >= minimum) return std::nullopt;
    return make_error(Errc::too_slow,
                      "upload too slow: " + std::to_string(rate) + " bytes/s over the last " +
                          std::to_string(static_cast<long long>(waited)) +
                          " s, below the minimum of " + std::to_string(minimum) + " bytes/s");
  }

  void finish_upload() {
    ++upload_seq_;
    auto state = std::move(upload_);
    srv_.offload(
        [&srv = srv_, state, name = filename_, tokens = srv_.snapshot(), token = token_,
         uploader = uploader_]() -> std::pair<Result<ingest::Ingested>, SnapshotPtr> {
          auto result =
              state->form ? ingest_form(srv, *state->form, *tokens, token)
                          : srv.services.ingestor->ingest(std::move(*state->temp), name, uploader);
          SnapshotPtr snap;
          // Reload before answering so that the file is on its pages once the client hears
          // it was stored.
          if (result && result->outcome != ingest::Outcome::identical) {
            // One stored file moves the generation by one (the files insert trigger); a file
            // that also claims its project moves it by two, and takes the full reload.
            if (auto loaded = srv.load_snapshot_after(result->file.project, 1)) snap = *loaded;
          }
          return {std::move(result), std::move(snap)};
        },
        [self = this->shared_from_this()](std::pair<Result<ingest::Ingested>, SnapshotPtr> done) {
          const auto& result = done.first;
          self->srv_.install(std::move(done.second));
          if (!result) {
            self->srv_.metrics.upload(status_for(result.error().code) >= 500 ? "failed"
                                                                             : "rejected");
            return self->send(self->upload_failed(result.error()));
          }
          const char* outcome = outcome_name(result->outcome);
          self->srv_.metrics.upload(outcome);
          Response r;
          // A damaged file healed by its own bytes is stored again: 201, as for a new one.
          r.status = result->outcome == ingest::Outcome::identical ? 200 : 201;
          r.set("Content-Type", "application/json");
          r.body = render::render_stored_file(result->file);
          spdlog::info("req={} upload {} {} sha256={} size={}", self->id_, outcome,
                       sanitize_for_log(result->file.filename), result->file.sha256,
                       result->file.size);
          self->send(std::move(r));
        });
  }

  static const char* outcome_name(ingest::Outcome outcome) {
    switch (outcome) {
      case ingest::Outcome::stored:
        return "stored";
      case ingest::Outcome::identical:
        return "identical";
      case ingest::Outcome::restored:
        return "restored";
    }
    return "stored";
  }

  /// Finishes a twine-style form upload and ingests its file (worker thread). Unlike PUT, an
  /// identical file is a conflict: twine, poetry and pdm expect a repeated upload to fail,
  /// and `twine upload --skip-existing` recognises the 409.
  static Result<ingest::Ingested> ingest_form(Server::Impl& srv, LegacyUpload& form,
                                              const snapshot::Snapshot& tokens,
                                              const std::string& token) {
    auto filename = form.finish();
    if (!filename) {
      // When the form disagrees with its file, name what is wrong inside the file as well
      // (twine fills name/version from METADATA, so the form often inherits the problem).
      Error e = filename.error();
      if (e.code == Errc::invalid) {
        if (const auto name = form.received_filename(); name && !name->empty()) {
          if (auto st = srv.services.ingestor->check(form.file_path(), *name); !st) {
            e.message += "; " + st.error().message;
          }
        }
      }
      return e;
    }
    // Project-limited tokens can only be checked now that the file name is known.
    const auto name = core::parse_dist_filename(*filename);
    auto granted = auth::authorize(
        tokens.tokens(), token, catalog::Scope::upload,
        name ? std::optional<std::string_view>(name->normalized_name) : std::nullopt);
    if (!granted) return granted.error();
    auto result =
        srv.services.ingestor->ingest(form.take_file(), *filename, auth::uploader_of(**granted));
    if (result && result->outcome == ingest::Outcome::identical) {
      return make_error(Errc::conflict, "File already exists: " + sanitize_for_log(*filename, 300) +
                                            " was uploaded before (identical content)");
    }
    return result;
  }

  Response upload_failed(const Error& e) const {
    if (status_for(e.code) >= 500) {
      spdlog::error("req={} upload of {} failed: {}", id_, sanitize_for_log(filename_), e.message);
    } else {
      spdlog::info("req={} upload of {} rejected: {}", id_, sanitize_for_log(filename_),
                   sanitize_for_log(e.message, 500));
    }
    return error_response(e);
  }

  /// Removes the temp file of an abandoned upload (on a worker: unlink blocks).
  void drop_upload() {
    ++upload_seq_;
    storing_ = 0;
    received_ = 0;
    store_error_.reset();
    if (!upload_) return;
    asio::post(srv_.workers, [state = std::move(upload_)]() mutable { state.reset(); });
  }

  void abort_upload(const char* why) {
    srv_.metrics.upload("aborted");
    spdlog::info("req={} upload of {} aborted: {}", id_, sanitize_for_log(filename_), why);
    drop_upload();
    close();
  }

  // ---- responses -------------------------------------------------------------------------

  template <class Body>
  void fill(bhttp::response<Body>& res, const Response& r) {
    res.result(static_cast<unsigned>(r.status));
    if (!r.reason.empty()) res.reason(r.reason);
    res.set(bhttp::field::server, "wheelforge");
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(keep_alive_ && !r.close && !srv_.stopping);
  }

  void send(Response r) {
    const bool head = req_.method == Method::head;
    const int status = r.status;
    if (auto* range = std::get_if<FileRange>(&r.body)) {
      auto [fd, small] =
          home_.open_blob(range->path, srv_.installed.load(std::memory_order_relaxed));
      if (!fd->valid()) {
        const int err = errno;
        spdlog::error("req={} cannot open blob {}: {}", id_, range->path, std::strerror(err));
        // A blob that is gone was quarantined by fsck --repair (or lost): the file is damaged
        // (the pages drop it once the catalog says so), not missing by the client's mistake.
        if (err == ENOENT && req_.segments.size() == 3) {
          std::string_view name = req_.segments[2];
          if (name.ends_with(".metadata")) name.remove_suffix(std::string_view(".metadata").size());
          return send(error_response(make_error(Errc::unavailable, damaged_message(name))));
        }
        return send(error_response(errno_error(err, "open blob")));
      }
      if constexpr (!kTls) {
        Outgoing out;
        if (!head && small && range->offset + range->length <= small->size()) {
          out.body = std::string_view(*small).substr(static_cast<std::size_t>(range->offset),
                                                     static_cast<std::size_t>(range->length));
          out.keep = std::move(small);
        } else if (!head) {
          out.fd = std::move(fd);
          out.offset = static_cast<off_t>(range->offset);
          out.remain = range->length;
        }
        return send_raw(r, range->length, std::move(out));
      }
      if (head) return send_head(r, range->length);
      auto res = std::make_shared<bhttp::response<RangeFileBody>>();
      fill(*res, r);
      res->body() = RangeFileBody::value_type{fd, range->offset, range->length};
      res->content_length(range->length);
      return write(res, status, range->length);
    }
    std::string_view bytes;
    std::shared_ptr<const void> keep;
    if (auto* s = std::get_if<std::string>(&r.body)) {
      auto owned = std::make_shared<std::string>(std::move(*s));
      bytes = *owned;
      keep = owned;
    } else if (auto* shared = std::get_if<std::shared_ptr<const std::string>>(&r.body)) {
      bytes = **shared;
      keep = *shared;
      if constexpr (!kTls) {
        if (!head && status == 200) {
          if (auto fd = home_.page_file(*shared, srv_.installed.load(std::memory_order_relaxed))) {
            Outgoing out;
            out.fd = std::move(fd);
            out.remain = bytes.size();
            return send_raw(r, bytes.size(), std::move(out));
          }
        }
      }
    }
    if constexpr (!kTls) {
      Outgoing out;
      if (!head && status != 304) {
        out.body = bytes;
        out.keep = std::move(keep);
      }
      return send_raw(r, bytes.size(), std::move(out));
    }
    if (head || status == 304) return send_head(r, status == 304 ? 0 : bytes.size());
    auto res = std::make_shared<bhttp::response<bhttp::span_body<const char>>>();
    fill(*res, r);
    res->body() = bhttp::span_body<const char>::value_type(bytes.data(), bytes.size());
    res->content_length(bytes.size());
    write(res, status, bytes.size(), std::move(keep));
  }

  // ---- plain HTTP: responses written straight to the socket ------------------------------
  // The head is formatted here in one string; it goes out with the body in one writev, and a
  // file body follows with sendfile(2) from the page cache (no copy through user space, no
  // buffer per response). Only when the socket is full does the connection wait.

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

  /// Formats the head of `r` (the same fields fill() sets) and starts writing. `length` is the
  /// Content-Length (also for HEAD); 304 answers carry none.
  void send_raw(const Response& r, std::uint64_t length, Outgoing out) {
    out.status = r.status;
    out.keep_alive = keep_alive_ && !r.close && !srv_.stopping;
    out.length = out.fd ? out.remain : out.body.size();
    std::string& h = out.head;
    h = std::move(head_buf_);  // the previous response's buffer, capacity kept
    h.clear();
    h += "HTTP/1.1 ";
    h += std::to_string(r.status);
    h += ' ';
    if (!r.reason.empty()) {
      h += r.reason;
    } else {
      h += bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(r.status)));
    }
    h += "\r\nServer: wheelforge\r\n";
    for (const auto& [k, v] : r.headers) {
      h += k;
      h += ": ";
      h += v;
      h += "\r\n";
    }
    if (r.status != 304) {
      h += "Content-Length: ";
      h += std::to_string(length);
      h += "\r\n";
    }
    if (!out.keep_alive) h += "Connection: close\r\n";
    h += "\r\n";
    out_ = std::move(out);
    if (!non_blocking_) {
      beast::error_code ec;
      lowest().socket().native_non_blocking(true, ec);
      if (ec) return finish_raw(ec);
      non_blocking_ = true;
    }
    pump();
  }

  void pump() {
    Outgoing& o = *out_;
    const int sock = lowest().socket().native_handle();
    while (o.head_sent < o.head.size() || o.body_sent < o.body.size() || o.remain > 0) {
      ssize_t n = 0;
      if (o.head_sent < o.head.size() || o.body_sent < o.body.size()) {
        iovec iov[2];
        int count = 0;
        if (o.head_sent < o.head.size()) {
          iov[count++] = {o.head.data() + o.head_sent, o.head.size() - o.head_sent};
        }
        if (o.body_sent < o.body.size()) {
          iov[count++] = {const_cast<char*>(o.body.data()) + o.body_sent,
                          o.body.size() - o.body_sent};
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<std::size_t>(count);
        // A file body follows: keep the head back so that both leave in one segment.
        const int more = o.remain > 0 ? MSG_MORE : 0;
        n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | more);
        if (n >= 0) {
          auto done = static_cast<std::size_t>(n);
          const std::size_t from_head = std::min(done, o.head.size() - o.head_sent);
          o.head_sent += from_head;
          o.body_sent += done - from_head;
          continue;
        }
      } else {
        // Large bodies leave in full segments (as nginx's tcp_nopush): cork the socket while
        // the file streams; the head and small bodies are not held back.
        if (!o.corked && o.remain > kCorkThreshold) {
          const int on = 1;
          (void)::setsockopt(sock, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
          o.corked = true;
        }
        constexpr std::uint64_t kMaxPerCall = 1U << 30U;
        n = ::sendfile(sock, o.fd->get(), &o.offset,
                       static_cast<std::size_t>(std::min(o.remain, kMaxPerCall)));
        if (n > 0) {
          o.remain -= static_cast<std::uint64_t>(n);
          continue;
        }
        if (n == 0) {
          // A blob shorter than its catalog size means the store was damaged: end the
          // response rather than pretend (the client sees a short body).
          return finish_raw(beast::errc::make_error_code(beast::errc::io_error));
        }
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return wait_writable();
      return finish_raw(beast::error_code(errno, beast::system_category()));
    }
    finish_raw({});
  }

  /// Waits until the socket takes more bytes, at most the write timeout.
  void wait_writable() {
    if (!wait_timer_) wait_timer_.emplace(stream_.get_executor());
    waiting_ = true;
    wait_timer_->expires_after(srv_.config.write_timeout);
    wait_timer_->async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || !self->waiting_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->lowest().socket().cancel(ignored);
    });
    lowest().socket().async_wait(tcp::socket::wait_write,
                                 [self = this->shared_from_this()](beast::error_code ec) {
                                   self->waiting_ = false;
                                   self->wait_timer_->cancel();
                                   if (self->timed_out_) ec = beast::error::timeout;
                                   if (ec) return self->finish_raw(ec);
                                   self->pump();
                                 });
  }

  static constexpr std::uint64_t kCorkThreshold = 1U << 20U;

  void finish_raw(beast::error_code ec) {
    if (out_->corked) {
      const int off = 0;
      (void)::setsockopt(lowest().socket().native_handle(), IPPROTO_TCP, TCP_CORK, &off,
                         sizeof off);
    }
    const int status = out_->status;
    const std::uint64_t length = out_->length;
    const bool keep_alive = out_->keep_alive;
    head_buf_ = std::move(out_->head);
    out_.reset();
    log(status, length, ec);
    if (ec || !keep_alive) return close();
    read_header();
  }

  void send_head(const Response& r, std::uint64_t length) {
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    fill(*res, r);
    if (r.status != 304) res->set(bhttp::field::content_length, std::to_string(length));
    write(res, r.status, 0);
  }

  template <class Message>
  void write(std::shared_ptr<Message> res, int status, std::uint64_t length,
             std::shared_ptr<const void> keep = nullptr) {
    lowest().expires_after(srv_.config.write_timeout);
    const bool keep_alive = res->keep_alive();
    bhttp::async_write(stream_, *res,
                       [self = this->shared_from_this(), res, keep = std::move(keep), status,
                        length, keep_alive](beast::error_code ec, std::size_t) {
                         self->log(status, length, ec);
                         if (ec || !keep_alive) return self->close();
                         self->read_header();
                       });
  }

  void log(int status, std::uint64_t length, beast::error_code ec) const {
    if (!refusal_.empty()) return;  // no request was read; Impl::refuse logs these
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started_)
                        .count();
    srv_.metrics.request(route_label(req_), status, static_cast<double>(us) / 1e6, length);
    if (!srv_.config.access_log && !ec) return;
    thread_local std::string line;
    line.clear();
    append_access_line(line, id_, method_name(req_.method), req_.target, status, length,
                       static_cast<std::uint64_t>(us), ec ? ec.message() : std::string());
    // Logged as it is: the line needs no formatting by spdlog.
    spdlog::default_logger_raw()->log(spdlog::level::info, spdlog::string_view_t(line));
  }

  void close() {
    if constexpr (kTls) {
      // close_notify first, so TLS clients see a clean end of the stream.
      if (!tls_closing_) {
        tls_closing_ = true;
        lowest().expires_after(std::chrono::seconds(2));
        return stream_.async_shutdown(
            [self = this->shared_from_this()](beast::error_code) { self->close(); });
      }
    }
    beast::error_code ec;
    // Half-close first: the client reads our last response before it sees the socket end,
    // even when we stop reading an unwanted body.
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!draining_ && (drain_on_close_ || (parser_ && !parser_->is_done()))) return drain();
    lowest().close();
  }

  /// Reads and discards what the client still sends (bounded in time and bytes) so that
  /// closing does not reset the connection before the client has read our answer.
  void drain() {
    draining_ = true;
    lowest().expires_after(std::chrono::seconds(2));
    if (!drain_buf_) drain_buf_ = std::make_unique<std::array<char, 64 * 1024>>();
    stream_.async_read_some(asio::buffer(*drain_buf_),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > (64U << 20U)) {
                                return self->lowest().close();
                              }
                              self->drain();
                            });
  }

  Server::Impl& srv_;
  NetThread& home_;                          // the thread this connection lives on
  std::shared_ptr<asio::ssl::context> tls_;  // kept alive while this connection uses it
  Stream stream_;
  bool tls_closing_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> parser_;
  Request req_;
  std::uint64_t id_ = 0;
  std::uint64_t requests_ = 0;
  bool keep_alive_ = false;
  bool idle_ = true;
  bool counted_idle_ = false;  // counted in home_.idle_keep_alive
  ClientCounts::Slot slot_ = ClientCounts::kUncounted;
  std::string refusal_;            // a connection refused at the door: the 503's message
  bool tokens_rechecked_ = false;  // this request's token was looked up in the catalog again
  bool drain_on_close_ = false;    // read what the client still sends before closing
  bool draining_ = false;
  std::uint64_t drained_ = 0;
  std::unique_ptr<std::array<char, 64 * 1024>> drain_buf_;
  std::chrono::steady_clock::time_point started_;
  std::string filename_;
  std::shared_ptr<UploadState> upload_;
  std::uint64_t upload_seq_ = 0;  // moves whenever an upload ends, so late steps are ignored
  bool receiving_ = false;        // a body read is under way
  int storing_ = 0;               // worker tasks storing a chunk
  std::size_t received_ = 0;      // bytes in upload_->buffer waiting to be stored
  std::optional<Error> store_error_;
  std::optional<asio::steady_timer> body_timer_;  // the deadline of a body read
  std::uint64_t body_reads_ = 0;                  // moves when a body read returns
  bool body_stalled_ = false;                     // the deadline passed first
  std::string token_;        // the uploader's token, for checks that need the form's content
  core::Uploader uploader_;  // who a PUT upload is from (project claims)
  // Minimum upload rate: when the current body read started, and the waiting time and bytes
  // of the current averaging window.
  std::chrono::steady_clock::time_point read_started_;
  std::chrono::steady_clock::duration rate_window_wait_{};
  std::uint64_t rate_window_bytes_ = 0;
  std::string admin_body_;
  bool ui_body_ = false;  // the small body being read is a UI form, not an admin request
  std::vector<char> small_body_buf_;
  std::int64_t log_job_ = 0;
  std::uint64_t log_offset_ = 0;
  std::optional<asio::steady_timer> log_timer_;
  std::optional<Outgoing> out_;
  std::string head_buf_;  // kept between responses for its capacity
  std::optional<asio::steady_timer> wait_timer_;
  bool waiting_ = false;
  bool timed_out_ = false;
  bool non_blocking_ = false;
};

void Server::Impl::accept() {
  // Connections go round-robin to the network threads; each lives on its thread's
  // io_context from then on.
  NetThread& target = *threads[next_thread++ % threads.size()];
  acceptor.async_accept(target.ioc, accept_peer,
                        [this, &target](beast::error_code ec, Socket socket) {
                          if (ec) {
                            if (stopping || ec == asio::error::operation_aborted) return;
                            spdlog::warn("accept failed: {}", ec.message());
                            return accept();
                          }
                          socket.set_option(tcp::no_delay(true), ec);
                          metrics.connection_opened();
                          admit(target, std::move(socket), tls);
                          accept();
                        });
}

namespace {

ClientCounts::Key client_key(const asio::ip::address& address) {
  if (address.is_v4()) return ClientCounts::ipv4(address.to_v4().to_bytes());
  return ClientCounts::ipv6(address.to_v6().to_bytes());
}

}  // namespace

// The caps are decided here, on the first thread, as connections arrive: per client address
// first, then the server's. At the server's cap an idle keep-alive connection, on whichever
// thread has one, is closed to make room; with none, the new connection is refused with 503.
void Server::Impl::admit(NetThread& target, Socket socket,
                         const std::shared_ptr<asio::ssl::context>& tls_now) {
  const auto limit = static_cast<std::uint32_t>(
      std::min<std::size_t>(config.max_connections_per_client, UINT32_MAX));
  const auto slot = clients.acquire(client_key(accept_peer.address()), limit);
  if (!slot) {
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(limit) + " per client reached by " +
                      accept_peer.address().to_string(),
                  "too many connections from your address: the limit is " + std::to_string(limit) +
                      " connections per client; retry later");
  }
  if (open_sessions.load() < config.max_connections) {
    open_sessions.fetch_add(1);
    return open(target, std::move(socket), tls_now, *slot);
  }
  NetThread* idle = nullptr;
  for (std::size_t i = 0; i < threads.size() && idle == nullptr; ++i) {
    NetThread& t = *threads[(next_thread + i) % threads.size()];
    if (t.idle_keep_alive.load(std::memory_order_relaxed) > 0) idle = &t;
  }
  if (idle == nullptr) {
    clients.release(*slot);
    return refuse(target, std::move(socket), tls_now,
                  "connection limit of " + std::to_string(config.max_connections) + " reached",
                  "the server is at its connection limit; retry later");
  }
  // Counted now, so that the connections accepted meanwhile see the cap.
  open_sessions.fetch_add(1);
  asio::post(idle->ioc, [this, idle, &target, socket = std::move(socket), tls = tls_now,
                         slot = *slot]() mutable {
    if (evict_idle_session(*idle)) return open(target, std::move(socket), std::move(tls), slot);
    // That connection got busy meanwhile.
    open_sessions.fetch_sub(1);
    clients.release(slot);
    refuse(target, std::move(socket), std::move(tls),
           "connection limit of " + std::to_string(config.max_connections) + " reached",
           "the server is at its connection limit; retry later");
    maybe_finish_stop();
  });
}

void Server::Impl::open(NetThread& target, Socket socket,
                        std::shared_ptr<asio::ssl::context> tls_now, ClientCounts::Slot slot) {
  asio::post(target.ioc, [this, tls_now = std::move(tls_now), socket = std::move(socket),
                          slot]() mutable {
    if (tls_now) {
      std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(tls_now),
                                           Admission{slot, {}})
          ->start();
    } else {
      std::make_shared<Session<TcpStream>>(*this, std::move(socket), Admission{slot, {}})->start();
    }
  });
}

void Server::Impl::refuse(NetThread& target, Socket socket,
                          std::shared_ptr<asio::ssl::context> tls_now, std::string why,
                          std::string message) {
  const auto total = refused.fetch_add(1, std::memory_order_relaxed) + 1;
  // One line a second at most: a flood of connections must not become a flood of lines.
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  auto logged = refusal_logged_ms.load(std::memory_order_relaxed);
  if (now - logged >= 1000 && refusal_logged_ms.compare_exchange_strong(logged, now)) {
    spdlog::warn("{}; refusing connections with 503 ({} refused so far)", why, total);
  }
  // Refusals are answered by sessions of their own, a bounded number at once; beyond that
  // the connection is closed without an answer.
  if (refusing.fetch_add(1) >= kMaxRefusing) {
    refusing.fetch_sub(1);
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  asio::post(target.ioc, [this, tls_now = std::move(tls_now), socket = std::move(socket),
                          message = std::move(message)]() mutable {
    Admission refusal{ClientCounts::kUncounted, std::move(message)};
    if (tls_now) {
      std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(tls_now),
                                           std::move(refusal))
          ->start();
    } else {
      std::make_shared<Session<TcpStream>>(*this, std::move(socket), std::move(refusal))->start();
    }
  });
}

// A request with a token that the snapshot does not know waits for one look at the catalog
// that starts after it arrived: a token created by another process before the request is
// then found. The looks are shared by every waiting request and at most one starts per
// kTokenRecheckInterval, so that unknown tokens cannot make the server hammer SQLite (one
// generation read per interval; the snapshot is reloaded only when the catalog changed).
void Server::Impl::recheck_tokens(std::function<void()> then) {
  asio::io_context& home = here().ioc;
  asio::post(ioc,
             [this, &home, then = std::move(then), guard = asio::make_work_guard(home)]() mutable {
               token_waiters.push_back(TokenWaiter{&home, std::move(then), std::move(guard)});
               run_token_check();
             });
}

void Server::Impl::run_token_check() {
  if (token_check_running || token_timer_armed || token_waiters.empty()) return;
  const auto due = token_check_started + kTokenRecheckInterval;
  if (std::chrono::steady_clock::now() < due) {
    token_timer_armed = true;
    token_timer.expires_at(due);
    token_timer.async_wait([this](beast::error_code) {
      token_timer_armed = false;
      run_token_check();
    });
    return;
  }
  token_check_running = true;
  token_check_started = std::chrono::steady_clock::now();
  auto waiters = std::make_shared<std::vector<TokenWaiter>>(std::move(token_waiters));
  token_waiters.clear();
  offload([this] { return load_if_changed(); },
          [this, waiters](SnapshotPtr s) {
            install(std::move(s));
            token_check_running = false;
            for (auto& w : *waiters) asio::post(*w.home, std::move(w.then));
            run_token_check();
          });
}

/// A new snapshot when the catalog changed since the current one, else null (worker thread).
SnapshotPtr Server::Impl::load_if_changed() {
  // Other processes (`wheelforge ingest`, `token create`) change the catalog too.
  auto gen = services.catalog->generation();
  if (!gen || *gen == generation.load()) return nullptr;
  auto loaded = load_snapshot();
  if (!loaded) {
    spdlog::error("catalog reload failed: {}", loaded.error().message);
    return nullptr;
  }
  spdlog::info("catalog changed (generation {}): {} projects, {} files", *gen,
               (*loaded)->project_count(), (*loaded)->file_count());
  return *loaded;
}

void Server::Impl::schedule_poll() {
  poll_timer.expires_after(config.catalog_poll_interval);
  poll_timer.async_wait([this](beast::error_code ec) {
    if (ec || stopping) return;
    offload([this] { return load_if_changed(); },
            [this](SnapshotPtr s) {
              install(std::move(s));
              schedule_poll();
            });
  });
}

void Server::Impl::begin_stop() {
  if (stopping) return;
  stopping = true;
  spdlog::info("stopping: {} connection(s) open", open_sessions.load());
  beast::error_code ec;
  acceptor.close(ec);
  poll_timer.cancel();
  for (auto& t : threads) {
    asio::post(t->ioc, [t = t.get()] {
      for (SessionBase* s : t->sessions) s->close_if_idle();
    });
  }
  grace_timer.expires_after(config.shutdown_grace);
  grace_timer.async_wait([this](beast::error_code e) {
    if (e) return;
    spdlog::warn("grace period over: closing {} connection(s)", open_sessions.load());
    for (auto& t : threads) t->ioc.stop();
  });
  maybe_finish_stop();
}

void Server::Impl::maybe_finish_stop() {
  if (!stopping || open_sessions.load() != 0) return;
  // On the first thread, which owns the grace timer; the other threads' loops end once they
  // run out of work.
  asio::post(ioc, [this] {
    grace_timer.cancel();
    for (auto& t : threads) t->guard.reset();
  });
}

Server::Server(ServerConfig config, Services services)
    : impl_(std::make_unique<Impl>(std::move(config), services)) {}

Server::~Server() {
  impl_->workers.join();
  impl_->tearing_down = true;
}

namespace {

Result<std::shared_ptr<asio::ssl::context>> load_tls(const ServerConfig& config) {
  if (config.tls_cert_file.empty() && config.tls_key_file.empty()) {
    return std::shared_ptr<asio::ssl::context>();
  }
  if (config.tls_cert_file.empty() || config.tls_key_file.empty()) {
    return make_error(Errc::invalid, "TLS needs both a certificate and a key file");
  }
  try {
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    ctx->use_certificate_chain_file(config.tls_cert_file);
    ctx->use_private_key_file(config.tls_key_file, asio::ssl::context::pem);
    return ctx;
  } catch (const boost::system::system_error& e) {
    return make_error(Errc::invalid, "cannot load TLS certificate '" + config.tls_cert_file +
                                         "' / key '" + config.tls_key_file + "': " + e.what());
  }
}

}  // namespace

Status Server::reload_tls() {
  auto ctx = load_tls(impl_->config);
  if (!ctx) return ctx.error();
  std::promise<void> swapped;
  asio::post(impl_->ioc, [impl = impl_.get(), ctx = std::move(*ctx), &swapped]() mutable {
    impl->tls = std::move(ctx);
    swapped.set_value();
  });
  swapped.get_future().wait();
  return ok_status();
}

Result<std::string> Server::start() {
  Impl& s = *impl_;
  auto tls = load_tls(s.config);
  if (!tls) return tls.error();
  s.tls = std::move(*tls);
  auto loaded = s.load_snapshot();
  if (!loaded) return loaded.error();
  s.install(*loaded);
  // Loading the catalog leaves freed memory behind (the rows before indexing): give it back.
  ::malloc_trim(0);

  beast::error_code ec;
  if (s.config.listen_fd >= 0) {
    // Socket activation: the socket is bound and listening already.
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(s.config.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const auto protocol = addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
    s.acceptor.assign(protocol, s.config.listen_fd, ec);
    if (ec) return make_error(Errc::io, "cannot use the inherited socket: " + ec.message());
  } else {
    const auto address = asio::ip::make_address(s.config.host, ec);
    if (ec) return make_error(Errc::invalid, "invalid listen address '" + s.config.host + "'");
    const tcp::endpoint endpoint(address, s.config.port);
    s.acceptor.open(endpoint.protocol(), ec);
    if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(endpoint, ec);
    if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return make_error(Errc::io, "cannot listen on " + s.config.host + ":" +
                                      std::to_string(s.config.port) + ": " + ec.message());
    }
  }
  const auto bound = s.acceptor.local_endpoint();
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  s.accept();
  s.schedule_poll();
  return host + ":" + std::to_string(bound.port());
}

void Server::run() {
  auto& threads = impl_->threads;
  for (auto& t : threads) t->guard.emplace(t->ioc.get_executor());
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < threads.size(); ++i) {
    others.emplace_back([t = threads[i].get()] {
      t_net_thread = t;
      t->ioc.run();
      t_net_thread = nullptr;
    });
  }
  t_net_thread = threads.front().get();
  threads.front()->ioc.run();
  t_net_thread = nullptr;
  for (auto& t : others) t.join();
}

namespace {

// Runs `fn` once every network thread from `i` on has answered, one after the other.
void visit_threads(Server::Impl& impl, std::size_t i, std::function<void()> fn) {
  asio::post(impl.threads[i]->ioc, [&impl, i, fn = std::move(fn)]() mutable {
    if (i + 1 < impl.threads.size()) return visit_threads(impl, i + 1, std::move(fn));
    fn();
  });
}

}  // namespace

void Server::post(std::function<void()> fn) {
  visit_threads(*impl_, 0, std::move(fn));
}

void Server::reload_catalog(std::function<void(Status)> done) {
  Impl* impl = impl_.get();
  impl->offload([impl]() { return impl->load_snapshot(); },
                [impl, done = std::move(done)](Result<SnapshotPtr> loaded) {
                  if (loaded) impl->install(*loaded);
                  done(loaded ? ok_status() : Status(loaded.error()));
                });
}

void Server::stop() {
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->begin_stop(); });
}

}  // namespace wf::http
