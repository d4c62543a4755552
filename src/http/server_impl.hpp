#pragma once
// The server's state, shared by the listener (listener.cpp), the connections (session.cpp and
// its parts) and the server's own work (server.cpp): network threads, the worker pool, the
// current snapshot, the token rechecks and the graceful stop.

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "client_counts.hpp"
#include "transport.hpp"
#include "wheelforge/catalog/change_feed.hpp"
#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/routes.hpp"
#include "wheelforge/http/server.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::http {

/// One network thread: its own io_context (no locking inside Asio), the connections it serves,
/// and descriptors of recently sent blobs and large pages.
struct NetThread {
  asio::io_context ioc{1};
  std::unordered_set<SessionBase*> sessions;  // touched only on this thread
  // The connections that may be closed to make room at the connection cap, each list in the
  // order its members joined: `fresh`, those that have not sent a whole request yet (from
  // their acceptance); `idle`, idle keep-alive ones (from their last answer). The acceptor
  // reads their sizes and ages to choose the thread; the thread closes the oldest.
  SessionList fresh;
  SessionList idle;
  // Connections handed to this thread whose sessions it has not made yet (they join `fresh`
  // when it does): counted up after the hand-over is queued (release), down when it runs
  // (signed: that may come first). A request to make room queued after seeing it finds them.
  std::atomic<std::int64_t> arriving{0};
  // Requests to close one of them queued to this thread and not run yet (Impl::claim_room).
  std::atomic<std::int64_t> claimed{0};
  /// What evict_one() closed.
  enum class Evicted { none, fresh, idle };
  /// Closes the oldest connection of `fresh`, else the oldest of `idle` (this thread only).
  Evicted evict_one();
  // Open connections of this thread: counted by the listener when it hands one over, no
  // longer counted once the connection has ended (on this thread).
  std::atomic<std::size_t> connections{0};
  // This thread's CPU clock, set when it starts running; the listener reads it to tell
  // whether the thread has been busy lately (see spread.hpp).
  std::atomic<bool> has_cpu_clock{false};
  clockid_t cpu_clock{};
  // The listener's last look at that clock (first thread only).
  std::int64_t seen_cpu_ns = 0;
  std::chrono::steady_clock::time_point seen_at{};
  bool seen_busy = false;
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
  Blob open_blob(const std::string& path, std::uint64_t installed);

  /// A large cached page (at least kFilePage bytes) copied once into an in-memory file, so
  /// that it is sent with sendfile(2) like a blob: no copy of the page per response. Null for
  /// smaller pages, or when the file cannot be made (the page is then sent from memory).
  std::shared_ptr<UniqueFd> page_file(const std::shared_ptr<const std::string>& page,
                                      std::uint64_t installed);

 private:
  /// Both caches are emptied whenever a new snapshot is installed.
  void forget_if_reinstalled(std::uint64_t installed);

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

/// An address in the form client_address.hpp compares (IPv4 as IPv4-mapped IPv6).
inline IpBytes ip_bytes(const asio::ip::address& a) {
  if (a.is_v6()) return a.to_v6().to_bytes();
  return asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()).to_bytes();
}

/// The network thread the calling code runs on (null elsewhere).
extern constinit thread_local NetThread* t_net_thread;

struct Server::Impl {
  Impl(ServerConfig c, Services s);

