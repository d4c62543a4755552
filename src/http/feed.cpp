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
// More projects than this in one batch: one full load instead of a reload per project.
constexpr std::size_t kMaxProjectReloads = 16;

}  // namespace

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

bool Server::Impl::apply_changes(const catalog::ChangePlan& plan) {
  // Optimistic: built on the installed snapshot, installed only if no other install (this
  // process's own write) came in between; else built again on that one.
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
        return false;
      }
      next = *loaded;
    } else {
      next = base;
      // Tokens come with every project's load; a change of tokens alone loads no project.
      std::vector<std::string> names(plan.projects.begin(), plan.projects.end());
      if (names.empty()) names.emplace_back();
      for (const auto& name : names) {
        auto contents = env.services.catalog->load_project(name);
        if (!contents) {
          log::error("catalog feed: reload of '{}' failed: {}", name, contents.error().message);
          return false;
        }
        next = snapshot::Snapshot::update(*next, name, std::move(*contents));
      }
    }
    if (install(next, base_install)) return true;
  }
  return false;
}

void Server::Impl::follow_feed() {
  catalog::ChangeFeed& feed = *config.feed;
  bool healthy = true;
  while (!follower_sleep(std::chrono::milliseconds(0))) {
    auto woken = feed.wait(kFeedPoll);
    if (!woken) {
      if (healthy) log::warn("catalog feed: {}; polling", woken.error().message);
      healthy = false;
      note_readiness(handlers::Readiness::Part::catalog, Status(woken.error()));
      if (follower_sleep(kFeedPoll)) return;
      continue;
    }
    auto batch = feed.read(feed_from);
    if (!batch) {
      if (healthy) log::warn("catalog feed: {}", batch.error().message);
      healthy = false;
      note_readiness(handlers::Readiness::Part::catalog, Status(batch.error()));
      if (follower_sleep(kFeedPoll)) return;
      continue;
    }
    if (!healthy) log::info("catalog feed: following again at position {}", batch->position);
    healthy = true;
    if (!batch->changes.empty()) {
      const auto plan = catalog::plan_changes(batch->changes, kMaxProjectReloads);
      if (!apply_changes(plan)) {
        if (follower_sleep(kFeedPoll)) return;
        continue;  // read again from the same position
      }
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
