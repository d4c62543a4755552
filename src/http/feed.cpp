// The change feed's follower (docs/scale.md): a thread of its own, never a network thread,
// applies a shared catalog's change feed to this replica's snapshot, and wakes the requests
// that wait for a catalog position (X-Wheelforge-Min-Position).

#include <algorithm>

#include "server_impl.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::http {

namespace {

// How often the feed is read without a NOTIFY (the safety net), and how long the follower
// waits after a failed read before it tries again.
constexpr std::chrono::milliseconds kFeedPoll{500};
// A batch's projects are reloaded in one read (their rows only; the snapshot's indexes are
// shared, not rebuilt) unless it names more than half of the catalog's projects (and more
// than kMinProjectReloads): then one full load, which reads every row once, is the cheaper way.
constexpr std::size_t kMinProjectReloads = 16;
// Feed entries are kept a day; each replica prunes older ones once an hour (a replica that
// was cut off from the database for longer reloads everything when it is back).
constexpr std::chrono::hours kFeedKeep{24};
constexpr std::chrono::hours kFeedPruneEvery{1};
// A feed not read for this long (ten polls) is the database out of reach, not a slow read:
// answers then say how old the pages may be.
constexpr std::int64_t kFeedStaleAfterMicros = 5'000'000;

}  // namespace

void Server::Impl::note_catalog_age(handlers::Response& r) const {
  if (config.feed == nullptr) return;
  const std::int64_t read_at = status.feed_read_at.load(std::memory_order_relaxed);
  if (read_at == 0) return;
  const std::int64_t age = now_micros() - read_at;
  if (age < kFeedStaleAfterMicros) return;
  r.set(handlers::kCatalogStaleHeader, "age=" + std::to_string(age / 1'000'000));
}

bool Server::Impl::follower_sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(follower_mu);
  return follower_cv.wait_for(lock, d, [this] { return follower_stop; });
}

void Server::Impl::stop_follower() {
  {
    std::lock_guard lock(follower_mu);
    follower_stop = true;
  }
  follower_cv.notify_all();
  if (follower.joinable()) follower.join();
}

Status Server::Impl::apply_changes(const catalog::ChangePlan& plan) {
  // Optimistic: built on the installed snapshot, installed only if no other install (this
  // process's own write) came in between; else built again on that one. A failed load is
  // answered with the catalog's own error, which names the database.
  for (int attempt = 0; attempt < 5; ++attempt) {
    SnapshotPtr base;
    std::uint64_t base_install = 0;
    {
      std::lock_guard lock(snapshot_mu);
      base = snapshot_;
      base_install = installed.load();
    }
    SnapshotPtr next;
    if (plan.load == catalog::ChangePlan::Load::everything || !base) {
      auto loaded = load_snapshot();
      if (!loaded) {
        log::error("catalog feed: reload failed: {}", loaded.error().message);
        return loaded.error();
      }
      next = *loaded;
    } else {
      // The batch's projects in one read (with the tokens, which come with every load: a
      // change of tokens alone loads no project).
      std::vector<std::string> names(plan.projects.begin(), plan.projects.end());
      if (names.empty()) names.emplace_back();
      auto contents = env.services.catalog->load_projects(names);
      if (!contents) {
        log::error("catalog feed: reload of {} project(s) failed: {}", names.size(),
                   contents.error().message);
        return contents.error();
      }
      next = snapshot::Snapshot::update(*base, std::move(names), std::move(*contents));
    }
    if (install(next, base_install)) return ok_status();
  }
  return make_error(Errc::unavailable,
                    "the catalog's changes could not be installed: this server's own writes "
                    "kept replacing the snapshot");
}

Status Server::Impl::catch_up() {
  auto batch = config.feed->read(feed_from);
  if (!batch) return batch.error();
  if (!batch->changes.empty()) {
    std::size_t projects = 0;
    {
      std::lock_guard lock(snapshot_mu);
      if (snapshot_) projects = snapshot_->project_count();
    }
    const auto plan =
        catalog::plan_changes(batch->changes, std::max(kMinProjectReloads, projects / 2));
    if (auto applied = apply_changes(plan); !applied) return applied;
    std::int64_t newest = 0;
    for (const auto& c : batch->changes) newest = std::max(newest, c.at_micros);
    status.feed_lag_micros.store(std::max<std::int64_t>(0, now_micros() - newest));
    log::info("catalog feed: {} change(s) applied, position {}", batch->changes.size(),
              batch->position);
  }
  feed_from = batch->position;
  status.feed_read_at.store(now_micros());
  status.feed_position.store(batch->position);
  status.feed_caught_up.store(true);
  wake_positions();
  return ok_status();
}

void Server::Impl::follow_feed() {
  bool healthy = true;
  auto prune_at = std::chrono::steady_clock::now();
  while (!follower_sleep(std::chrono::milliseconds(0))) {
    auto woken = config.feed->wait(kFeedPoll);
    Status st = woken ? catch_up() : Status(woken.error());
    if (st && std::chrono::steady_clock::now() >= prune_at) {
      prune_at = std::chrono::steady_clock::now() + kFeedPruneEvery;
      if (auto pruned = config.feed->prune(kFeedKeep); !pruned) {
        log::warn("catalog feed: entries not pruned: {}", pruned.error().message);
      } else if (*pruned > 0) {
        log::info("catalog feed: {} entries older than {} h pruned", *pruned, kFeedKeep.count());
      }
    }
    if (!st) {
      if (healthy) log::warn("catalog feed: {}; polling", st.error().message);
      healthy = false;
      note_readiness(handlers::Readiness::Part::catalog, st);
      if (follower_sleep(kFeedPoll)) return;
      continue;  // read again from the same position
    }
    if (!healthy) log::info("catalog feed: following again at position {}", feed_from);
    healthy = true;
  }
}

void Server::Impl::wait_for_position(std::uint64_t position, std::function<void(bool)> then) {
  if (applied_position() >= position) return then(true);
  asio::io_context& home = here().ioc;
  auto wait = std::make_shared<PositionWait>();
  wait->then = std::move(then);
  wait->timer.emplace(home);
  wait->timer->expires_after(config.position_wait);
  wait->timer->async_wait([wait](beast::error_code ec) {
    if (ec || wait->done.exchange(true)) return;
    wait->then(false);
  });
  {
    std::lock_guard lock(position_mu);
    position_waiters.push_back(PositionWaiter{position, &home, wait});
  }
  // The follower may have moved on between the first look and the registration.
  if (applied_position() >= position) wake_positions();
}

void Server::Impl::wake_positions(bool stopping) {
  const std::uint64_t applied = applied_position();
  std::vector<PositionWaiter> due;
  {
    std::lock_guard lock(position_mu);
    auto keep = std::partition(position_waiters.begin(), position_waiters.end(),
                               [&](const PositionWaiter& w) {
                                 return !stopping && !w.wait->done.load() && w.position > applied;
                               });
    due.assign(std::make_move_iterator(keep), std::make_move_iterator(position_waiters.end()));
    position_waiters.erase(keep, position_waiters.end());
  }
  for (auto& w : due) {
    asio::post(*w.home, [wait = std::move(w.wait), reached = !stopping] {
      if (wait->done.exchange(true)) return;
      wait->timer->cancel();
      wait->then(reached);
    });
  }
}

}  // namespace wf::http
