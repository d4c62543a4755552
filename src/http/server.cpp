#include "wheelforge/http/server.hpp"

#include <malloc.h>
#include <pthread.h>
#include <sys/socket.h>

#include <future>
#include <thread>

#include "server_impl.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::http {
namespace {

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

std::vector<std::unique_ptr<NetThread>> make_threads(std::size_t n) {
  std::vector<std::unique_ptr<NetThread>> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(std::make_unique<NetThread>());
  return v;
}

std::optional<asio::thread_pool> make_upstream_workers(const ServerConfig& config) {
  if (config.upstreams == nullptr) return std::nullopt;
  return std::optional<asio::thread_pool>(std::in_place,
                                          std::max<std::size_t>(1, config.upstream_threads));
}

}  // namespace

Server::Impl::Impl(ServerConfig c, Services s)
    : config(std::move(c)),
      env{s,
          &status,
          &ui_sessions,
          config.private_reads,
          config.upstreams,
          config.file_serving,
          config.presign_expiry,
          config.oidc,
          config.attestation_roots,
          config.build_certificate},
      workers(std::max<std::size_t>(1, config.worker_threads)),
      upstream_workers(make_upstream_workers(config)),
      threads(make_threads(network_threads_for(config.network_threads))),
      ioc(threads.front()->ioc),
      acceptor(ioc),
      poll_timer(ioc),
      grace_timer(ioc),
      token_timer(ioc),
      // Behind proxies, requests passed on by them are counted too: one per connection more.
      clients(config.trusted_proxies.empty() ? config.max_connections
                                             : 2 * config.max_connections) {}

const SnapshotPtr& Server::Impl::snapshot() const {
  if (t_snapshot.owner != this ||
      t_snapshot.installed != installed.load(std::memory_order_acquire)) {
    std::lock_guard lock(snapshot_mu);
    t_snapshot.owner = this;
    t_snapshot.installed = installed.load(std::memory_order_relaxed);
    t_snapshot.snapshot = snapshot_;
  }
  return t_snapshot.snapshot;
}

bool Server::Impl::install(SnapshotPtr s, std::optional<std::uint64_t> after) {
  SnapshotPtr old;
  {
    std::lock_guard lock(snapshot_mu);
    if (!s) return false;
    if (after) {
      if (installed.load() != *after) return false;
      if (snapshot_ && s->generation() < snapshot_->generation()) return false;
    } else if (snapshot_ && s->generation() <= snapshot_->generation()) {
      return false;
    }
    // Tokens' last uses go on in the new snapshot (flush_token_uses() writes them).
    if (snapshot_) s->tokens().adopt_uses(snapshot_->tokens());
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
  // Without a feed the position is the generation: requests waiting for it go on now.
  if (config.feed == nullptr) wake_positions();
  return true;
}

void Server::Impl::release_on_worker(SnapshotPtr old) {
  if (!old) return;
  asio::post(workers, [old = std::move(old)]() mutable {
    if (old.use_count() > 1) return;  // still in use elsewhere: that holder frees it
    old.reset();
    ::malloc_trim(0);
  });
}

Result<SnapshotPtr> Server::Impl::load_snapshot() const {
  auto contents = env.services.catalog->load();
  if (!contents) return contents.error();
  return snapshot::Snapshot::build(std::move(*contents));
}

Result<SnapshotPtr> Server::Impl::load_snapshot_after(const std::string& project,
                                                      std::uint64_t changes) const {
  SnapshotPtr current;
  {
    std::lock_guard lock(snapshot_mu);
    current = snapshot_;
  }
  auto contents = env.services.catalog->load_project(project);
  if (!contents) return contents.error();
  // On a shared catalog the change feed applies what other processes changed, so this
  // process's own write reloads its project alone, however far their writes moved the
  // generation meanwhile (a full load per upload would grow with the catalog).
  if (current &&
      (config.feed != nullptr || contents->generation == current->generation() + changes)) {
    return snapshot::Snapshot::update(*current, project, std::move(*contents));
  }
  return load_snapshot();
}

SnapshotPtr Server::Impl::reload_after(const handlers::Route& route, const handlers::Context& ctx,
                                       int answered) const {
  // A form's 303 (the web UI's way on after a change) is a success too.
  if (!route.changes_catalog || (answered >= 300 && answered != 303)) return nullptr;
  Result<SnapshotPtr> loaded = SnapshotPtr();
  switch (ctx.changed) {
    case handlers::Changed::nothing:
      return nullptr;
    case handlers::Changed::project:
      // One stored file moves the generation by one (the files insert trigger); a file that
      // also claims its project moves it by two, and takes the full load.
      loaded = load_snapshot_after(ctx.changed_project, 1);
      break;
    case handlers::Changed::everything:
      loaded = load_snapshot();
      break;
  }
  if (!loaded) {
    log::error("catalog reload failed: {}", loaded.error().message);
    return nullptr;
  }
  return *loaded;
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
  auto gen = env.services.catalog->generation();
  // The poll's look at the catalog is also /readyz's (no request reads the database for it).
  note_readiness(handlers::Readiness::Part::catalog, gen ? ok_status() : Status(gen.error()));
  if (!gen || *gen == generation.load()) return nullptr;
  auto loaded = load_snapshot();
  if (!loaded) {
    log::error("catalog reload failed: {}", loaded.error().message);
    return nullptr;
  }
  log::info("catalog changed (generation {}): {} projects, {} files", *gen,
            (*loaded)->project_count(), (*loaded)->file_count());
  return *loaded;
}

void Server::Impl::flush_token_uses(auth::UseRecorder::Due due) {
  std::lock_guard uses_lock(uses_mu);
  SnapshotPtr current;
  {
    std::lock_guard lock(snapshot_mu);
    current = snapshot_;
  }
  const Micros now = now_micros();
  Status st = ok_status();
  if (uses_seen && uses_seen != current) {
    st = token_uses.flush(uses_seen->tokens(), *env.services.catalog, now, due);
  }
  if (st && current) st = token_uses.flush(current->tokens(), *env.services.catalog, now, due);
  if (!st) log::warn("tokens' last use not recorded: {}", st.error().message);
  uses_seen = std::move(current);
}

void Server::Impl::note_readiness(handlers::Readiness::Part part, const Status& looked) {
  if (!status.readiness.record(part, looked)) return;
  const char* what = part == handlers::Readiness::Part::catalog ? "catalog" : "blob store";
  if (looked) {
    log::info("ready: the {} answers again", what);
  } else {
    log::error("not ready: the {} does not answer: {}", what, looked.error().message);
  }
}

void Server::Impl::probe_blob_store() {
  if (env.services.store == nullptr || env.services.store->backend() == store::BlobBackend::file) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - store_probed < kStoreProbeInterval || store_probing.exchange(true)) return;
  store_probed = now;
  // A worker of its own, apart from the catalog poll: a store that does not answer holds this
  // probe up to its timeouts, never the catalog's reloads.
  asio::post(workers, [this] {
    note_readiness(handlers::Readiness::Part::blob_store, env.services.store->probe());
    store_probing = false;
  });
}