  ServerConfig config;
  // Set when the server is destroyed: handlers still queued in the io_contexts are destroyed
  // with them, and the sessions they own must then not touch the server's other members.
  // Declared before the threads so that it outlives them.
  bool tearing_down = false;
  // What the handlers see: the services, the server's status (metrics, connections, stopping)
  // and the web UI's login sessions.
  handlers::ServerStatus status;
  handlers::UiSessions ui_sessions;
  handlers::Environment env;
  asio::thread_pool workers;
  // Requests of network routes that needed a worker only to fetch from an upstream index
  // (merged pages), and first downloads of upstream files: threads of their own, so that a
  // slow upstream does not hold the workers that uploads and admin requests need. Only with
  // upstreams configured.
  std::optional<asio::thread_pool> upstream_workers;
  // The network threads; the first one runs on the thread that calls run() and also owns the
  // acceptor and the timers below.
  std::vector<std::unique_ptr<NetThread>> threads;
  asio::io_context& ioc;
  tcp::acceptor acceptor;
  asio::steady_timer poll_timer;
  asio::steady_timer grace_timer;
  /// The thread to make room on at the connection cap, with one of its connections claimed
  /// for that (NetThread::claimed): among the threads with connections that have not sent a
  /// whole request yet and are not claimed, the one holding the oldest (or still taking them
  /// over from the acceptor); else among those with idle keep-alive ones too, the one holding
  /// the one idle longest; null when none has any left. A look at each thread's published
  /// counts and ages (atomics, no lock): any thread.
  NetThread* claim_room();
  /// Closes a connection on `victim` (claim_room()) for the new connection `socket`, then
  /// opens it on `target`; when `victim` has none left by then, claims again (at most once per
  /// thread), then refuses it with 503.
  void make_room(NetThread& victim, NetThread& target, Socket socket,
                 std::shared_ptr<asio::ssl::context> tls, ClientCounts::Slot slot,
                 std::chrono::steady_clock::time_point accepted, std::size_t looks);

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
  // being accepted (first thread only), connections being refused.
  ClientCounts clients;
  tcp::endpoint accept_peer;
  std::atomic<std::size_t> refusing{0};
  std::atomic<std::int64_t> refusal_logged_ms{-1000000};
  std::atomic<std::int64_t> eviction_logged_ms{-1000000};
  static constexpr std::size_t kMaxRefusing = 128;

  std::atomic<std::uint64_t> next_request_id{1};
  // First thread only: the TLS context new connections use (replaced on reload); null for
  // plain HTTP.
  std::shared_ptr<asio::ssl::context> tls;
  // The current snapshot; network threads read it through their own copy (snapshot()).
  mutable std::mutex snapshot_mu;
  SnapshotPtr snapshot_;
  std::atomic<std::uint64_t> installed{0};  // g_installs value of snapshot_
  // Read by workers to skip needless reloads.
  std::atomic<std::uint64_t> generation{0};
  // Tokens' last uses, written to the catalog by the poll and once more when the server stops
  // (on workers); the snapshot whose uses the last flush read, read once more after it is
  // replaced.
  std::mutex uses_mu;
  auth::UseRecorder token_uses;
  SnapshotPtr uses_seen;

  // The change feed's follower (feed.cpp): a thread of its own that applies the feed to the
  // snapshot, and the requests waiting for a catalog position (network threads).
  struct PositionWait {
    std::atomic<bool> done{false};
    std::optional<asio::steady_timer> timer;
    std::function<void(bool)> then;
  };
  struct PositionWaiter {
    std::uint64_t position = 0;
    asio::io_context* home = nullptr;
    std::shared_ptr<PositionWait> wait;
  };
  std::thread follower;
  std::mutex follower_mu;
  std::condition_variable follower_cv;
  bool follower_stop = false;   ///< under follower_mu
  std::uint64_t feed_from = 0;  ///< the position the follower reads from (its thread)
  std::mutex position_mu;
  std::vector<PositionWaiter> position_waiters;
  /// The follower's loop: wait for a NOTIFY or the poll interval, then catch_up().
  void follow_feed();
  /// Reads the feed from feed_from, applies it to the snapshot and wakes the waiters whose
  /// position it reached (the follower's thread, or start() before it runs). An error (the
  /// database unreachable) leaves the position where it was.
  Status catch_up();
  /// Applies one batch to the snapshot (the follower's thread); a failed load answers the
  /// catalog's error.
  Status apply_changes(const catalog::ChangePlan& plan);
  /// Sleeps up to `d` unless the follower is being stopped; true when it is.
  bool follower_sleep(std::chrono::milliseconds d);
  void stop_follower();
  /// The catalog position this replica has applied: the feed's, else its snapshot's
  /// generation (SQLite, where Catalog::position() is the generation).
  [[nodiscard]] std::uint64_t applied_position() const {
    return config.feed != nullptr ? status.feed_position.load() : generation.load();
  }
  /// Adds Wheelforge-Catalog-Stale to `r` when this replica follows a change feed that it has
  /// not read for kFeedStaleAfter (any thread; two atomic loads otherwise).
  void note_catalog_age(handlers::Response& r) const;
  /// Calls `then(true)` on the calling network thread once this replica has applied
  /// `position`, or `then(false)` after config.position_wait.
  void wait_for_position(std::uint64_t position, std::function<void(bool)> then);
  /// Runs the waiters whose position has been applied (any thread); all of them with false
  /// when the server stops.
  void wake_positions(bool stopping = false);