void Server::Impl::schedule_poll() {
  poll_timer.expires_after(config.catalog_poll_interval);
  poll_timer.async_wait([this](beast::error_code ec) {
    if (ec || status.stopping) return;
    probe_blob_store();
    offload(
        [this] {
          flush_token_uses();
          // With a change feed its follower applies every change; the poll only looks.
          if (config.feed != nullptr) {
            auto gen = env.services.catalog->generation();
            note_readiness(handlers::Readiness::Part::catalog,
                           gen ? ok_status() : Status(gen.error()));
            return SnapshotPtr();
          }
          return load_if_changed();
        },
        [this](SnapshotPtr s) {
          install(std::move(s));
          schedule_poll();
        });
  });
}

void Server::Impl::begin_stop() {
  if (status.stopping) return;
  status.stopping = true;
  log::info("stopping: {} connection(s) open", status.open_connections.load());
  beast::error_code ec;
  acceptor.close(ec);
  poll_timer.cancel();
  wake_positions(/*stopping=*/true);
  for (auto& t : threads) {
    asio::post(t->ioc, [t = t.get()] {
      for (SessionBase* s : t->sessions) s->close_if_idle();
    });
  }
  grace_timer.expires_after(config.shutdown_grace);
  grace_timer.async_wait([this](beast::error_code e) {
    if (e) return;
    log::warn("grace period over: closing {} connection(s)", status.open_connections.load());
    for (auto& t : threads) t->ioc.stop();
  });
  maybe_finish_stop();
}

void Server::Impl::maybe_finish_stop() {
  if (!status.stopping || status.open_connections.load() != 0) return;
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
  impl_->stop_follower();
  impl_->workers.join();
  if (impl_->upstream_workers) impl_->upstream_workers->join();
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
  // The feed's position is read before the snapshot is loaded: every change below it is in
  // the snapshot, and the follower reads on from there.
  if (s.config.feed != nullptr) {
    auto from = s.config.feed->start();
    if (!from) return from.error();
    s.feed_from = *from;
    s.status.feed = true;
  }
  auto loaded = s.load_snapshot();
  if (!loaded) return loaded.error();
  s.install(*loaded);
  // Caught up before the first request: what was written between the feed's position and the
  // load is applied now, so /readyz answers ready from the start.
  if (s.config.feed != nullptr) {
    if (auto st = s.catch_up(); !st) log::warn("catalog feed: {}; polling", st.error().message);
  }
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
  if (s.config.feed != nullptr) s.follower = std::thread([&s] { s.follow_feed(); });
  return host + ":" + std::to_string(bound.port());
}

void Server::run() {
  auto& threads = impl_->threads;
  for (auto& t : threads) t->guard.emplace(t->ioc.get_executor());
  auto serve = [](NetThread* t) {
    t_net_thread = t;
    if (::pthread_getcpuclockid(::pthread_self(), &t->cpu_clock) == 0) {
      t->has_cpu_clock.store(true, std::memory_order_release);
    }
    t->ioc.run();
    t_net_thread = nullptr;
  };
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < threads.size(); ++i) others.emplace_back(serve, threads[i].get());
  serve(threads.front().get());
  for (auto& t : others) t.join();
  // The uses of the last minute, which the poll held back (on a worker, like every write).
  std::promise<void> flushed;
  asio::post(impl_->workers, [this, &flushed] {
    impl_->flush_token_uses(auth::UseRecorder::Due::all);
    flushed.set_value();
  });
  flushed.get_future().wait();
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