  // The listener (listener.cpp).
  void accept();
  /// The network thread for the next connection (spread.hpp; first thread only).
  NetThread& pick_thread();
  void admit(NetThread& target, Socket socket, const std::shared_ptr<asio::ssl::context>& tls,
             std::chrono::steady_clock::time_point accepted);
  void open(NetThread& target, Socket socket, std::shared_ptr<asio::ssl::context> tls,
            ClientCounts::Slot slot, std::chrono::steady_clock::time_point accepted);
  void refuse(NetThread& target, Socket socket, std::shared_ptr<asio::ssl::context> tls,
              std::string why, std::string message);
  /// Counts (and logs, once a second at most) a connection closed to make room at the cap.
  void evicted(NetThread::Evicted what);

  // Snapshots, token rechecks, polling, stopping (server.cpp).
  void recheck_tokens(std::function<void()> then);
  void run_token_check();
  SnapshotPtr load_if_changed();
  /// Writes the tokens' last uses that are due (worker thread).
  void flush_token_uses(auth::UseRecorder::Due due = auth::UseRecorder::Due::by_interval);
  void schedule_poll();
  /// Records a look at a store in status.readiness, logging once when its state changes.
  void note_readiness(handlers::Readiness::Part part, const Status& looked);
  /// Probes the blob store (with an object store: a HEAD of the bucket) when the last probe is
  /// kStoreProbeInterval old or older and none is running; started by the catalog poll (on
  /// the first network thread), run on a worker.
  void probe_blob_store();
  /// How often the catalog poll also asks the object store whether it answers (/readyz).
  static constexpr std::chrono::seconds kStoreProbeInterval{2};
  std::chrono::steady_clock::time_point store_probed{};  ///< the first network thread's
  std::atomic<bool> store_probing{false};
  void begin_stop();
  void maybe_finish_stop();

  /// The network thread the caller runs on (the first one when called from elsewhere).
  NetThread& here() const { return t_net_thread != nullptr ? *t_net_thread : *threads.front(); }

  /// The current snapshot, as this thread's cached copy: one atomic load per call unless a
  /// new snapshot was installed since the thread last looked.
  const SnapshotPtr& snapshot() const;

  /// Installs a snapshot if it is newer than the current one (any thread). With `after`
  /// (the follower): only while the installed snapshot is still that install's (else false),
  /// and also at the same generation (a project reloaded from the feed whose change moved no
  /// generation past the one a previous reload already took).
  bool install(SnapshotPtr s, std::optional<std::uint64_t> after = std::nullopt);
  void release_on_worker(SnapshotPtr old);

  /// Loads a fresh snapshot (worker thread; blocks on SQLite).
  Result<SnapshotPtr> load_snapshot() const;

  /// The snapshot after this process changed one project (worker thread): only that project
  /// is read again and the others are shared with the current snapshot, when nothing else
  /// changed since (the catalog's generation moved by exactly `changes`); a full load otherwise.
  Result<SnapshotPtr> load_snapshot_after(const std::string& project, std::uint64_t changes) const;

  /// The snapshot to install after a handler of `route` answered with status `answered`
  /// (worker thread): a successful change to the catalog is on the pages before its answer is
  /// sent. Null when nothing changed or the load failed (logged).
  SnapshotPtr reload_after(const handlers::Route& route, const handlers::Context& ctx,
                           int answered) const;

  /// The largest file an upload may carry.
  [[nodiscard]] std::uint64_t max_file_size() const {
    return env.services.ingestor->limits().max_file_size;
  }

  /// Runs `work` on the worker pool (`upstream`: the upstream pool, for a request that needs
  /// a worker only to fetch from an upstream index), then `then(result)` back on the calling
  /// network thread. The work guard keeps that thread's run() alive while the worker is busy.
  template <class Work, class Then>
  void offload(Work work, Then then, bool upstream = false) {
    asio::io_context& home = here().ioc;
    auto& pool = upstream && upstream_workers ? *upstream_workers : workers;
    asio::post(pool, [&home, work = std::move(work), then = std::move(then),
                      guard = asio::make_work_guard(home)]() mutable {
      auto result = work();
      asio::post(home, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }
};

}  // namespace wf::http
